"""Issue 42, what the real corpus showed (tests/doctor/real): a response that grows longer
while the accuracy rises is learning, not a runaway; gradient-norm spikes the run comes
back from are not an explosion, judged by its own spike history; a loss that grows by
orders of magnitude is (``loss_blowup``); and each has its faulty twin, still found."""

from __future__ import annotations

import math
import random

from synthetic import healthy, metrics, noisy, rising, run_doctor

from trackmux.core.events import ConfigEvent, FindingEvent


def _of(found: list[FindingEvent], rule: str) -> list[FindingEvent]:
    return [f for f in found if f.rule == rule]


def _warned(found: list[FindingEvent], rule: str) -> list[FindingEvent]:
    return [f for f in _of(found, rule) if f.severity in ("warning", "critical")]


# -- length: learning to answer at length ------------------------------------------------

def _length_run(reward: list[float], seed: int) -> dict[str, list[float]]:
    """A hand-written loop's names: 120 steps, the responses 40 tokens until step 40,
    then 3-4x longer by step 60 and holding."""
    length = noisy([40.0] * 40 + [40 + 110 * min(1.0, i / 20) for i in range(80)], 6, seed)
    return {"rollout_answer_accuracy": reward, "rollout_avg_response_token_length": length}


def test_a_length_that_grows_while_the_accuracy_rises_is_learning() -> None:
    reward = noisy([0.2] * 30 + rising(90, 0.2, 0.7), 0.04, 3)
    found = run_doctor(metrics(_length_run(reward, 3)))
    assert _of(found, "length_blowup"), "the rise is still told"
    assert not _warned(found, "length_blowup"), [f.message for f in found]
    assert "kept improving" in _of(found, "length_blowup")[0].message


def test_a_length_that_runs_away_with_the_accuracy_flat_is_a_warning() -> None:
    reward = noisy([0.3] * 120, 0.04, 3)
    found = _warned(run_doctor(metrics(_length_run(reward, 3))), "length_blowup")
    assert found and 40 <= found[0].step <= 50


def test_a_length_that_learns_its_way_to_the_cap_is_told_at_the_cap() -> None:
    """Longer answers while the accuracy rises are learning, until they are cut at the
    cap: pinned there, the length is a warning whatever the reward does."""
    reward = noisy([0.2] * 30 + rising(170, 0.2, 0.7), 0.04, 3)
    length = noisy([40.0] * 40 + [min(1000.0, 40 * 1.05 ** i) for i in range(160)], 4, 3)
    events = [ConfigEvent({"max_new_tokens": 1024}, 0, 999.0),
              *metrics({"rollout_answer_accuracy": reward,
                        "rollout_avg_response_token_length": length})]
    found = _of(run_doctor(events), "length_blowup")
    assert [f.severity for f in found] == ["info", "warning"], [f.message for f in found]
    assert "pinned at its length cap" in found[1].message


# -- grad_explosion: a level that stays up, judged by the run's spike history ------------

def test_single_step_spikes_of_any_size_are_not_an_explosion() -> None:
    run = healthy(200, 6)
    grad = list(run["actor/grad_norm"])
    for step, times in ((60, 1e3), (110, 1e6), (170, 1e9)):  # back to normal at once
        grad[step] *= times
    run["actor/grad_norm"] = grad
    assert _of(run_doctor(metrics(run)), "grad_explosion") == []


def test_a_stretch_no_longer_than_one_the_run_came_back_from_is_quiet() -> None:
    run = healthy(200, 6)
    run["critic/score/mean"] = noisy([0.5] * 200, 0.04, 6)  # a reward that neither rises
    grad = list(run["actor/grad_norm"])
    for i in range(50, 54):  # four steps 500x up, then back
        grad[i] *= 500
    quiet = list(grad)
    for i in range(120, 124):  # four again: the run has done that
        quiet[i] *= 500
    run["actor/grad_norm"] = quiet
    found = _of(run_doctor(metrics(run)), "grad_explosion")
    assert [f.step for f in found] == [50], "the first stretch: no history to judge it by"
    for i in range(120, 200):  # and one that stays up: longer than any before
        grad[i] *= 500
    run["critic/score/mean"] = noisy([0.5] * 120 + [0.45] * 80, 0.02, 6)  # a bit lower
    run["actor/grad_norm"] = grad
    found = [f for f in _warned(run_doctor(metrics(run)), "grad_explosion") if f.step > 100]
    assert found and found[0].step == 120, [f.message for f in found]
    assert "longer than the 4" in found[0].message


