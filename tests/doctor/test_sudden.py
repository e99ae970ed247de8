"""Confirmation that scales with the size of a change (issue 42, the raise delay): a change
many sigmas of the curve's own noise past a rule's line, and beyond anything the curve did
before, is told on its second point past the line (stats.sudden), where a rule's recent
median and latch made it wait 3-7 logged points; its healthy twin with the same noise,
and a curve whose own history holds excursions as large, stay quiet."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable

from synthetic import serious

from trackmux.core.events import Event, MetricsEvent, TableEvent
from trackmux.doctor.config import resolve
from trackmux.doctor.engine import Doctor
from trackmux.doctor.stats import (
    SUDDEN_MOST,
    SUDDEN_POINTS,
    SUDDEN_TAIL,
    Noise,
    sudden,
    sudden_run,
    sudden_tail,
)


def raised(events: Iterable[Event], rule: str) -> list[tuple[int, str]]:
    """(the step of the event that raised it, severity) of each ``rule`` finding."""
    doctor = Doctor(resolve(True))
    out: list[tuple[int, str]] = []
    for event in events:
        out += [(event.step, f.severity) for f in doctor.feed(event) if f.rule == rule]
    return out


def lognormal(n: int, level: float, sigma: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [level * math.exp(sigma * rng.gauss(0.0, 1.0)) for _ in range(n)]


def noise_of(values: list[float]) -> Noise:
    noise = Noise(160)
    for v in values:
        noise.add(v)
    assert noise.estimate()
    return noise


def test_two_points_far_past_the_line_are_sudden_and_one_is_not() -> None:
    rng = random.Random(1)
    history = [1.0 + 0.01 * rng.gauss(0, 1) for _ in range(60)]
    noise = noise_of(history)
    assert SUDDEN_POINTS == 2
    assert sudden([3.0, 3.1], history, noise, 1.0, 2.0, 1, 8.0)
    assert not sudden([3.0, 1.5], history, noise, 1.0, 2.0, 1, 8.0)  # one is not past
    assert not sudden([0.2, 0.1], history, noise, 1.0, 0.5, 1, 8.0)  # the other way
    assert sudden([0.2, 0.1], history, noise, 1.0, 0.5, -1, 8.0)
    assert not sudden([1.03, 1.035], history, noise, 1.0, 1.02, 1, 8.0)  # a few sigmas


def test_a_curve_that_went_as_far_before_is_not_sudden() -> None:
    """Heavy tails are read from the curve's own extremes: two points 2.4x the level are
    many robust sigmas out, but the history already jumped 2x."""
    rng = random.Random(2)
    history = [1.0 + 0.01 * rng.gauss(0, 1) for _ in range(60)]
    history[30] = 2.0
    noise = noise_of(history)
    assert not sudden([2.4, 2.4], history, noise, 1.0, 2.0, 1, 8.0)
    assert sudden([3.0, 3.0], history, noise, 1.0, 2.0, 1, 8.0)  # 1.5x as far as it went


def entropy_run(collapse_at: int | None, every: int = 20, n: int = 80) -> list[MetricsEvent]:
    values = lognormal(n, 1.0, 0.04, 3)
    if collapse_at is not None:
        values = [v * (0.03 if i >= collapse_at else 1.0) for i, v in enumerate(values)]
    return [MetricsEvent({"actor/entropy": v}, i * every, float(i)) for i, v in
            enumerate(values)]


def test_an_entropy_collapse_in_a_sparse_log_is_told_at_its_second_point() -> None:
    """Logged every 20 steps: the recent median of 3 points and every one of them past
    the line made it wait a third point, 40 steps more than the collapse shows."""
    [(step, _)] = raised(entropy_run(60), "entropy_collapse")
    assert step == 61 * 20
    assert raised(entropy_run(None), "entropy_collapse") == []  # the same noise, healthy


def kl_run(jump_at: int | None, n: int = 200) -> list[MetricsEvent]:
    values = lognormal(n, 0.02, 0.08, 4)
    if jump_at is not None:
        values = [v * (30.0 if i >= jump_at else 1.0) for i, v in enumerate(values)]
    return [MetricsEvent({"actor/kl_loss": v}, i, float(i)) for i, v in enumerate(values)]


def test_a_kl_that_jumps_30x_is_told_at_its_second_point() -> None:
    """Logged every step: the median of the recent and the gap's 13 points had to pass
    min_kl first, 7 points."""
    found = [f for f in raised(kl_run(150), "kl_blowup") if f[1] != "info"]
    assert found and found[0][0] == 151, found
    assert raised(kl_run(None), "kl_blowup") == []


def test_a_lone_point_far_out_is_no_finding() -> None:
    """Two points are the fewest: one collapsed entropy point between ordinary ones is a
    glitch, not a collapse."""
    events = entropy_run(None)
    glitch = events[60]
    events[60] = MetricsEvent({"actor/entropy": 0.01}, glitch.step, glitch.time)
    assert raised(events, "entropy_collapse") == []


def rollouts(step: int, shares: list[float], rng: random.Random) -> TableEvent:
    rows = [[f"{step}-{g}", float(rng.random() < p)] for g, p in enumerate(shares)
            for _ in range(8)]
    return TableEvent("train/rollouts", ["uid", "score"], rows, step, float(step))


def groups_run(flat_from: int | None, n: int = 80) -> list[TableEvent]:
    rng = random.Random(5)
    out = []
    for i in range(n):
        if flat_from is not None and i >= flat_from:
            shares = [0.0] * 8  # every group failed alike: no learning signal
        else:
            shares = [rng.uniform(0.25, 0.75) for _ in range(8)]
        out.append(rollouts(i * 5, shares, rng))
    return out


def test_every_group_flat_after_live_batches_is_told_at_the_second_batch() -> None:
    """8 groups of 8 whose share of flat groups was near 0: two batches all flat are a
    chance of (1/66)^16 under it; the pooled window and the latch waited for five."""
    found = raised(groups_run(50), "flat_groups")
    assert found and found[0][0] == 51 * 5, found
    assert serious_free(groups_run(None))


def serious_free(events: list[TableEvent]) -> bool:
    doctor = Doctor(resolve(True))
    found = [f for e in events for f in doctor.feed(e)]
    return serious(found) == []


def test_more_points_in_a_row_need_less_beyond_the_curves_extremes() -> None:
    """Points 1.7x as far from the level as the curve ever went: two are not conclusive
    (2x asked), three in a row are (2^(2/3) = 1.59x), and the odds of k such points
    stay those of two at 2x (T^k held at SUDDEN_TAIL^2)."""
    assert sudden_tail(2) == SUDDEN_TAIL
    assert sudden_tail(3) < sudden_tail(2) and sudden_tail(SUDDEN_MOST) > 1.0
    for k in range(2, SUDDEN_MOST + 1):
        assert math.isclose(sudden_tail(k) ** k, SUDDEN_TAIL ** 2)
    rng = random.Random(2)
    history = [1.0 + 0.01 * rng.gauss(0, 1) for _ in range(60)]
    history[30] = 2.0  # the curve went 1.0 above its level once
    noise = noise_of(history)
    assert not sudden([2.7, 2.7], history, noise, 1.0, 1.5, 1, 8.0)
    assert sudden_run([*history, 2.7, 2.7], noise, 1.0, 1.5, 1, 8.0) == 0
    assert sudden_run([*history, 2.7, 2.7, 2.7], noise, 1.0, 1.5, 1, 8.0) == 3
    assert sudden_run([*history, 1.2, 2.7, 2.7, 2.7], noise, 1.0, 1.5, 1, 8.0) == 3
    # one of the last three no further than the curve went before: not yet conclusive
    assert sudden_run([*history, 2.7, 1.9, 2.7, 2.7], noise, 1.0, 1.5, 1, 8.0) == 0
    # the other way round, and two points far beyond everything still told at two
    assert sudden_run([2.0 - v for v in history] + [-0.7] * 3, noise, 1.0, 0.5, -1, 8.0) == 3
    assert sudden_run([*history, 3.5, 3.5], noise, 1.0, 1.5, 1, 8.0) == 2


def kl_with_a_spike(jump_at: int | None, jump: float, n: int = 200) -> list[MetricsEvent]:
    """A KL logged every step that once spiked 0.1 above its level of 0.02 (step 100)."""
    rng = random.Random(4)
    values = [0.02 * math.exp(0.08 * rng.gauss(0.0, 1.0)) for _ in range(n)]
    values[100] = 0.12
    if jump_at is not None:
        values = [v + (jump if i >= jump_at else 0.0) for i, v in enumerate(values)]
    return [MetricsEvent({"actor/kl_loss": v}, i, float(i)) for i, v in enumerate(values)]


def test_a_kl_jump_within_twice_its_own_spike_is_told_at_its_third_point() -> None:
    """A jump to 1.7x the run's earlier spike: two points are no proof against such a
    history, and the median of the recent and gap points past min_kl made it wait 7
    points (step 156); three in a row past the line, each 1.59x beyond the spike, are."""
    found = [f for f in raised(kl_with_a_spike(150, 0.17), "kl_blowup") if f[1] != "info"]
    assert found and found[0][0] == 152, found
    assert raised(kl_with_a_spike(None, 0.0), "kl_blowup") == []
