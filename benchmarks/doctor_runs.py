"""Generated RL runs for the doctor's calibration (issue 42): healthy ones, and faulty ones
of the same families with a known onset.

A run is drawn from a seed alone (:func:`draw`), so a number names it: a framework dialect
(verl, TRL, NeMo-RL, slime, OpenRLHF, or a hand-written loop's own key names), a length of
200-5,000 steps, logged every 1-50 steps, and a noise family shared by its curves:

- ``iid``: Gaussian noise, at a small, the usual or a large scale;
- ``ar1``: autocorrelated noise between logged points (phi 0.3-0.95), the same marginal
  spread (a batch mix that drifts, a learning-rate schedule's wobble);
- ``student_t``: heavy tails (df 2.5-5): a batch of hard prompts, a grad-norm spike.

On top, a scenario: a plain learning curve, a slow trend (the reward still climbing at the
end, the response length growing 2-3x over the run as reasoning runs do), a curriculum (a
harder dataset at a planned step: the reward drops a notch, then learns again) or a
response-budget raise (the length cap raised: lengths jump, truncation falls). Some runs
log a key that is NaN at every step by design (a term the trainer does not compute).

The curves are meant to look like real runs' (verl's GSM8K/DAPO examples, TRL's GRPO
logs), drawn before the rules were measured on them, and not fitted to the rules since:
the point is to learn how often a rule fires on what a healthy run can look like.

A fault (:data:`FAULTS`) changes one family of curves from its onset (30-70% into the
run; an entropy collapse also stops the reward's climb there): :func:`events` yields the
run's events in spool order, :class:`Run` says what was drawn (and, for a fault, its onset
and which rules are expected to find it).
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from trackmux.core.events import ConfigEvent, Event, MetricsEvent, TableEvent

DIALECTS = ("verl", "trl", "nemo_rl", "slime", "openrlhf", "custom")
NOISE = ("iid", "ar1", "student_t")
SCENARIOS = ("plain", "trend", "curriculum", "budget_raise")

#: signal -> key, per dialect (doctor/dialects.py has where each name was read); a signal a
#: dialect does not log is absent. ``custom`` is a hand-written loop's own names (issue 42)
KEYS: dict[str, dict[str, str]] = {
    "verl": {
        "reward": "critic/score/mean", "kl": "actor/kl_loss", "ppo_kl": "actor/ppo_kl",
        "entropy": "actor/entropy", "grad_norm": "actor/grad_norm",
        "length": "response_length/mean", "truncation": "response_length/clip_ratio",
        "loss": "actor/pg_loss", "clip_frac": "actor/pg_clipfrac",
        "is_mean": "rollout_corr/rollout_is_mean",
        "ess": "rollout_corr/rollout_is_eff_sample_size", "mismatch_kl": "rollout_corr/kl",
        "val": "val-core/openai/gsm8k/reward/mean@1", "timing": "timing_s/step",
    },
    "trl": {
        "reward": "train/reward", "kl": "train/kl", "entropy": "train/entropy",
        "grad_norm": "train/grad_norm", "length": "train/completions/mean_length",
        "truncation": "train/completions/clipped_ratio", "loss": "train/loss",
        "clip_frac": "train/clip_ratio/region_mean", "zero_std": "train/frac_reward_zero_std",
        "is_mean": "train/sampling/importance_sampling_ratio/mean",
        "comp_a": "train/rewards/accuracy_reward/mean",
        "comp_b": "train/rewards/format_reward/mean", "timing": "train/num_tokens",
    },
    "nemo_rl": {
        "reward": "train/reward", "entropy": "train/approx_entropy",
        "grad_norm": "train/grad_norm", "length": "train/mean_gen_tokens_per_sample",
        "loss": "train/loss", "mult_prob": "train/token_mult_prob_error",
        "gen_kl": "train/gen_kl_error", "val": "validation/accuracy",
    },
    "slime": {
        "reward": "rollout/raw_reward", "kl": "train/kl_loss", "ppo_kl": "train/ppo_kl",
        "entropy": "train/entropy_loss", "grad_norm": "train/grad_norm",
        "length": "rollout/response_len/mean", "truncation": "rollout/truncated_ratio",
        "loss": "train/pg_loss", "clip_frac": "train/pg_clipfrac",
        "logp_diff": "train/train_rollout_logprob_abs_diff",
    },
    "openrlhf": {
        "reward": "train/reward", "kl": "train/kl", "length": "train/response_length",
        "loss": "train/policy_loss", "clip_frac": "train/ppo_clip_ratio",
        "mismatch_kl": "train/vllm_kl", "timing": "train/actor_lr",
    },
    "custom": {
        "reward": "avg_reward", "kl": "kl_to_ref", "entropy": "policy_entropy",
        "grad_norm": "grad_norm", "length": "response_len_mean", "loss": "loss",
        "zero_std": "zero_std_frac", "comp_a": "rewards/correct/mean",
        "comp_b": "rewards/format/mean", "val": "eval/accuracy",
    },
}
#: a key that is NaN at every step by design, per dialect (a term not computed)
NAN_KEYS = {"verl": "critic/vf_loss", "trl": "train/kl", "nemo_rl": "train/kl_penalty",
            "slime": "train/kl_loss", "openrlhf": "train/ptx_loss", "custom": "kl_to_ref"}


@dataclass(frozen=True)
class Fault:
    """A failure: the signals it needs the dialect to log, and the rules that find it."""

    name: str
    needs: tuple[str, ...]
    rules: tuple[str, ...]


#: every fault family; ``rules`` are the rule names (or prefixes) whose warning or
#: critical finding at or after the onset counts as finding it
FAULTS: dict[str, Fault] = {f.name: f for f in (
    Fault("reward_collapse", ("reward",), ("reward_collapse",)),
    Fault("kl_runaway", ("kl",), ("kl_blowup",)),
    Fault("entropy_collapse", ("entropy",), ("entropy_collapse",)),
    Fault("entropy_explosion", ("entropy",), ("entropy",)),
    Fault("length_to_cap", ("length",), ("length",)),
    Fault("flat_groups", (), ("flat_groups", "zero_std_groups")),
    Fault("reward_frozen", ("reward",), ("reward_frozen",)),
    Fault("reward_hacking", ("comp_a", "comp_b"), ("reward_hacking", "component_divergence",
                                                   "overoptimization")),
    Fault("mismatch_drift", (), ("mismatch",)),
    Fault("nan", ("reward",), ("nonfinite",)),
)}
MISMATCH_SIGNALS = ("is_mean", "ess", "mismatch_kl", "mult_prob", "gen_kl", "logp_diff")


@dataclass
class Run:
    """What one seed drew."""

    seed: int
    dialect: str
    steps: int
    every: int
    noise: str
    scale: float  # the noise's size against each curve's usual one
    phi: float  # ar1's correlation between logged points
    df: float  # student_t's degrees of freedom
    scenario: str
    change: int  # the step of a curriculum or budget raise (0: none)
    nan_key: str  # a key NaN at every step ("" none)
    tables: bool  # a rollout table (uid, score) with every logged step
    fault: str = ""
    onset: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def logged(self) -> int:
        return len(range(0, self.steps, self.every))

    def label(self) -> str:
        what = f"{self.fault}@{self.onset}" if self.fault else "healthy"
        return (f"seed {self.seed}: {self.dialect} {self.steps} steps every {self.every}, "
                f"{self.noise} x{self.scale:g}"
                + (f" phi {self.phi:.2f}" if self.noise == "ar1" else "")
                + (f" df {self.df:g}" if self.noise == "student_t" else "")
                + f", {self.scenario}, {what}")


def draw(seed: int, fault: str = "") -> Run:
    """The run of ``seed``: healthy, or with ``fault`` (a name of :data:`FAULTS`)."""
    rng = random.Random(seed)
    dialect = DIALECTS[seed % len(DIALECTS)]
    if fault:
        keys = KEYS[dialect]
        spec = FAULTS[fault]
        # a fault needs its signals in the run's dialect: the next dialect that has them
        for shift in range(len(DIALECTS)):
            d = DIALECTS[(seed + shift) % len(DIALECTS)]
            keys = KEYS[d]
            if all(n in keys for n in spec.needs) and _can(fault, d):
                dialect = d
                break
    steps = int(math.exp(rng.uniform(math.log(200), math.log(5000))))
    every = max(1, min(50, int(math.exp(rng.uniform(0, math.log(51))))))
    if fault:  # a fault is judged on at least 40 logged points (a healthy run may have 4)
        every = max(1, min(every, steps // 40))
    noise = NOISE[(seed // len(DIALECTS)) % len(NOISE)]
    scale = rng.choice((0.5, 1.0, 2.0)) if noise == "iid" else 1.0
    phi = rng.uniform(0.3, 0.95) if noise == "ar1" else 0.0
    df = rng.choice((2.5, 3.0, 5.0)) if noise == "student_t" else 0.0
    scenario = SCENARIOS[rng.randrange(len(SCENARIOS))]
    change = int(steps * rng.uniform(0.3, 0.7)) if scenario in ("curriculum",
                                                                 "budget_raise") else 0
    nan_key = NAN_KEYS[dialect] if rng.random() < 0.15 else ""
    tables = (dialect not in ("trl", "custom")) and (rng.random() < 0.3 or
                                                     fault == "flat_groups")
    onset = 0
    if fault:
        if nan_key == KEYS[dialect].get("kl"):
            nan_key = ""  # the fault's own curve must be there
        onset = int(steps * rng.uniform(0.3, 0.7))
        onset -= onset % every
        if fault in ("kl_runaway", "reward_collapse", "length_to_cap"):
            change = 0 if scenario == "curriculum" else change
    return Run(seed, dialect, steps, every, noise, scale, phi, df, scenario, change, nan_key,
               tables, fault, onset)


def _can(fault: str, dialect: str) -> bool:
    if fault == "mismatch_drift":
        return any(s in KEYS[dialect] for s in MISMATCH_SIGNALS)
    return True


class Noise:
    """One curve's noise process: ``next()`` is the noise of the next logged point, in
    units of the curve's usual spread."""

    def __init__(self, run: Run, rng: random.Random) -> None:
        self.run, self.rng = run, rng
        self.state = rng.gauss(0.0, 1.0)

    def next(self) -> float:
        run, rng = self.run, self.rng
        if run.noise == "ar1":
            innovation = rng.gauss(0.0, math.sqrt(1.0 - run.phi * run.phi))
            self.state = run.phi * self.state + innovation
            return self.state
        if run.noise == "student_t":
            chi = sum(rng.gauss(0.0, 1.0) ** 2 for _ in range(int(run.df)))
            if run.df != int(run.df):  # half a degree of freedom: a gamma draw
                chi += rng.gammavariate((run.df - int(run.df)) / 2.0, 2.0)
            return rng.gauss(0.0, 1.0) / math.sqrt(chi / run.df)
        return run.scale * rng.gauss(0.0, 1.0)


