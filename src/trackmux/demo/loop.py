"""The demo's training loop: GRPO post-training of a small policy on CPU, logged live.

Every number it logs comes from the optimisation: rewards of sampled responses, the
k3 KL to the frozen reference, the surrogate loss, the entropy of the policy. Every step
it logs every rollout to the samples ledger (``log_samples``: GRPO groups and reward
components, what the doctor's ledger rules read); every ``sample_every`` steps a table of
rollout samples and a per-token KL heatmap.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from trackmux.demo import heatmap
from trackmux.demo.policy import Adam, LinearPolicy, group_advantages, grpo_update, one_hot
from trackmux.demo.task import ReverseTask


class Logger(Protocol):
    """The part of :class:`trackmux.Run` the loop uses."""

    def log(self, data: dict[str, Any], step: int | None = None) -> None: ...

    def log_table(self, key: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                  step: int | None = None) -> None: ...

    def log_image(self, key: str, image: Any, step: int | None = None,
                  caption: str | None = None) -> None: ...

    def log_samples(self, key: str, samples: Any, step: int | None = None) -> None: ...


@dataclass(frozen=True)
class DemoConfig:
    steps: int = 200
    seed: int = 0
    prompts_per_step: int = 16
    group_size: int = 8
    learning_rate: float = 0.03
    kl_coef: float = 0.1
    clip_ratio: float = 0.2
    ppo_epochs: int = 2
    init_scale: float = 0.5
    sample_every: int = 20
    samples_shown: int = 8
    #: a flaw in the reward the policy is trained on (0: none): a bonus of
    #: ``repeat_bonus * repeats ** repeat_power`` per response, where ``repeats`` counts the
    #: digits that repeat the one before them, like a reward model that likes what it has
    #: seen often. With a power above 1 it pays little for the odd repeat and a lot for a
    #: response that is one digit over and over, so a policy learns the task first and finds
    #: the flaw later. ``trackmux demo --failure reward-hacking`` sets it with a KL
    #: coefficient ten times too small to hold the policy near its reference.
    repeat_bonus: float = 0.0
    repeat_power: float = 1.0
    #: log every rollout (all groups, with their reward components) through
    #: ``log_samples`` every this many steps (0: never)
    ledger_every: int = 1
    #: how much of the task the starting policy (and KL reference) already knows: the
    #: logit bonus of the right token at each position (0: a random start)
    pretrained: float = 0.0
    task: ReverseTask = field(default_factory=ReverseTask)

    def __post_init__(self) -> None:
        for name in ("steps", "prompts_per_step", "sample_every", "samples_shown",
                     "ppo_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("ledger_every", "pretrained", "repeat_bonus"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 (GRPO compares responses within a "
                             f"group), got {self.group_size}")

    def as_config(self) -> dict[str, Any]:
        """Nested hyperparameters as a trainer would log them."""
        raw = asdict(self)
        return {
            "task": {"name": "reverse-digits", **raw.pop("task")},
            "reward": {"repeat_bonus": raw.pop("repeat_bonus"),
                       "repeat_power": raw.pop("repeat_power")},
            "algorithm": {"name": "grpo", "kl_estimator": "k3", "loss_agg": "token-mean",
                          "kl_coef": raw.pop("kl_coef"), "clip_ratio": raw.pop("clip_ratio"),
                          "group_size": raw.pop("group_size"),
                          "ppo_epochs": raw.pop("ppo_epochs")},
            "optim": {"name": "adam", "lr": raw.pop("learning_rate")},
            "model": {"name": "linear-softmax", "init_scale": raw.pop("init_scale"),
                      "pretrained": raw.pop("pretrained")},
            "trainer": raw,
        }


# One colour scale for every step's heatmap, so steps can be compared. The demo's per-token
# k3 KL has a 95th percentile of 1-5 over a 200-step run, with rare spikes far above.
KL_HEATMAP_SCALE = 5.0


@dataclass
class DemoResult:
    rewards: list[float]
    seconds: float


def train(config: DemoConfig, logger: Logger) -> DemoResult:
    """Train for ``config.steps`` steps, logging each step to ``logger``."""
    task = config.task
    rng = np.random.default_rng(config.seed)
    policy = LinearPolicy.initial(rng, task.positions, task.max_len, task.vocab, task.vocab,
                                  config.init_scale)
    if config.pretrained:
        task.pretrain(policy.W, config.pretrained)
    reference = policy.copy()
    optimizer = Adam(config.learning_rate)
    rewards_seen: list[float] = []
    started = time.perf_counter()
    for step in range(config.steps):
        tick = time.perf_counter()
        buffer, lengths = task.sample(rng, config.prompts_per_step)
        buffer = np.repeat(buffer, config.group_size, axis=0)
        lengths = np.repeat(lengths, config.group_size)
        inputs = one_hot(buffer, task.vocab)
        actions = policy.sample(rng, inputs)
        mask = task.token_mask(actions)
        rewards, exact = task.rewards(actions, buffer, lengths)
        trained_on = rewards
        if config.repeat_bonus:
            trained_on = rewards + flaw_bonus(config, task, actions)
        advantages = group_advantages(trained_on, config.group_size)
        stats = grpo_update(policy, reference, optimizer, inputs, actions, mask, advantages,
                            kl_coef=config.kl_coef, clip=config.clip_ratio,
                            epochs=config.ppo_epochs)
        elapsed = time.perf_counter() - tick
        reward_mean = float(rewards.mean())
        rewards_seen.append(reward_mean)
        logger.log({
            "reward/mean": reward_mean,
            "reward/std": float(rewards.std()),
            "reward/exact_match": float(exact.mean()),
            "kl/divergence": stats.kl,
            "policy/loss": stats.loss,
            "policy/pg_loss": stats.pg_loss,
            "policy/entropy": stats.entropy,
            "policy/clip_fraction": stats.clip_fraction,
            "policy/grad_norm": stats.grad_norm,
            "generation/length": float(task.response_lengths(actions).mean()),
            "throughput/samples_per_second": len(rewards) / max(elapsed, 1e-9),
            **({"reward/model_score": float(trained_on.mean())} if config.repeat_bonus
               else {}),
        }, step=step)
        if config.ledger_every and step % config.ledger_every == 0:
            _log_ledger(config, logger, step, buffer, lengths, actions, trained_on,
                        advantages, exact)
        if step % config.sample_every == 0 or step == config.steps - 1:
            _log_samples(config, logger, step, buffer, actions, mask, rewards, advantages,
                         stats.token_kl)
    return DemoResult(rewards_seen, time.perf_counter() - started)


def flaw_bonus(config: DemoConfig, task: ReverseTask, actions: np.ndarray) -> np.ndarray:
    """What the flawed reward model adds to the verifiable reward, per response."""
    out: np.ndarray = config.repeat_bonus * task.repeats(actions) ** config.repeat_power
    return out


def _log_ledger(config: DemoConfig, logger: Logger, step: int, buffer: np.ndarray,
                lengths: np.ndarray, actions: np.ndarray, trained_on: np.ndarray,
                advantages: np.ndarray, exact: np.ndarray) -> None:
    """Every rollout of the step, as verl logs them (``docs/samples.md``): the GRPO group
    (``uid``: one per prompt), the total reward the policy was trained on and its
    components, so the doctor's ledger rules (flat groups, a component that turns against
    the total) read real data."""
    task = config.task
    digits, stop = task.parts(actions, buffer, lengths)
    columns: dict[str, Any] = {
        "uid": [f"{step}-{i // config.group_size}" for i in range(len(actions))],
        "prompt": [task.format_prompt(row) for row in buffer],
        "response": [task.format_response(row) for row in actions],
        "reward": np.round(trained_on, 4).tolist(),
        "reward/digits": np.round(digits, 4).tolist(),
        "reward/stop": np.round(stop, 4).tolist(),
    }
    if config.repeat_bonus:
        columns["reward/repeats"] = np.round(flaw_bonus(config, task, actions), 4).tolist()
    columns["advantage"] = np.round(advantages, 4).tolist()
    columns["acc"] = exact.tolist()
    logger.log_samples("rollout/groups", columns, step=step)


def _log_samples(config: DemoConfig, logger: Logger, step: int, buffer: np.ndarray,
                 actions: np.ndarray, mask: np.ndarray, rewards: np.ndarray,
                 advantages: np.ndarray, token_kl: np.ndarray) -> None:
    """One response per prompt (the first of each group), as a table and a KL heatmap."""
    task = config.task
    pick = np.arange(0, len(rewards), config.group_size)[: config.samples_shown]
    rows = []
    for i in pick:
        rows.append([task.format_prompt(buffer[i]), task.format_response(actions[i]),
                     round(float(rewards[i]), 3), round(float(advantages[i]), 3)])
    logger.log_table("rollout/samples", ["prompt", "response", "reward", "advantage"], rows,
                     step=step)
    labels = [task.format_prompt(buffer[i]) for i in pick]
    tokens = [task.format_response(actions[i]).split() for i in pick]
    image = heatmap.render(token_kl[pick], mask[pick], labels, tokens, scale=KL_HEATMAP_SCALE)
    logger.log_image("kl/per_token", np.asarray(image), step=step,
                     caption=f"k3 KL to the reference per response token at step {step} "
                             f"(rows: one sample per prompt; grey: after EOS; one colour "
                             f"scale 0..{KL_HEATMAP_SCALE:g} for every step, above it the "
                             "top colour)")
