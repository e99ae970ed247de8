"""``overoptimization``: a learned reward model's score climbs while the reward that is
checked has stopped rising (Gao et al. 2022's proxy and gold curves). Found before the
checked reward falls, whatever the score's scale; silent while both rise or both settle."""

from __future__ import annotations

import pytest
from synthetic import noisy, run_doctor, serious

from trackmux.core.events import MetricsEvent

STEPS = 150


def gold_curve(peak_at: int = 60, fall_from: int = 100) -> list[float]:
    """Learns to ``peak_at``, flat to ``fall_from``, then falls: the checked reward of an
    overoptimized run."""
    out = []
    for i in range(STEPS):
        if i < peak_at:
            out.append(0.4 + 0.4 * i / peak_at)
        elif i < fall_from:
            out.append(0.8)
        else:
            out.append(0.8 - 0.006 * (i - fall_from))
    return out


def proxy_curve(gold: list[float], lift_from: int = 60) -> list[float]:
    """The reward model's score: the checked reward plus what the policy wins from the
    model's errors, growing from ``lift_from`` on."""
    return [g + 0.1 + (0.008 * (i - lift_from) if i > lift_from else 0.0)
            for i, g in enumerate(gold)]


def events(proxy: list[float], gold: list[float], *, scale: float = 1.0,
           offset: float = 0.0, gold_every: int = 1, proxy_key: str = "reward/model_score",
           gold_key: str = "reward/mean"):
    for i in range(STEPS):
        data = {proxy_key: proxy[i] * scale + offset}
        if i % gold_every == 0:
            data[gold_key] = gold[i]
        yield MetricsEvent(data, i, float(i))


def found(stream) -> list:
    return [f for f in run_doctor(stream) if f.rule == "overoptimization"]


def test_found_before_the_checked_reward_falls_naming_both() -> None:
    gold = noisy(gold_curve(), 0.02, 1)
    proxy = [p + e for p, e in zip(proxy_curve(gold_curve()), noisy([0] * STEPS, 0.02, 2),
                                   strict=True)]
    hits = found(events(proxy, gold))
    assert len(hits) == 1, [f.message for f in hits]
    assert 60 <= hits[0].step < 100  # after the lift began, before the fall
    assert set(hits[0].keys) == {"reward/model_score", "reward/mean"}
    assert "reward/model_score" in hits[0].message and "reward/mean" in hits[0].message


def test_the_scores_scale_does_not_matter() -> None:
    """A reward model's logits: tens of units, offset below zero."""
    gold = noisy(gold_curve(), 0.02, 3)
    proxy = [p + e for p, e in zip(proxy_curve(gold_curve()), noisy([0] * STEPS, 0.02, 4),
                                   strict=True)]
    plain = found(events(proxy, gold))
    scaled = found(events(proxy, gold, scale=40.0, offset=-25.0))
    assert plain and scaled and plain[0].step == scaled[0].step


def test_a_held_out_reward_logged_every_5_steps_is_the_check() -> None:
    gold = noisy(gold_curve(), 0.02, 5)
    proxy = [p + e for p, e in zip(proxy_curve(gold_curve()), noisy([0] * STEPS, 0.02, 6),
                                   strict=True)]
    hits = found(events(proxy, gold, gold_every=5, gold_key="val/test_score"))
    assert len(hits) == 1 and hits[0].step < 110
    assert set(hits[0].keys) == {"reward/model_score", "val/test_score"}


@pytest.mark.parametrize("seed", range(6))
def test_silent_while_both_rise_and_when_both_settle(seed: int) -> None:
    """A healthy run: the score follows the checked reward up, then both plateau."""
    clean = [0.3 + 0.5 * min(i, 90) / 90 for i in range(STEPS)]
    gold = noisy(clean, 0.03, 10 + seed)
    proxy = noisy([c + 0.1 for c in clean], 0.03, 20 + seed)
    assert serious(run_doctor(events(proxy, gold))) == []


def test_a_score_that_rises_alone_needs_a_checked_reward_beside_it() -> None:
    """Without a second reward there is nothing to compare: the rule says nothing."""
    proxy = noisy(proxy_curve(gold_curve()), 0.02, 7)
    stream = (MetricsEvent({"reward/model_score": v}, i, float(i))
              for i, v in enumerate(proxy))
    assert found(stream) == []
