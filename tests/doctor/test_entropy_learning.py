"""Issue 42, learning read as failure: an entropy that falls while the reward climbs is the
policy sharpening as it learns (Cui et al. 2025: entropy is spent to buy reward), told as
``info``; the same fall with the reward flat, or a reward that later gives its gain back
while the entropy stays down, is the collapse (a warning). The shape is the real corpus's
``cs336-xiaofei-grpo-lr3e-5-seed3-healthy``: a flat start (reward 0), then the entropy
falls from about 1 to 8-10% of it in 10 steps while the reward jumps to about 0.5."""

from __future__ import annotations

from synthetic import metrics, noisy, run_doctor

from trackmux.core.events import FindingEvent

N = 160
FALL = 30  # the entropy falls over steps 30-40


def _entropy() -> list[float]:
    return noisy([1.0] * FALL + [1.0 - 0.091 * i for i in range(10)] + [0.09] * (N - FALL - 10),
                 0.01, 1)


def _collapses(reward: list[float]) -> list[FindingEvent]:
    found = run_doctor(metrics({"token_entropy": _entropy(), "train_reward": reward}))
    return [f for f in found if f.rule == "entropy_collapse"]


def _bought(after: list[float]) -> list[float]:
    """A reward that is 0 before the fall and about 0.5 from its end on, then ``after``."""
    rise = [0.05 * i for i in range(10)]
    return [0.0] * FALL + rise + noisy([0.5] * (N - FALL - 10 - len(after)), 0.05, 2) + after


def test_a_fall_that_bought_reward_is_the_policy_sharpening() -> None:
    found = _collapses(_bought([]))
    assert found, "the fall is still told"
    assert {f.severity for f in found} == {"info"}, [f.message for f in found]
    assert "sharpened as it learned" in found[0].message


def test_the_same_fall_with_the_reward_flat_is_a_collapse() -> None:
    found = _collapses(noisy([0.3] * N, 0.05, 2))
    assert [f.severity for f in found] == ["warning"], [f.message for f in found]
    assert FALL <= found[0].step <= FALL + 15


def test_a_fall_whose_reward_gain_is_within_its_noise_is_a_collapse() -> None:
    """A reward that wandered up a little over the fall (2 of its noise) bought nothing
    the run's own noise tells apart."""
    found = _collapses([0.3] * FALL + noisy([0.4] * (N - FALL), 0.05, 2))
    assert [f.severity for f in found] == ["warning"], [f.message for f in found]


def test_a_reward_that_gives_its_gain_back_while_the_entropy_stays_down_is_the_fault() -> None:
    """Sharpened, then the reward falls back toward where it started: exploration is gone
    and the policy stopped learning; told once, at the rule's severity (the engine tells
    it with what else was found at that step: here ``reward_collapse``)."""
    reward = _bought(noisy([0.1] * 40, 0.05, 3))
    found = run_doctor(metrics({"token_entropy": _entropy(), "train_reward": reward}))
    assert [f.severity for f in found if f.rule == "entropy_collapse"] == ["info"]
    gave = [f for f in found if "gave its gain back" in f.message]
    assert len(gave) == 1 and gave[0].severity in ("warning", "critical"), \
        [f.message for f in found]
    assert gave[0].step >= N - 40


def test_without_a_reward_every_fall_is_a_collapse() -> None:
    found = [f for f in run_doctor(metrics({"token_entropy": _entropy()}))
             if f.rule == "entropy_collapse"]
    assert [f.severity for f in found] == ["warning"], [f.message for f in found]
