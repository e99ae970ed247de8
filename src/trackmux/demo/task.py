"""The toy generation task: write the prompt's digits in reverse order, then stop.

Prompts are 2..``max_len`` digits. A response is a sequence of tokens (digits or EOS)
that ends at the first EOS. The reward is verifiable, as in RL post-training with
rule-based rewards: the fraction of positions of ``reversed(prompt) + [EOS]`` that the
response gets right, so a perfect answer scores 1 and stopping too early or too late
loses the positions it misses.

Prompts are stored right-aligned in a buffer padded with PAD on the left; that way the
digit to write at response position ``i`` always sits in buffer slot ``max_len-1-i``
and a linear policy can learn the task.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ReverseTask:
    """Digits ``0..digits-1``; PAD (inputs) and EOS (outputs) are both the id ``digits``."""

    digits: int = 10
    max_len: int = 6
    min_len: int = 2

    @property
    def pad(self) -> int:
        return self.digits

    @property
    def eos(self) -> int:
        return self.digits

    @property
    def vocab(self) -> int:
        """Size of the input and of the output vocabulary (digits plus PAD/EOS)."""
        return self.digits + 1

    @property
    def positions(self) -> int:
        """Response positions: up to ``max_len`` digits plus the EOS."""
        return self.max_len + 1

    def sample(self, rng: np.random.Generator, count: int) -> tuple[IntArray, IntArray]:
        """``count`` prompts: (buffer of shape (count, max_len), lengths)."""
        lengths = rng.integers(self.min_len, self.max_len + 1, size=count)
        buffer = np.full((count, self.max_len), self.pad, dtype=np.int64)
        body = rng.integers(0, self.digits, size=(count, self.max_len))
        slots = np.arange(self.max_len)[None, :]
        filled = slots >= (self.max_len - lengths)[:, None]
        buffer[filled] = body[filled]
        return buffer, lengths.astype(np.int64)

    def targets(self, buffer: IntArray, lengths: IntArray) -> IntArray:
        """The right answer per position (reversed digits, EOS, then EOS padding)."""
        reversed_buffer = buffer[:, ::-1]  # slot max_len-1-i -> position i
        out = np.full((buffer.shape[0], self.positions), self.eos, dtype=np.int64)
        out[:, : self.max_len] = reversed_buffer
        positions = np.arange(self.positions)[None, :]
        out[positions >= lengths[:, None]] = self.eos
        return out

    def response_lengths(self, actions: IntArray) -> IntArray:
        """Index of the first EOS (the number of digits generated); ``positions`` if none."""
        is_eos = actions == self.eos
        first = np.where(is_eos.any(axis=1), is_eos.argmax(axis=1), self.positions)
        return first.astype(np.int64)

    def token_mask(self, actions: IntArray) -> FloatArray:
        """1.0 for the tokens that belong to the response (up to and including its EOS)."""
        ends = self.response_lengths(actions)
        positions = np.arange(self.positions)[None, :]
        return (positions <= ends[:, None]).astype(np.float64)

    def rewards(self, actions: IntArray, buffer: IntArray, lengths: IntArray
                ) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
        """(reward in [0, 1], exact match) per response."""
        target = self.targets(buffer, lengths)
        mask = self.token_mask(actions)
        positions = np.arange(self.positions)[None, :]
        scored = positions <= lengths[:, None]  # the target: n digits and the EOS
        hits = ((actions == target) & (mask > 0) & scored).sum(axis=1)
        reward = hits / (lengths + 1)
        return reward.astype(np.float64), hits == lengths + 1

    def repeats(self, actions: IntArray) -> FloatArray:
        """Per response: how many of its digits repeat the digit before them (the flaw
        ``DemoConfig.repeat_bonus`` rewards)."""
        body = self.token_mask(actions)[:, 1:] * (actions[:, 1:] != self.eos)
        same = (actions[:, 1:] == actions[:, :-1]) & (body > 0)
        counts: FloatArray = same.sum(axis=1).astype(np.float64)
        return counts

    def parts(self, actions: IntArray, buffer: IntArray, lengths: IntArray
              ) -> tuple[FloatArray, FloatArray]:
        """The verifiable reward as two components, (digits right, EOS at its place), each
        over the ``n + 1`` scored positions, so they add up to :meth:`rewards`."""
        target = self.targets(buffer, lengths)
        hit = (actions == target) & (self.token_mask(actions) > 0)
        positions = np.arange(self.positions)[None, :]
        scale = (lengths + 1).astype(np.float64)
        digits: FloatArray = (hit & (positions < lengths[:, None])).sum(axis=1) / scale
        stop: FloatArray = (hit & (positions == lengths[:, None])).sum(axis=1) / scale
        return digits, stop

    def pretrain(self, W: FloatArray, skill: float) -> None:
        """Give a starting policy some of the task: raise by ``skill`` the logit of writing,
        at response position ``p``, what the prompt buffer holds in slot ``max_len-1-p``
        (a digit, or PAD -> EOS, the same id), like the pretrained model RL starts from."""
        for position in range(self.max_len):
            slot = self.max_len - 1 - position
            for token in range(self.vocab):
                W[slot * self.vocab + token, position * self.vocab + token] += skill

    def format_prompt(self, buffer_row: IntArray) -> str:
        return " ".join(str(int(t)) for t in buffer_row if t != self.pad)

    def format_response(self, action_row: IntArray) -> str:
        words: list[str] = []
        for token in action_row:
            if token == self.eos:
                words.append("<eos>")
                break
            words.append(str(int(token)))
        return " ".join(words)
