"""A linear-softmax policy over response positions, trained by GRPO with a KL penalty.

The policy reads the one-hot prompt buffer and gives each response position its own
softmax over the output vocabulary: ``logits[p, o] = sum_j W[(j, x_j), (p, o)] + b[(p, o)]``.
Gradients are written out by hand (d log softmax / d logits = onehot - probs), so the demo needs
numpy only. The objective is GRPO's: group-relative advantages, a clipped importance
ratio over a few inner epochs, and the k3 estimate of KL to the frozen initial policy,
averaged over response tokens (verl's "token-mean").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def one_hot(tokens: IntArray, size: int) -> FloatArray:
    out: FloatArray = np.eye(size, dtype=np.float64)[tokens]
    return out


def log_softmax(logits: FloatArray) -> FloatArray:
    shifted: FloatArray = logits - logits.max(axis=-1, keepdims=True)
    out: FloatArray = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return out


@dataclass
class LinearPolicy:
    """One weight matrix from the flattened one-hot prompt (slots * vocab_in) to every
    position's logits (positions * vocab_out), plus biases: a matmul each way."""

    W: FloatArray
    b: FloatArray
    positions: int
    vocab_out: int

    @classmethod
    def initial(cls, rng: np.random.Generator, positions: int, slots: int, vocab_in: int,
                vocab_out: int, scale: float) -> LinearPolicy:
        """A random starting point: the 'pretrained' model RL begins from and the KL
        reference."""
        W = rng.normal(0.0, scale, size=(slots * vocab_in, positions * vocab_out))
        b = rng.normal(0.0, scale, size=(positions * vocab_out,))
        return cls(W, b, positions, vocab_out)

    def copy(self) -> LinearPolicy:
        return LinearPolicy(self.W.copy(), self.b.copy(), self.positions, self.vocab_out)

    def logits(self, inputs: FloatArray) -> FloatArray:
        """(batch, positions, vocab_out) from one-hot inputs (batch, slots, vocab_in)."""
        flat = inputs.reshape(inputs.shape[0], -1) @ self.W + self.b
        return flat.reshape(inputs.shape[0], self.positions, self.vocab_out)

    def gradients(self, inputs: FloatArray, d_logits: FloatArray) -> dict[str, FloatArray]:
        """Gradients of W and b from d(loss)/d(logits) of shape (batch, positions, vocab)."""
        flat = d_logits.reshape(d_logits.shape[0], -1)
        return {"W": inputs.reshape(inputs.shape[0], -1).T @ flat, "b": flat.sum(axis=0)}

    def sample(self, rng: np.random.Generator, inputs: FloatArray) -> IntArray:
        probs = np.exp(log_softmax(self.logits(inputs)))
        draws = rng.random((*probs.shape[:-1], 1))
        actions = (probs.cumsum(axis=-1) < draws).sum(axis=-1)
        out: IntArray = np.minimum(actions, probs.shape[-1] - 1).astype(np.int64)
        return out


@dataclass
class Adam:
    lr: float
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    t: int = 0
    moments: dict[str, tuple[FloatArray, FloatArray]] = field(default_factory=dict)

    def step(self, params: dict[str, FloatArray], grads: dict[str, FloatArray]) -> None:
        self.t += 1
        for name, grad in grads.items():
            m, v = self.moments.get(name, (np.zeros_like(grad), np.zeros_like(grad)))
            m = self.beta1 * m + (1 - self.beta1) * grad
            v = self.beta2 * v + (1 - self.beta2) * grad * grad
            self.moments[name] = (m, v)
            m_hat = m / (1 - self.beta1 ** self.t)
            v_hat = v / (1 - self.beta2 ** self.t)
            params[name] -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


def group_advantages(rewards: FloatArray, group: int, eps: float = 1e-6) -> FloatArray:
    """GRPO: (r - mean) / std within each group of ``group`` responses to one prompt.
    A group whose responses all score the same carries no signal (advantage 0)."""
    grouped = rewards.reshape(-1, group)
    mean = grouped.mean(axis=1, keepdims=True)
    std = grouped.std(axis=1, keepdims=True)
    out: FloatArray = ((grouped - mean) / (std + eps)).reshape(-1)
    return out


@dataclass(frozen=True)
class UpdateStats:
    loss: float
    pg_loss: float
    kl: float
    entropy: float
    clip_fraction: float
    grad_norm: float
    token_kl: FloatArray  # (batch, positions) k3 per token at rollout time


def grpo_update(policy: LinearPolicy, reference: LinearPolicy, optimizer: Adam,
                inputs: FloatArray, actions: IntArray, mask: FloatArray,
                advantages: FloatArray, *, kl_coef: float, clip: float, epochs: int
                ) -> UpdateStats:
    """Run ``epochs`` clipped policy-gradient steps on one batch of rollouts.

    The statistics are those of the first epoch (the policy that generated the batch),
    which is what trainers report."""
    vocab = policy.vocab_out
    chosen = one_hot(actions, vocab)
    tokens = max(float(mask.sum()), 1.0)
    ref_logp = (log_softmax(reference.logits(inputs)) * chosen).sum(-1)
    old_logp: FloatArray | None = None
    first: UpdateStats | None = None
    adv = advantages[:, None]
    for _ in range(epochs):
        logp_all = log_softmax(policy.logits(inputs))
        probs = np.exp(logp_all)
        logp = (logp_all * chosen).sum(-1)
        if old_logp is None:
            old_logp = logp.copy()
        ratio = np.exp(logp - old_logp)
        clipped = np.where(adv >= 0, ratio > 1 + clip, ratio < 1 - clip)
        surrogate = np.minimum(ratio * adv, np.clip(ratio, 1 - clip, 1 + clip) * adv)
        log_ref_ratio = ref_logp - logp
        k3 = np.exp(log_ref_ratio) - log_ref_ratio - 1.0
        pg_loss = float((-surrogate * mask).sum() / tokens)
        kl = float((k3 * mask).sum() / tokens)
        # d(loss)/d(logp) per token, then through log-softmax to the logits.
        d_logp = (np.where(clipped, 0.0, -adv * ratio)
                  + kl_coef * (1.0 - np.exp(log_ref_ratio))) * mask / tokens
        d_logits = d_logp[..., None] * (chosen - probs)
        grads = policy.gradients(inputs, d_logits)
        grad_norm = float(np.sqrt(sum(float((g * g).sum()) for g in grads.values())))
        if first is None:
            entropy = -(probs * logp_all).sum(-1)
            first = UpdateStats(
                loss=pg_loss + kl_coef * kl, pg_loss=pg_loss, kl=kl,
                entropy=float((entropy * mask).sum() / tokens),
                clip_fraction=0.0, grad_norm=grad_norm, token_kl=k3 * mask)
        else:
            frac = float((clipped * mask).sum() / tokens)
            first = UpdateStats(first.loss, first.pg_loss, first.kl, first.entropy,
                                max(first.clip_fraction, frac), first.grad_norm, first.token_kl)
        params = {"W": policy.W, "b": policy.b}
        optimizer.step(params, grads)
    assert first is not None
    return first
