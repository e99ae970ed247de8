"""A slow start is not a frozen or idle run (issue 42, the real corpus's
``cs336-xiaofei-grpo-lr5e-6-seed0-healthy`` and ``-rft-seed0-healthy``).

A GRPO loop on a sparse task: every rollout fails at first (reward and gradient exactly
0), one or two rollouts of a batch succeed on a few isolated steps, the batches fail
again for a dozen steps, then the policy learns. ``reward_frozen`` and ``idle_steps`` stay
quiet on it. Their failure twins: a reward that rose and then froze, a start whose blips
never take hold (``cs336-sandyhu-grpo-lr3e-6-underfits``), and a departure far larger than
a few rollouts' success.
"""

from __future__ import annotations

import math
import random

import pytest
from synthetic import run_doctor, serious

from trackmux.core.events import MetricsEvent
from trackmux.doctor.config import resolve
from trackmux.doctor.engine import Doctor
from trackmux.doctor.rules.slow_start import SlowStart, at_least

#: (step, rollouts that succeeded) of the slow start: isolated, a batch at 0 between them
BLIPS = ((17, 1), (22, 2), (36, 1), (40, 2), (43, 1), (45, 1))
TAKES_HOLD = 47


def grpo_run(batch: int, seed: int, *, takes_hold: int | None = TAKES_HOLD,
             steps: int = 200) -> list[MetricsEvent]:
    """A GRPO loop of ``batch`` rollouts a step: 0 but for ``BLIPS`` until ``takes_hold``,
    then a success rate rising to one half (the batch's successes drawn binomially; the
    gradient exactly 0 on a batch without one). ``takes_hold`` None: the blips go on,
    one success on every fifth step (a learning rate too low to move the policy)."""
    rng = random.Random(seed)
    blips = dict(BLIPS)
    events = []
    for step in range(steps):
        if takes_hold is not None and step >= takes_hold:
            rate = 0.5 / (1 + math.exp(-(step - takes_hold - 25) / 8))
            successes = sum(rng.random() < rate for _ in range(batch))
        elif takes_hold is None and step > 17:
            successes = 1 if step % 5 == 0 else 0
        else:
            successes = blips.get(step, 0)
        grad = rng.uniform(0.1, 0.6) if successes else 0.0
        events.append(MetricsEvent({"train_reward": successes / batch, "grad_norm": grad,
                                    "loss": rng.gauss(0.0, 0.01) if successes else 0.0},
                                   step, float(step)))
    return events


def alone(events: list[MetricsEvent], rule: str) -> list:
    """The serious findings of ``rule`` with the other of the two switched off (findings
    of one event are told together, under the first rule's name)."""
    other = ({"reward_frozen", "idle_steps"} - {rule}).pop()
    return [(f.step, f.message) for f in serious(run_doctor(events, {other: {"enabled": False}}))
            if f.rule == rule]


@pytest.mark.parametrize("batch", [64, 256, 1024])
@pytest.mark.parametrize("seed", range(3))
def test_a_slow_start_that_takes_hold_is_no_frozen_reward(batch: int, seed: int) -> None:
    """Its reward back at exactly 0 on steps 23-35 after two blips is a start, not a
    freeze, whatever the batch (the lattice is the run's own)."""
    assert alone(grpo_run(batch, seed), "reward_frozen") == []


@pytest.mark.parametrize("seed", range(3))
def test_a_slow_start_that_takes_hold_is_no_idle_run(seed: int) -> None:
    """19 of its first 22 points after the first update idle, then the share falls as
    it learns: not a run that idles on most steps."""
    assert alone(grpo_run(256, seed), "idle_steps") == []


def test_a_start_that_never_takes_hold_is_found_by_both() -> None:
    """The underfit twin: the same start, its blips going on (an update on every fifth
    step). idle_steps finds it at its first full window after the first update (dated at
    the run's first step); reward_frozen's hold ends once the start has lasted
    ``flat_start`` (50) points, and it is raised then, live."""
    doctor = Doctor(resolve(True))
    raised = [(e.step, f.rule, f.step) for e in grpo_run(256, 0, takes_hold=None, steps=120)
              for f in doctor.feed(e) if f.severity == "warning"]
    rules = {rule: (at, dated) for at, rule, dated in raised}
    at, dated = rules["idle_steps"]  # not before 40 points after the update at 17
    assert 56 <= at <= 60 and dated == 0, raised
    assert rules["reward_frozen"][0] == 49, raised


def test_a_reward_that_rose_and_then_froze_is_found_at_once() -> None:
    """The frozen twin: after the same flat start the reward rises on consecutive steps
    (it moved), then every batch fails from step 40: found from its first still window,
    not held as a start."""
    rng = random.Random(5)
    values = [0.0] * 17 + [round(0.01 * (i + 1) + rng.uniform(0, 0.01), 4) for i in range(23)]
    values += [0.0] * 40
    events = [MetricsEvent({"train_reward": v}, i, float(i)) for i, v in enumerate(values)]
    doctor = Doctor(resolve(True))
    raised = [(e.step, f.step) for e in events for f in doctor.feed(e)
              if f.rule == "reward_frozen"]
    assert raised and raised[0][1] == 40 and raised[0][0] <= 53, raised


def test_a_departure_far_beyond_a_few_rollouts_is_a_move() -> None:
    """After blips of one success in 256, one batch at 40 times that and back to 0: not
    a start's chance success but a reward that moved, so the freeze after it is found
    at once (a held finding would wait for ``flat_start``)."""
    values = [0.0] * 10 + [1 / 256] + [0.0] * 9 + [40 / 256] + [0.0] * 30
    events = [MetricsEvent({"train_reward": v}, i, float(i)) for i, v in enumerate(values)]
    doctor = Doctor(resolve(True))
    raised = [(e.step, f.step) for e in events for f in doctor.feed(e)
              if f.rule == "reward_frozen"]
    assert raised and raised[0][1] == 21 and raised[0][0] < 49, raised


def test_the_start_ends_on_two_points_in_a_row_off_its_first_value() -> None:
    start = SlowStart(0.0, 0.001)
    assert [start.add(v) for v in (0.0, 0.01, 0.0, 0.02, 0.0, 0.01, 0.01, 0.0)] == [
        True, True, True, True, True, True, False, False]
    assert (start.points, start.blips) == (7, 3)


def test_a_blip_is_judged_in_the_start_s_own_lattice_and_share_at_its_first_value() -> None:
    """Two lattice steps after one blip in 20 points: plausible for a start whose
    batches fail 95% of the time (Poisson mean 0.05-0.1: about 4e-3); three: not
    (about 1e-4)."""
    for k, holds in ((2, True), (3, False)):
        start = SlowStart(0.0, 0.001)
        for v in [0.0] * 9 + [0.125] + [0.0] * 10:
            start.add(v)
        assert start.add(k * 0.125) is holds, k
    assert at_least(1, 0.5) == pytest.approx(1 - math.exp(-0.5))
    assert at_least(3, 2.0) == pytest.approx(1 - math.exp(-2.0) * (1 + 2.0 + 2.0))