def saturating(x: float, rate: float) -> float:
    """0 at x=0 rising to about 1 at x=1."""
    return (1.0 - math.exp(-rate * x)) / (1.0 - math.exp(-rate))


class Curves:
    """The healthy course of every signal of one run, as functions of the step."""

    def __init__(self, run: Run, rng: random.Random) -> None:
        self.run = run
        n = run.steps
        # the success rate at the start: a run whose groups are nearly all failed at
        # the start is the flat-groups fault family, not a healthy run
        self.r0 = rng.uniform(0.1, 0.45)
        self.r1 = min(0.97, self.r0 + rng.uniform(0.05, 0.55))
        self.rate = rng.uniform(1.0, 6.0) if run.scenario != "trend" else rng.uniform(0.1, 0.8)
        self.rm_offset = rng.choice((0.0, 0.0, 0.0, rng.uniform(-3.0, 3.0)))  # RM logits
        self.rm_scale = 1.0 if self.rm_offset == 0.0 else rng.uniform(1.0, 4.0)
        self.reward_sigma = rng.uniform(0.01, 0.05)
        self.kl1 = math.exp(rng.uniform(math.log(0.003), math.log(0.08)))
        self.kl_rate = rng.uniform(0.5, 5.0)
        self.ppo_kl = math.exp(rng.uniform(math.log(2e-4), math.log(5e-3)))
        self.e0 = rng.uniform(0.3, 2.0)
        self.e_end = rng.uniform(0.35, 0.95)
        self.g0 = math.exp(rng.uniform(math.log(0.05), math.log(5.0)))
        self.l0 = rng.uniform(150.0, 1500.0)
        # lengths grow by a rate per step, not per run: reasoning runs (DeepSeek-R1-Zero,
        # DAPO) grow 1.3-2x per 1,000 steps at most, up to about 3x over a long run
        per_1000 = rng.uniform(-0.2, 0.3) if run.scenario != "trend" else rng.uniform(0.3, 0.7)
        self.l_growth = max(0.7, min(3.0, math.exp(per_1000 * n / 1000)))
        self.cap = int(self.l0 * max(self.l_growth, 1.0) * rng.uniform(2.5, 6.0))
        self.budget = rng.uniform(1.2, 1.6)  # a budget raise: lengths grow this much
        self.drop = rng.uniform(0.1, 0.3)  # a curriculum's drop, as a share of the reward
        self.clip = math.exp(rng.uniform(math.log(5e-4), math.log(0.03)))
        self.is_sigma = math.exp(rng.uniform(math.log(0.002), math.log(0.03)))
        self.mismatch_kl = math.exp(rng.uniform(math.log(3e-4), math.log(3e-3)))
        self.logp = math.exp(rng.uniform(math.log(0.003), math.log(0.03)))
        self.group = rng.choice((4, 8, 16))
        self.b0 = rng.uniform(0.2, 0.7)  # a second reward term (format): its course
        self.b1 = rng.uniform(max(self.b0, 0.6), 0.95)
        self.n = n

    def progress(self, step: int) -> float:
        return step / max(1, self.n - 1)

    def accuracy(self, step: int, held_out: bool = False) -> float:
        """The reward as a success rate in [0, 1]; ``held_out``: on a fixed validation
        set (a curriculum changes the training prompts, not those)."""
        run, x = self.run, self.progress(step)
        r = self.r0 + (self.r1 - self.r0) * saturating(x, self.rate)
        if run.scenario == "curriculum" and step >= run.change and not held_out:
            since = (step - run.change) / max(1, self.n - run.change)
            r = r * (1 - self.drop) + (r - r * (1 - self.drop)) * saturating(since, 4.0) * 0.8
        return r

    def length(self, step: int) -> float:
        run, x = self.run, self.progress(step)
        length = self.l0 * (1 + (self.l_growth - 1) * x)
        if run.scenario == "budget_raise" and step >= run.change:
            length *= 1 + (self.budget - 1) * min(1.0, (step - run.change) / 20.0)
        return length

    def cap_at(self, step: int) -> float:
        run = self.run
        if run.scenario == "budget_raise" and step >= run.change:
            return self.cap * self.budget * 1.5
        return self.cap

    def truncation(self, step: int) -> float:
        """The share of responses past the cap, lengths spread about exponentially."""
        return math.exp(-self.cap_at(step) / max(1.0, self.length(step)) * 1.2)


