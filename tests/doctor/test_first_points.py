"""Issue 42: a key NaN from its first point is "not computed" (info), NaN in a key that had
numbers stays critical; runs of one or two points are judged by the first-point checks."""

from __future__ import annotations

import math

from synthetic import healthy, metrics, run_doctor, serious

from trackmux.core.events import MetricsEvent
from trackmux.doctor.config import resolve
from trackmux.doctor.engine import Doctor

NAN = float("nan")


def test_a_key_nan_at_every_step_from_its_first_is_info_not_computed() -> None:
    run = healthy(120, 3)
    run["actor/kl_loss"] = [NAN] * 120  # a KL loss the trainer does not compute
    found = run_doctor(metrics(run))
    assert serious(found) == [], [f.message for f in found]
    [told] = [f for f in found if f.rule == "nonfinite"]
    assert (told.severity, told.step, told.keys) == ("info", 0, ("actor/kl_loss",))
    assert told.message.startswith("not computed: actor/kl_loss (steps 0-2, 3 points)")


def test_nan_in_a_key_that_had_numbers_stays_critical_beside_a_not_computed_one() -> None:
    run = healthy(60, 4)
    run["actor/kl_loss"] = [NAN] * 60
    run["loss"] = [1.0] * 30 + [NAN] * 30
    found = [f for f in run_doctor(metrics(run)) if f.rule == "nonfinite"]
    assert [(f.severity, f.step, f.keys) for f in found] == [
        ("info", 0, ("actor/kl_loss",)), ("critical", 30, ("loss",))]


def test_nan_at_fewer_first_points_then_numbers_is_a_fault_dated_at_the_first() -> None:
    values = [NAN, NAN, 0.5, 0.4, NAN]
    found = run_doctor(MetricsEvent({"reward": 0.5, "x/score": v}, i, float(i))
                       for i, v in enumerate(values))
    assert [(f.rule, f.severity, f.step, f.keys) for f in found] == [
        ("nonfinite", "critical", 0, ("x/score",))]
    assert "then numbers at step 2" in found[0].message


def test_a_key_told_not_computed_that_then_has_numbers_and_nan_again_is_critical() -> None:
    values = [NAN] * 5 + [0.1] * 5 + [NAN]
    found = run_doctor(MetricsEvent({"x/kl": v}, i, float(i)) for i, v in enumerate(values))
    assert [(f.severity, f.step) for f in found if f.rule == "nonfinite"] == [
        ("info", 0), ("critical", 10)]


def test_a_two_point_run_with_a_nan_key_is_told_at_its_end() -> None:
    doctor = Doctor(resolve(True))
    for step in (0, 1):
        doctor.feed(MetricsEvent({"reward": 0.5, "kl": NAN}, step, 1.0))
    assert doctor.tick(10.0, True) == []  # still running: it may yet be computed
    [told] = doctor.tick(10.0, False)
    assert (told.rule, told.severity, told.keys) == ("nonfinite", "info", ("kl",))


def test_a_one_point_run_with_every_group_flat_and_no_gradient_learns_nothing() -> None:
    doctor = Doctor(resolve(True))
    doctor.feed(MetricsEvent({"reward": 0.0, "frac_reward_zero_std": 1.0, "grad_norm": 0.0,
                              "loss": 0.0}, 1, 1.0))
    [found] = doctor.tick(10.0, False)
    assert (found.rule, found.severity, found.step, found.keys) == (
        "frozen_start", "critical", 1, ("grad_norm",))
    assert "every GRPO group flat" in found.message and "every one of the 1 point" in \
        found.message


def test_one_point_is_not_conclusive_with_groups_that_carry_signal() -> None:
    for flat, grad in ((0.5, 0.0), (1.0, 0.3)):
        doctor = Doctor(resolve(True))
        doctor.feed(MetricsEvent({"reward": 0.4, "frac_reward_zero_std": flat,
                                  "grad_norm": grad}, 1, 1.0))
        assert [f for f in doctor.tick(10.0, False) if f.rule == "frozen_start"] == []


def grpo_start(flat: int, steps: int, seed: int = 0) -> list[MetricsEvent]:
    """A GRPO loop whose first ``flat`` rollouts all score 0 (every group flat: every
    advantage, the loss and the gradient exactly 0), then learns (a sparse task the policy
    needs a few steps to solve); ``flat >= steps``: it never does."""
    import random

    rng = random.Random(seed)
    events = []
    for step in range(steps):
        if step < flat:
            data = {"train_reward": 0.0, "grad_norm": 0.0, "loss": 0.0}
        else:
            reward = 0.5 * (1 - 0.99 * math.exp(-(step - flat) / 30)) + abs(rng.gauss(0, 0.02))
            data = {"train_reward": reward, "grad_norm": 0.4 + abs(rng.gauss(0, 0.1)),
                    "loss": rng.gauss(0, 0.01)}
        data["token_entropy"] = 1.0 + rng.gauss(0, 0.05)
        events.append(MetricsEvent(data, step, float(step)))
    return events


def test_a_flat_frozen_start_that_then_learns_is_healthy() -> None:
    """CS336's GRPO seed 0: every rollout scores 0 on steps 0-16, so the gradient is exactly
    0 there ("it may take a few steps before we sample rollouts with non-zero rewards"),
    then it learns: neither frozen_start nor reward_frozen."""
    for flat in (5, 17, 40):
        found = run_doctor(grpo_start(flat, 200))
        assert [f for f in found if f.rule in ("frozen_start", "reward_frozen")] == [], (
            flat, [f.message for f in found])


def test_a_flat_frozen_start_that_lasts_is_found_live_and_at_the_run_end() -> None:
    """The same start that never ends: raised live once it has lasted ``patience`` (50)
    points, dated at the run's first step, with reward_frozen (held as long, told in the
    same event); a run that ended on it sooner is raised at its end, however short."""
    doctor = Doctor(resolve(True))
    raised = [(e.step, f) for e in grpo_start(80, 80) for f in doctor.feed(e)
              if f.rule in ("frozen_start", "reward_frozen")]
    assert [(at, f.rule, f.step, f.severity) for at, f in raised] == [
        (49, "frozen_start", 0, "critical")]
    message = raised[0][1].message
    assert "every GRPO group flat" in message and "first 50 points" in message
    assert "train_reward stopped moving" in message
    doctor = Doctor(resolve(True))
    assert [f for e in grpo_start(20, 20) for f in doctor.feed(e)] == []
    [ended] = doctor.tick(100.0, False)
    assert (ended.rule, ended.step) == ("frozen_start", 0)
    assert "every one of the 20 points" in ended.message and "stopped moving" in ended.message


def test_a_zero_gradient_while_the_reward_varies_is_frozen_at_five_points() -> None:
    """Groups that carry a signal and no gradient is a broken setup: points where every
    group was flat do not count toward the five, the others do, wherever they are."""
    events = grpo_start(3, 3) + [MetricsEvent({"train_reward": 0.3 + 0.01 * i,
                                               "grad_norm": 0.0, "loss": 0.0}, 3 + i,
                                              float(3 + i)) for i in range(40)]
    doctor = Doctor(resolve(True))
    raised = [(e.step, f) for e in events for f in doctor.feed(e) if f.rule == "frozen_start"]
    assert [(at, f.step) for at, f in raised] == [(7, 0)]
    assert "(3 of them with every GRPO group flat)" in raised[0][1].message
