"""Issue 42, ``length_collapse``: responses that shrink to a few tokens (Stanford CS336's GRPO
runs at a high learning rate: "collapses to very short outputs that are format-correct and
answer-wrong"), judged in the curve's own noise; a policy that gets concise (its answers
shrinking to 60-70%, then growing again) stays quiet. The length is often logged only on
the validation split, every 10 steps (``val_response_length``)."""

from __future__ import annotations

import random

import pytest
from synthetic import healthy, metrics, noisy, run_doctor, serious

from trackmux.core.events import MetricsEvent
from trackmux.doctor.config import resolve
from trackmux.doctor.engine import Doctor


def grpo_loop(lengths: dict[int, float], seed: int, steps: int = 200) -> list[MetricsEvent]:
    """A hand-written GRPO loop's keys: a training reward and format reward every step, the
    validation length and answer reward every 10 steps (``lengths`` by step)."""
    rng = random.Random(seed)
    events = []
    for step in range(steps):
        data = {"train_reward": min(1.0, max(0.0, 0.05 + 0.002 * step + rng.gauss(0, 0.03))),
                "train_format_reward": min(1.0, 0.5 + 0.002 * step + rng.gauss(0, 0.03)),
                "grad_norm": 0.5 + abs(rng.gauss(0, 0.1)), "loss": rng.gauss(0, 0.01)}
        if step in lengths:
            data["val_response_length"] = lengths[step]
            data["val_answer_reward"] = 0.05 + 0.001 * step
        events.append(MetricsEvent(data, step, float(step)))
    return events


def sparse(values: list[float]) -> dict[int, float]:
    return {10 * i: v for i, v in enumerate(values)}


@pytest.mark.parametrize("seed", range(4))
def test_a_validation_length_that_collapses_is_found_where_it_fell(seed: int) -> None:
    rng = random.Random(seed)
    fall = rng.choice([2, 3, 4])  # the 3rd-5th evaluation: steps 20-40
    values = [110 + rng.gauss(0, 4) for _ in range(fall)] + \
        [12 + rng.gauss(0, 1.5) for _ in range(21 - fall)]
    doctor = Doctor(resolve(True))
    raised = [(event.step, f) for event in grpo_loop(sparse(values), seed)
              for f in doctor.feed(event) if f.rule == "length_collapse"]
    assert raised, "not found"
    at, found = raised[0]
    assert found.severity == "warning" and found.keys == ("val_response_length",)
    assert found.step == 10 * fall, found.message  # dated where it fell
    assert at <= 10 * fall + 40  # told within four evaluations
    assert "collapsed" in found.message and "%" in found.message


@pytest.mark.parametrize("seed", range(6))
def test_answers_that_get_concise_and_then_longer_are_healthy(seed: int) -> None:
    """The CS336 healthy seeds: 110 tokens, down to 50-80 before the accuracy rises, then
    130-160."""
    rng = random.Random(seed)
    low = rng.uniform(0.45, 0.75)
    shape = [1.0, 1.0, 0.9, low + 0.05, low] + [1.1 + 0.02 * i for i in range(16)]
    values = [110 * v + rng.gauss(0, 4) for v in shape]
    found = run_doctor(grpo_loop(sparse(values), seed))
    assert serious(found) == [], [f.message for f in serious(found)]


@pytest.mark.parametrize("seed", range(4))
def test_a_dense_length_that_collapses_is_found_and_a_slow_concise_drift_is_not(
        seed: int) -> None:
    run = healthy(300, seed)
    base = run["response_length/mean"]  # about 300-400 tokens, noise 15
    run["response_length/mean"] = base[:150] + noisy([30.0] * 150, 3, seed)
    found = [f for f in run_doctor(metrics(run)) if f.rule == "length_collapse"]
    assert len(found) == 1 and 148 <= found[0].step <= 152, [f.message for f in found]
    # a policy that learns to answer in half the tokens over the run
    run["response_length/mean"] = noisy([350 - 175 * i / 300 for i in range(300)], 15, seed)
    assert [f for f in run_doctor(metrics(run)) if f.rule == "length_collapse"] == []


def test_a_short_length_that_jitters_in_its_own_noise_is_not_a_collapse() -> None:
    """A length of a few tokens whose batches swing from 2 to 40 from step to step: a
    recent median below 30% of the highest level is the curve's noise, not a fall."""
    rng = random.Random(3)
    values = [max(1.0, rng.lognormvariate(2.3, 0.9)) for _ in range(400)]
    events = [MetricsEvent({"response_length/mean": v}, i, float(i))
              for i, v in enumerate(values)]
    assert [f for f in run_doctor(events) if f.rule == "length_collapse"] == []