def _lognormal(value: float, noise: float, sigma: float) -> float:
    return value * math.exp(sigma * max(-6.0, min(6.0, noise)))


def events(run: Run) -> Iterator[Event]:
    """The run's events in spool order: a metrics event per logged step (and a rollout
    table beside it, for runs that log one)."""
    rng = random.Random(run.seed * 7919 + 17)
    curves = Curves(run, rng)
    keys = KEYS[run.dialect]
    noises: dict[str, Noise] = {}

    def noise(name: str) -> float:
        process = noises.get(name)
        if process is None:
            process = noises[name] = Noise(run, random.Random(rng.random()))
        return process.next()

    fault = _fault_effect(run, curves, rng)
    val_every = max(run.every, 10 * rng.randint(1, 5))
    time = 1_700_000_000.0
    configured = rng.random() < 0.7
    if configured:  # the run's config, with its response-length cap
        yield ConfigEvent(_config(run, int(curves.cap)), 0, time)
    raised = False
    interval = rng.uniform(10.0, 120.0)
    for step in range(0, run.steps, run.every):
        time += interval * run.every * rng.uniform(0.9, 1.1)
        if configured and run.scenario == "budget_raise" and step >= run.change \
                and not raised:  # the budget raise, as the config says it
            raised = True
            yield ConfigEvent(_config(run, int(curves.cap_at(step))), step, time)
        values: dict[str, float] = {}
        acc = min(1.0, max(0.0, curves.accuracy(step) + curves.reward_sigma * noise("reward")))
        values["reward"] = curves.rm_offset + curves.rm_scale * acc
        x = curves.progress(step)
        kl = curves.kl1 * saturating(x, curves.kl_rate)
        values["kl"] = max(0.0, _lognormal(kl, noise("kl"), 0.15) + 1e-5 * abs(noise("kl0")))
        values["ppo_kl"] = _lognormal(curves.ppo_kl, noise("ppo_kl"), 0.3)
        entropy = curves.e0 * (1 - (1 - curves.e_end) * saturating(x, 2.0))
        values["entropy"] = _lognormal(entropy, noise("entropy"), 0.04)
        values["grad_norm"] = _lognormal(curves.g0 * (1 - 0.4 * x), noise("grad"), 0.25)
        values["length"] = _lognormal(curves.length(step), noise("length"), 0.04)
        trunc = curves.truncation(step)
        values["truncation"] = min(1.0, max(0.0, trunc * math.exp(0.2 * noise("trunc"))))
        values["loss"] = 0.02 * noise("loss") - 0.01
        values["clip_frac"] = _lognormal(curves.clip, noise("clip"), 0.2)
        p_same = acc ** curves.group + (1 - acc) ** curves.group
        values["zero_std"] = min(1.0, max(0.0, p_same + 0.03 * noise("zero_std")))
        values["is_mean"] = 1.0 + curves.is_sigma * noise("is_mean")
        values["ess"] = min(1.0, 0.97 - 2 * curves.is_sigma + curves.is_sigma * noise("ess"))
        values["mismatch_kl"] = _lognormal(curves.mismatch_kl, noise("mkl"), 0.2)
        values["gen_kl"] = _lognormal(curves.mismatch_kl / 3, noise("gkl"), 0.2)
        values["mult_prob"] = 1.0 + _lognormal(curves.mismatch_kl * 3, noise("mpe"), 0.2)
        values["logp_diff"] = _lognormal(curves.logp, noise("logp"), 0.15)
        values["comp_a"] = min(1.0, max(0.0, acc + 0.03 * noise("comp_a")))
        values["comp_b"] = min(1.0, max(0.0, curves.b0 + (curves.b1 - curves.b0)
                                        * saturating(x, 6.0) + 0.03 * noise("comp_b")))
        values["val"] = min(1.0, max(0.0, curves.accuracy(step, True) - 0.05
                                     + 0.02 * noise("val")))
        values["timing"] = interval * rng.uniform(0.9, 1.1)
        if fault is not None:
            fault(step, values)
        data: dict[str, float] = {}
        for signal, key in keys.items():
            if signal == "val" and step % val_every:
                continue
            data[key] = values[signal]
        if run.nan_key:
            data[run.nan_key] = math.nan
        yield MetricsEvent(data, step, time)
        if run.tables:
            yield _table(run, curves, values, step, time, rng)


