"""idle_steps: a run whose updates began but most of whose steps still update nothing.

The class of the real corpus's ``cs336-sandyhu-grpo-lr3e-6-underfits`` (issue 42): a GRPO
loop whose every rollout fails on most batches, so the gradient is exactly 0 there, with a
few scattered updates that never add up to learning. Its healthy twins: the same flat
start followed by learning, an occasional all-flat batch, and a loss or a reward spread of
exactly 0 (what TRL and the Unsloth notebooks log on healthy steps) with a gradient.
"""

from __future__ import annotations

import random

import pytest
from synthetic import run_doctor

from trackmux.core.events import MetricsEvent

FLAT_START = 20


def grpo_loop(steps: int, idle_share: float, seed: int, *, solved: bool = False,
              idle_from: int = FLAT_START) -> list[MetricsEvent]:
    """A GRPO loop: every rollout fails on its first ``FLAT_START`` steps (reward, loss and
    gradient exactly 0), then from ``idle_from`` each step idles (every group flat: the
    gradient exactly 0) with the chance ``idle_share``; an idle step's reward is 0 (every
    rollout failed) or, ``solved``, 1 (every rollout succeeded)."""
    rng = random.Random(seed)
    events = []
    for step in range(1, steps + 1):
        idle = step <= FLAT_START or (step >= idle_from and rng.random() < idle_share)
        if idle:
            reward = 1.0 if solved and step > FLAT_START else 0.0
            data = {"train_reward": reward, "grad_norm": 0.0, "loss": 0.0}
        else:
            data = {"train_reward": rng.uniform(0.2, 0.8) if solved else rng.uniform(0.004, 0.02),
                    "grad_norm": rng.uniform(0.1, 0.8), "loss": rng.gauss(0.0, 0.01)}
        events.append(MetricsEvent(data, step, float(step)))
    return events


def idle_findings(events: list[MetricsEvent]) -> list:
    return [f for f in run_doctor(events) if f.rule == "idle_steps"]


@pytest.mark.parametrize("seed", range(5))
def test_a_run_that_idles_on_most_steps_after_its_first_update_is_found(seed: int) -> None:
    """Every rollout fails on 80% of the steps after a flat start: a few scattered updates,
    no learning. Found, dated at the run's first step (the flat start is the same
    episode), saying the idle steps' reward is the low one."""
    [found] = idle_findings(grpo_loop(160, 0.8, seed))
    assert (found.severity, found.step, found.keys) == ("warning", 1, ("grad_norm",))
    assert "fails every rollout" in found.message, found.message


@pytest.mark.parametrize("seed", range(5))
def test_a_flat_start_that_then_learns_stays_quiet(seed: int) -> None:
    """The healthy twin: the same flat start, then an all-flat batch on 10% of the steps
    (a batch of hard prompts), and a burst of them just after the first update (CS336's
    healthy seed: ``0+00++0000`` after its first update)."""
    events = grpo_loop(300, 0.1, seed)
    for event in events[FLAT_START + 1:FLAT_START + 8]:
        event.data.update(train_reward=0.0, grad_norm=0.0, loss=0.0)
    assert idle_findings(events) == []


def test_a_zero_loss_or_a_flat_batch_with_a_gradient_is_no_idle_step() -> None:
    """TRL logs a loss of exactly 0 on most healthy steps, and a batch of one flat group
    has a reward spread of 0 (half the steps of the Unsloth notebooks): neither is a step
    without an update while the gradient is not 0."""
    rng = random.Random(3)
    events = [MetricsEvent({"reward": rng.uniform(0.2, 0.8), "loss": 0.0,
                            "reward_std": 0.0 if rng.random() < 0.6 else 0.3,
                            "grad_norm": rng.uniform(0.05, 0.5)}, step, float(step))
              for step in range(1, 301)]
    assert idle_findings(events) == []


def test_a_run_that_stops_updating_because_it_solved_its_prompts_says_so() -> None:
    """After 100 steps of learning, every rollout succeeds on 80% of the steps: the episode
    is dated where the idle steps began, not at the run's first, and the message says
    the idle steps' reward is the high one."""
    [found] = idle_findings(grpo_loop(200, 0.8, 1, solved=True, idle_from=120))
    assert found.severity == "warning" and 120 <= found.step <= 125, found.step
    assert "solved these prompts" in found.message, found.message


def test_bursts_of_idle_steps_are_weaker_evidence_than_as_many_scattered() -> None:
    """The idle steps' own serial correlation widens the count's spread: 31 of 40 is
    conclusive scattered (about 1 in 2,200 for a run that updates on half its steps) and
    not when idle steps come in runs (lag-1 correlation 0.8)."""
    from trackmux.doctor.rules.idle import idle_chance

    scattered, bursty = idle_chance(31, 40, 0.0), idle_chance(31, 40, 0.8)
    assert scattered < 0.001 < bursty
    assert idle_chance(20, 40, 0.0) > 0.4  # half of them: nothing to say


def test_the_real_corpus_flat_batches_read_as_idle_steps_raise_nothing() -> None:
    """The harshest reading of the healthy real runs: every step whose reward spread is
    exactly 0 (a batch of one flat group: 43-47% of the steps of three Unsloth notebooks)
    taken as a step without an update, as it would be at a KL coefficient of 0. Still no
    finding: under half the steps, scattered."""
    import json
    from pathlib import Path

    from trackmux.doctor.config import resolve
    from trackmux.doctor.rules.idle import IdleSteps

    judged = 0
    for path in sorted((Path(__file__).parent / "real" / "cases").glob("*.json")):
        case = json.loads(path.read_text(encoding="utf-8"))
        spreads = [points for key, points in case["series"].items()
                   if key.endswith("reward_std")]
        if case["label"] != "healthy" or not spreads or len(spreads[0]) < 40:
            continue
        rule = IdleSteps(resolve(True)["idle_steps"])
        found = [f for step, spread in spreads[0]
                 for f in rule.update(MetricsEvent(
                     {"grad_norm": 0.0 if spread == 0 else 0.5}, step, float(step)))]
        assert found == [], (case["id"], [f.message for f in found])
        judged += 1
    assert judged >= 5  # the Unsloth notebooks
