"""Issue 42, findings that say how bad it got: what moved *with* an episode is read from
before the change the finding is about began, not from its onset. A slow fall is found
late, and its rule dates it where its short series still reaches; read from there, a
reward that rose with the fall had already risen, and the context said "flat" beside a
message saying it rose (the real corpus's ``cs336-xiaofei-grpo-lr3e-5-seed3-healthy``)."""

from __future__ import annotations

import math

from synthetic import metrics, noisy, run_doctor_events

from trackmux.doctor.rules.series import left_level
from trackmux.doctor.stats import Series

N, FALL, SLOW = 200, 30, 70


def test_a_slow_fall_found_late_tells_the_reward_that_rose_with_it() -> None:
    """The entropy drops from 1 to 0.3 in 5 steps while the reward jumps from 0 to 0.5,
    then creeps down to 0.09 over 70 more: the finding's onset is well after the jump."""
    entropy = noisy([1.0] * FALL + [1.0 - 0.14 * i for i in range(5)]
                    + [0.3 * math.exp(-1.2 * i / SLOW) for i in range(SLOW)]
                    + [0.09] * (N - FALL - SLOW - 5), 0.005, 1)
    reward = noisy([0.0] * FALL + [0.1 * i for i in range(5)] + [0.5] * (N - FALL - 5),
                   0.03, 2)
    found = [f for f in run_doctor_events(metrics({"token_entropy": entropy,
                                                   "train_reward": reward}))
             if f.rule == "entropy_collapse"]
    assert found and found[0].step > FALL + 20, [f.message for f in found]  # dated late
    assert "reward rose from" in found[0].message
    for event in found:
        moved = {key: (how, then, now) for key, how, then, now in event.moved}
        how, then, now = moved["train_reward"]
        assert how == "up" and then < 0.1 and now > 0.4, event.message
        assert "train_reward up (" in event.message


def _series(values: list[float], start: int = 0) -> Series:
    s = Series(len(values))
    for i, value in enumerate(values):
        s.add(start + i, value)
    return s


def test_a_change_begins_after_the_last_point_at_its_level() -> None:
    s = _series([1.0, 1.1, 0.9, 1.0, 0.8, 0.6, 0.4, 0.2], start=10)
    assert left_level(s, 16, -1, 1.0) == 14  # step 13 was the last at its level
    rise = _series([0.1, 0.12, 0.09, 0.2, 0.5, 0.9], start=0)
    assert left_level(rise, 4, 1, 0.1) == 3
    gone = _series([0.5, 0.4, 0.3, 0.2], start=50)  # the level is older than the series
    assert left_level(gone, 52, -1, 1.0) == 50
    assert left_level(_series([0.5, 0.6, 0.7], start=50), 52, 1, 0.1) == 50


def test_a_noisy_reward_that_moved_far_is_not_called_flat() -> None:
    """The change of two medians is judged by its standard error, not by the spread of
    single points: a 0/1-like reward of robust sigma ~0.3 that went from 0.35 to 0.95
    moved (the real corpus's format-hacking run said 'reward_avg flat (0.344 before,
    0.975 now)'); the same noise around one level stays flat."""
    import random

    from trackmux.doctor.episodes import Context

    rng = random.Random(7)
    context = Context()
    steps = 40
    for step in range(steps):
        level = 0.35 if step < 20 else 0.95
        context.add({"reward": ["r"]}, {"r": min(1.0, max(0.0, level + rng.gauss(0, 0.3)))},
                    step)
    (key, then, error), now = context.before(20)["reward"], context.now("reward")
    assert key == "r" and now is not None
    assert abs(now - then) > 3 * math.hypot(error, context.now_error("reward"))  # "up"
    still = Context()
    for step in range(steps):
        still.add({"reward": ["r"]}, {"r": 0.5 + rng.gauss(0, 0.3)}, step)
    (_, then, error), now = still.before(20)["reward"], still.now("reward")
    assert now is not None
    assert abs(now - then) <= 3 * math.hypot(error, still.now_error("reward"))  # flat