def _config(run: Run, cap: int) -> dict[str, Any]:
    """The part of a run's config that names its response-length cap, in its framework's
    words (doctor/rules/length_cap.py)."""
    if run.dialect == "verl":
        return {"data": {"max_response_length": cap, "train_batch_size": 512}}
    if run.dialect == "trl":
        return {"max_completion_length": cap, "num_generations": 8}
    if run.dialect == "slime":
        return {"rollout_max_response_len": cap}
    if run.dialect == "openrlhf":
        return {"generate_max_len": cap}
    if run.dialect == "nemo_rl":
        return {"policy": {"generation": {"max_new_tokens": cap}}}
    return {"max_new_tokens": cap, "lr": 1e-6}


def _table(run: Run, curves: Curves, values: dict[str, float], step: int, time: float,
           rng: random.Random) -> TableEvent:
    """A rollout table: 8 prompts of ``curves.group`` samples each, scored 0 or 1 at the
    batch's success rate (``values["flat"]`` forces every group flat)."""
    acc = values.get("table_acc", min(1.0, max(0.0, (values["reward"] - curves.rm_offset)
                                                / curves.rm_scale)))
    spread = values.get("table_spread", 0.25)  # prompts differ in difficulty
    rows: list[list[Any]] = []
    for g in range(8):
        p = min(1.0, max(0.0, acc + rng.gauss(0.0, spread)))
        for _ in range(curves.group):
            rows.append([f"{step}-{g}", float(rng.random() < p)])
    return TableEvent("train/rollouts", ["uid", "score"], rows, step, time)