def test_a_first_explosion_is_told_after_persist_points() -> None:
    run = healthy(200, 6)
    run["actor/grad_norm"] = run["actor/grad_norm"][:120] + \
        [g * 50 for g in run["actor/grad_norm"][120:]]
    found = _warned(run_doctor(metrics(run)), "grad_explosion")
    assert found and found[0].step == 120


def test_a_stretch_of_spikes_while_the_reward_keeps_rising_is_info() -> None:
    run = healthy(200, 6)
    grad = list(run["actor/grad_norm"])
    for i in range(50, 54):
        grad[i] *= 500
    for i in range(120, 130):
        grad[i] *= 500
    run["actor/grad_norm"] = grad
    run["critic/score/mean"] = noisy(rising(200, 0.1, 0.9), 0.03, 6)
    found = _of(run_doctor(metrics(run)), "grad_explosion")
    assert found and all(f.severity == "info" for f in found), [f.message for f in found]


# -- loss_blowup ---------------------------------------------------------------------------

def _loop_loss(n: int, seed: int, grow_from: int | None = None) -> list[float]:
    """A hand-written GRPO loop's summed loss: exactly 0 on half the steps (flat groups),
    else tens of either sign; from ``grow_from`` on, 100x that and growing."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        size = 10 ** rng.uniform(-1, 1.7) * (1 if rng.random() < 0.8 else -1)
        if grow_from is not None and i >= grow_from:
            size *= 100 * 10 ** ((i - grow_from) / 50)
        out.append(-size if rng.random() < 0.5 else 0.0)
    return out


def test_a_loss_that_grows_by_orders_of_magnitude_is_found() -> None:
    n = 260
    reward = noisy([0.6] * 190 + [0.6 - 0.4 * min(1.0, i / 30) for i in range(70)], 0.1, 9)
    found = run_doctor(metrics({"reward_avg": reward, "loss": _loop_loss(n, 9, 190)}))
    warned = _warned(found, "loss_blowup")
    assert warned and 190 <= warned[0].step <= 205, [f.message for f in found]
    assert "in size" in warned[0].message


def test_a_loss_that_swings_over_decades_and_zeros_is_quiet() -> None:
    for seed in range(5):
        reward = noisy([0.6] * 500, 0.1, seed)
        found = run_doctor(metrics({"reward_avg": reward, "loss": _loop_loss(500, seed)}))
        assert _of(found, "loss_blowup") == [], [f.message for f in found]


def test_a_loss_that_grows_from_zero_with_the_kl_is_quiet() -> None:
    """TRL's GRPO loss is about beta times the KL: 0 at the start, a few thousandths later."""
    rng = random.Random(4)
    kl = [0.0] + [0.02 * (1 - math.exp(-i / 40)) * rng.uniform(0.5, 1.5) for i in range(1, 300)]
    reward = noisy(rising(300, 0.1, 0.8), 0.05, 4)
    found = run_doctor(metrics({"reward": reward, "kl": kl,
                                "loss": [0.04 * k + rng.gauss(0, 1e-5) for k in kl]}))
    assert _warned(found, "loss_blowup") == [], [f.message for f in found]


def test_a_loss_that_grows_while_the_reward_keeps_rising_is_info() -> None:
    n = 260
    reward = noisy(rising(n, 0.1, 0.9), 0.03, 9)
    found = _of(run_doctor(metrics({"reward_avg": reward, "loss": _loop_loss(n, 9, 190)})),
                "loss_blowup")
    assert found and all(f.severity == "info" for f in found), [f.message for f in found]
