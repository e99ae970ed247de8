"""Issue 42: a key NaN from its first point is "not computed" (info), NaN in a key that had
numbers stays critical; runs of one or two points are judged by the first-point checks."""

from __future__ import annotations

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