#: the environment variable that picks the entropy-collapse fault's reward: "stalls" (the
#: default: its climb stops at the onset) or "climbs" (it keeps the healthy course)
ENTROPY_FAULT = "DOCTOR_CALIBRATION_ENTROPY_FAULT"


def _hold_reward(curves: Curves, v: dict[str, float], step: int, onset: int) -> None:
    """The reward's course (and the accuracy's, on the training and the held-out set)
    held where it was at ``onset``; each point keeps its noise."""
    gone = curves.accuracy(step) - curves.accuracy(onset)
    acc = (v["reward"] - curves.rm_offset) / curves.rm_scale
    v["reward"] = curves.rm_offset + curves.rm_scale * min(1.0, max(0.0, acc - gone))
    v["comp_a"] = min(1.0, max(0.0, v["comp_a"] - gone))
    held = curves.accuracy(step, True) - curves.accuracy(onset, True)
    v["val"] = min(1.0, max(0.0, v["val"] - held))


def _fault_effect(run: Run, curves: Curves, rng: random.Random
                  ) -> Callable[[int, dict[str, float]], None] | None:
    """What the run's fault does to a logged step's values, from its onset on."""
    if not run.fault:
        return None
    onset = run.onset
    ramp = rng.uniform(5.0, 30.0)
    name = run.fault
    keys = KEYS[run.dialect]

    def share(step: int, length: float = ramp) -> float:
        return min(1.0, (step - onset) / length) if step >= onset else -1.0

    if name == "reward_collapse":
        floor = rng.uniform(0.0, 0.3)
        run.extra["floor"] = floor

        def effect(step: int, v: dict[str, float]) -> None:
            s = share(step)
            if s >= 0:
                acc = (v["reward"] - curves.rm_offset) / curves.rm_scale
                low = acc * floor
                v["reward"] = curves.rm_offset + curves.rm_scale * (acc + (low - acc) * s)
                v["comp_a"] = v["comp_a"] * (1 - s) + v["comp_a"] * floor * s
    elif name == "kl_runaway":
        tenfold = rng.uniform(20.0, 60.0)  # steps for the KL to grow 10x

        def effect(step: int, v: dict[str, float]) -> None:
            if step >= onset:
                growth = 10 ** min(3.0, (step - onset) / tenfold)
                v["kl"] = max(v["kl"], curves.kl1 * 0.5) * growth
    elif name in ("entropy_collapse", "entropy_explosion"):
        # the entropy moves to a share of itself: down to 1-5%, or up 3-6x (and lengths
        # with it, as an exploding policy rambles). A collapse also stops the reward's
        # climb at the onset (its noise goes on): exploration is gone, so the policy stops
        # buying reward with entropy (Cui et al. 2025, "The Entropy Mechanism of
        # Reinforcement Learning for Reasoning Language Models"; DAPO, Yu et al. 2025);
        # ENTROPY_FAULT=climbs keeps the reward's healthy climb (the shape before)
        explodes = name == "entropy_explosion"
        to = rng.uniform(3.0, 6.0) if explodes else rng.uniform(0.01, 0.05)
        stalls = not explodes and os.environ.get(ENTROPY_FAULT, "stalls") != "climbs"

        def effect(step: int, v: dict[str, float]) -> None:
            s = share(step)
            if s >= 0:
                v["entropy"] *= math.exp(math.log(to) * s)
                if explodes:
                    v["length"] *= 1 + 0.5 * s
            if stalls and step >= onset:
                _hold_reward(curves, v, step, onset)
    elif name == "length_to_cap":
        climb = rng.uniform(20.0, 80.0)

        def effect(step: int, v: dict[str, float]) -> None:
            s = share(step, climb)
            if s >= 0:
                cap = curves.cap_at(step)
                v["length"] = v["length"] + (cap * 0.97 - v["length"]) * s
                v["truncation"] = v["truncation"] + (rng.uniform(0.6, 0.95)
                                                     - v["truncation"]) * s
    elif name == "flat_groups":
        solved = rng.random() < 0.5

        def effect(step: int, v: dict[str, float]) -> None:
            s = share(step)
            if s >= 0:
                target = 0.995 if solved else 0.005
                # every prompt solved (or failed) alike: the prompts' spread goes too
                v["table_acc"] = target if s >= 1 else (1 - s) * 0.5 + s * target
                v["table_spread"] = 0.25 * (1 - s)
                v["zero_std"] = v["zero_std"] + (rng.uniform(0.93, 1.0) - v["zero_std"]) * s
                acc = v["table_acc"]
                v["reward"] = curves.rm_offset + curves.rm_scale * acc
    elif name == "reward_frozen":
        exact = rng.random() < 0.5

        def effect(step: int, v: dict[str, float]) -> None:
            if step >= onset:
                level = run.extra.setdefault("level", v["reward"])
                v["reward"] = level if exact else level * (1 + 1e-4 * rng.gauss(0.0, 1.0))
    elif name == "reward_hacking":
        span = rng.uniform(30.0, 100.0)

        def effect(step: int, v: dict[str, float]) -> None:
            s = share(step, span)
            if s >= 0:
                start_a = run.extra.setdefault("a", v["comp_a"])
                start_b = run.extra.setdefault("b", v["comp_b"])
                v["comp_b"] = min(1.0, start_b + (1.0 - start_b) * s + 0.01 * rng.gauss(0, 1))
                v["comp_a"] = max(0.0, v["comp_a"] - start_a * 0.6 * s)
                v["val"] = max(0.0, v["val"] - v["val"] * 0.5 * s)
    elif name == "mismatch_drift":
        which = [s for s in MISMATCH_SIGNALS if s in keys]
        target = which[rng.randrange(len(which))]
        run.extra["signal"] = target
        drift = rng.uniform(20.0, 60.0)
        direction = rng.choice((1.5, -0.6))  # the mean weight to 2.5 or to 0.4

        def effect(step: int, v: dict[str, float]) -> None:
            s = share(step, drift)
            if s >= 0:
                if target == "is_mean":
                    v["is_mean"] += direction * s
                elif target == "ess":
                    v["ess"] = v["ess"] - 0.75 * s
                elif target == "mult_prob":
                    v["mult_prob"] = v["mult_prob"] + 0.08 * s
                else:  # a distance from a perfect match that grows 20-fold
                    v[target] = v[target] * (1 + 19 * s)
    elif name == "nan":
        target = keys["reward"] if rng.random() < 0.5 else keys.get("grad_norm",
                                                                     keys["reward"])
        signal = next(s for s, k in keys.items() if k == target)
        run.extra["key"] = target

        def effect(step: int, v: dict[str, float]) -> None:
            if step >= onset:
                v[signal] = math.nan
    else:
        raise ValueError(f"no fault {name!r}; known: {sorted(FAULTS)}")
    return effect
