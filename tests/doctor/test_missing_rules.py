"""The rules that were missing (issue 42): entropy rising far above its level, a response
length pinned at its cap, a KL that rises while the reward keeps improving (info, not a
runaway), and separate KL floors for the reference KL and the PPO old/new-policy KL."""

from __future__ import annotations

import random

from synthetic import healthy, metrics, noisy, run_doctor

from trackmux.core.events import ConfigEvent, Event, FindingEvent


def _of(found: list[FindingEvent], rule: str) -> list[FindingEvent]:
    return [f for f in found if f.rule == rule]


def test_entropy_rising_far_above_its_level_is_found_and_a_rebound_is_not() -> None:
    run = healthy(300, 1)
    entropy = run["actor/entropy"]
    run["actor/entropy"] = entropy[:150] + [entropy[149] * 1.03 ** i for i in range(1, 151)]
    [found] = _of(run_doctor(metrics(run)), "entropy_explosion")
    assert 150 <= found.step <= 175, found.message
    assert "turning to noise" in found.message and found.severity == "critical"
    # an entropy that dips and rebounds below where it started is no explosion
    rng = random.Random(2)
    run = healthy(300, 2)
    run["actor/entropy"] = [1.5 - 1.2 * min(i, 100) / 100 + (0.6 * (i - 150) / 150 if i > 150
                                                              else 0) + rng.gauss(0, 0.03)
                            for i in range(300)]
    assert _of(run_doctor(metrics(run)), "entropy_explosion") == []
    for seed in range(4):  # healthy runs of every shape: quiet
        for shape in ("rising", "plateau", "curriculum"):
            assert _of(run_doctor(metrics(healthy(400, seed, shape))), "entropy_explosion") == []


def _with_cap(run: dict[str, list[float]], cap: int = 1024) -> list[Event]:
    return [ConfigEvent({"data": {"max_response_length": cap}}, 0, 999.0), *metrics(run)]


def test_a_length_pinned_at_its_cap_from_the_start_is_found_from_the_config() -> None:
    rng = random.Random(4)
    run = healthy(200, 4)
    run["response_length/mean"] = [1015 + rng.gauss(0, 3) for _ in range(200)]
    [found] = _of(run_doctor(_with_cap(run)), "length_blowup")
    assert "pinned at its length cap" in found.message
    assert "config data.max_response_length" in found.message and found.step <= 5
    # without a cap it cannot be told from a long but healthy length
    assert _of(run_doctor(metrics(run)), "length_blowup") == []


def test_a_length_that_runs_away_becomes_critical_at_its_cap() -> None:
    rng = random.Random(3)
    run = healthy(300, 3)
    run["critic/score/mean"] = noisy([0.6] * 300, 0.03, 3)  # flat: a runaway, not learning
    run["response_length/mean"] = [min(300 * 1.02 ** max(0, i - 100), 1024)
                                   - abs(rng.gauss(0, 3)) for i in range(300)]
    [found] = _of(run_doctor(_with_cap(run)), "length_blowup")
    assert "ran away" in found.message and found.severity == "critical"
    assert "past its critical line 973 since step" in found.message  # 0.95 x 1024


def test_most_responses_truncated_from_the_start_are_pinned() -> None:
    rng = random.Random(5)
    run = healthy(200, 5)
    run["response_length/clip_ratio"] = [min(1.0, 0.95 + rng.gauss(0, 0.01)) for _ in range(200)]
    [found] = _of(run_doctor(metrics(run)), "length_blowup")
    assert "of the responses are cut at the length cap" in found.message


def test_a_kl_that_rises_while_the_reward_keeps_improving_is_info() -> None:
    run = healthy(160, 6)
    run["critic/score/mean"] = noisy([0.3 + 0.4 * max(0, i - 100) / 60 for i in range(160)],
                                     0.02, 6)
    del run["actor/ppo_kl"]
    run["actor/kl_loss"] = noisy([0.01 * 1.06 ** max(0, i - 100) for i in range(160)],
                                 0.0005, 7)
    [found] = _of(run_doctor(metrics(run)), "kl_blowup")
    assert found.severity == "info" and "the reward kept improving" in found.message
    # the same KL with the reward flat is a runaway
    run["critic/score/mean"] = noisy([0.5] * 160, 0.02, 6)
    [found] = _of(run_doctor(metrics(run)), "kl_blowup")
    assert found.severity == "warning"


def _jump(key: str) -> dict[str, list[float]]:
    """A KL at 0.02 that jumps to 0.09 in 20 steps and holds there."""
    run = healthy(160, 7, "plateau")
    del run["actor/ppo_kl"]
    run[key] = noisy([0.02 if i < 120 else min(0.02 * 1.08 ** (i - 120), 0.09)
                      for i in range(160)], 0.001, 8)
    return run


def test_a_ppo_kl_has_its_own_floor_below_the_reference_kls() -> None:
    [found] = _of(run_doctor(metrics(_jump("actor/ppo_kl"))), "kl_blowup")
    assert 118 <= found.step <= 135 and found.severity == "warning", found.message
    # the same curve as a KL to the reference stays under verl's 0.1 target: quiet
    assert _of(run_doctor(metrics(_jump("actor/kl_loss"))), "kl_blowup") == []
    # the case: 0.02 to 0.12 in 25 steps is a runaway
    run = healthy(160, 7, "plateau")
    run["actor/ppo_kl"] = noisy([0.02 if i < 120 else min(0.02 * 1.0743 ** (i - 120), 0.12)
                                 for i in range(160)], 0.001, 8)
    assert _of(run_doctor(metrics(run)), "kl_blowup")
