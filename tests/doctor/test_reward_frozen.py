"""``reward_frozen``: the batch-mean reward stops moving (DeepSpeed-Chat issue 586: "the
reward score collapsed to a stable point", 0.205-0.207 for tens of steps). Dated from the
first step that stood still, at any scale; silent on healthy runs, whose mean reward moves
by sampling alone."""

from __future__ import annotations

import pytest
from synthetic import healthy, metrics, noisy, run_doctor, serious

from trackmux.core.events import MetricsEvent
from trackmux.doctor.config import resolve


def stuck_run(scale: float = 1.0, frozen_from: int = 60, steps: int = 100,
              key: str = "average reward score") -> list[MetricsEvent]:
    """A reward that learns noisily, then sits at 0.2056 +- 0.0007."""
    learning = noisy([0.1 + 0.3 * i / frozen_from for i in range(frozen_from)], 0.04, 1)
    frozen = noisy([0.2056] * (steps - frozen_from), 0.0007, 2)
    return [MetricsEvent({key: v * scale, "act_loss": 0.01 * (i % 7)}, i, float(i))
            for i, v in enumerate(learning + frozen)]


def frozen(events: list[MetricsEvent]) -> list:
    return [f for f in run_doctor(events) if f.rule == "reward_frozen"]


@pytest.mark.parametrize("scale", [1.0, 40.0, -3.0])
def test_a_reward_stuck_at_a_point_is_found_from_where_it_stopped(scale: float) -> None:
    events = stuck_run(scale)
    [finding] = frozen(events)
    assert finding.severity == "warning" and finding.keys == ("average reward score",)
    assert 60 <= finding.step <= 62, finding.message  # the first window that stood still
    logged = {e.step: e.data["average reward score"] for e in events}
    assert [logged[step] == value for _, step, value in finding.evidence] == [True, True]
    assert f"at step {finding.step}" in finding.message and "stopped moving" in finding.message


def test_a_reward_of_exactly_zero_is_frozen_too() -> None:
    """A task the policy never solves: every rollout scores 0."""
    events = [MetricsEvent({"reward/mean": 0.0}, i, float(i)) for i in range(30)]
    [finding] = frozen(events)  # a window is judged once the run reaches back past it
    assert finding.step == 1 and "not moving at all" in finding.message


def test_a_reward_at_zero_from_the_first_point_is_held_until_it_lasts_or_the_run_ends(
        ) -> None:
    """A reward that never moved from its first point has not stopped: every rollout of a
    sparse task fails until one succeeds (CS336's GRPO seed 0: 0 on steps 0-16, then
    learning). Held for ``flat_start`` (50) points: silent if it then moves, raised live
    once it lasts (dated at its first window), raised at the end of a run that ends on it."""
    from trackmux.doctor.engine import Doctor

    learns = [0.0] * 17 + noisy([0.02 + 0.004 * i for i in range(83)], 0.01, 8)
    events = [MetricsEvent({"reward/mean": v}, i, float(i)) for i, v in enumerate(learns)]
    assert frozen(events) == []
    doctor = Doctor(resolve(True))
    raised = [(i, f.step) for i in range(80) for f in doctor.feed(
        MetricsEvent({"reward/mean": 0.0}, i, float(i))) if f.rule == "reward_frozen"]
    assert raised == [(49, 1)]
    assert resolve(True)["reward_frozen"]["flat_start"] == 50


def test_sparse_logs_are_judged_on_points() -> None:
    """One point every 25 steps: ten points that stand still span 225 steps."""
    events = [MetricsEvent({"reward/mean": 0.5 + 0.0005 * (i % 3)}, 25 * i, float(i))
              for i in range(14)]
    [finding] = frozen(events)
    assert finding.step == 0


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("shape", ["rising", "plateau", "curriculum"])
def test_silent_on_healthy_runs(seed: int, shape: str) -> None:
    found = [f for f in run_doctor(metrics(healthy(300, seed, shape)))
             if f.rule == "reward_frozen"]
    assert found == []


def test_silent_on_a_plateau_of_large_batches() -> None:
    """A batch mean of 4096 rewards of 0 or 1 at 0.6 moves by about 0.008 a step."""
    events = [MetricsEvent({"reward/mean": v}, i, float(i))
              for i, v in enumerate(noisy([0.6] * 300, 0.6 ** 0.5 * 0.4 ** 0.5 / 64, 3))]
    assert serious(run_doctor(events)) == []


def test_the_spread_is_a_parameter() -> None:
    events = stuck_run()
    assert [f for f in run_doctor(events, {"reward_frozen": {"spread": 0.001}})
            if f.rule == "reward_frozen"] == []
    assert resolve(True)["reward_frozen"]["spread"] == 0.02


def test_a_score_with_a_large_offset_is_judged_against_its_usual_movement() -> None:
    """A reward model's score at 20 +- 0.03 (batch means of a wide score, big batches) moves
    under 2% of its level from the start; once its usual range is known it is not called
    frozen, and when its movement then stops it is."""
    moving = noisy([20.0] * 120, 0.03, 4)
    events = [MetricsEvent({"objective/scores": v}, i, float(i)) for i, v in enumerate(moving)]
    found = frozen(events)
    assert all(f.step < 15 for f in found), [f.message for f in found]  # before its history
    stopped = moving + noisy([20.0] * 30, 0.0005, 5)
    events = [MetricsEvent({"objective/scores": v}, i, float(i)) for i, v in enumerate(stopped)]
    [late] = [f.step for f in frozen(events) if f.step >= 15]
    assert 118 <= late <= 121


def test_once_its_noise_is_known_a_reward_that_stops_is_found_in_quick_points() -> None:
    """Points that stand still (every move within 5% of the curve's usual move) are
    conclusive on their own once that many still moves in a row are rare on the curve's
    history: 4 moves of 0 after 80 moving points (4! (1/80)^4 <= 1e-6), so found 4 points
    after it stopped (not after a 10-point window and 3 more), dated where it stopped;
    the same curve still moving is not."""
    moving = noisy([0.5] * 80, 0.02, 6)
    events = [MetricsEvent({"reward/mean": v}, i, float(i))
              for i, v in enumerate(moving + [0.51] * 20)]
    doctor_found = []
    from trackmux.doctor.engine import Doctor

    doctor = Doctor(resolve(True))
    for event in events:
        doctor_found += [(event.step, f) for f in doctor.feed(event)
                         if f.rule == "reward_frozen"]
    [(raised, finding)] = doctor_found
    assert raised == 84 and finding.step == 80, (raised, finding.message)
    assert frozen([MetricsEvent({"reward/mean": v}, i, float(i))
                   for i, v in enumerate(noisy([0.5] * 200, 0.02, 7))]) == []


def test_the_latch_fires_at_once_on_a_strong_condition() -> None:
    from trackmux.doctor.stats import Latch

    latch = Latch(3)
    assert [latch.check(True, s) for s in range(3)] == [False, False, True]
    strong = Latch(3)
    assert strong.check(True, 5, strong=True) and strong.onset == 5
    assert not strong.check(True, 6, strong=True)  # once per episode
