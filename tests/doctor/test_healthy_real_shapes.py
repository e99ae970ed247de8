"""Shapes of healthy real runs that raised warnings (issue 42, tests/doctor/real): each is a
general property a rule must read as healthy, with the fault beside it still found.

- entropy in single-step spikes that return to its level between them (rasbt's ch. 7
  clipped-ratio run, steps 470-500), against an entropy whose level itself rises;
- a KL that grew while the reward improved over tens of steps and then holds (Unsloth's
  Mistral 7B GRPO notebook), against the same KL with a flat reward;
- a reward of a few rollouts (multiples of 1/8) that sits at its ceiling for several steps
  in a row by chance, as it did many times before, against one that stops moving.
"""

from __future__ import annotations

import random

from synthetic import metrics, run_doctor

from trackmux.core.events import FindingEvent


def _of(found: list[FindingEvent], rule: str) -> list[FindingEvent]:
    return [f for f in found if f.rule == rule]


def _serious(found: list[FindingEvent], rule: str) -> list[FindingEvent]:
    return [f for f in _of(found, rule) if f.severity in ("warning", "critical")]


def _small_batch_reward(n: int, seed: int) -> list[float]:
    """The mean of 8 rollouts scored 0 or 1, each solved with chance 0.85."""
    rng = random.Random(seed)
    return [sum(rng.random() < 0.85 for _ in range(8)) / 8 for _ in range(n)]


def test_single_step_entropy_spikes_that_return_to_level_are_not_an_explosion() -> None:
    rng = random.Random(11)
    n = 400
    base = [0.1 + rng.gauss(0, 0.02) for _ in range(n)]
    spiky = [v + (rng.choice([0.5, 0.7, 1.4, 3.4]) if i >= 340 and i % 2 else 0.0)
             for i, v in enumerate(base)]
    run = {"reward": _small_batch_reward(n, 1), "entropy": spiky}
    assert _serious(run_doctor(metrics(run)), "entropy_explosion") == []
    # the same spikes on an entropy whose level rises with them: found
    rising = [v + (0.02 * (i - 340) if i >= 340 else 0.0) for i, v in enumerate(spiky)]
    run["entropy"] = rising
    [found] = _serious(run_doctor(metrics(run)), "entropy_explosion")
    assert 340 <= found.step <= 370, found.message


def test_a_kl_that_grew_with_the_reward_and_then_holds_is_learning() -> None:
    rng = random.Random(5)
    n = 130
    grow = [min(1.0, max(0.0, (i - 30) / 60)) for i in range(n)]  # 0 until 30, 1 from 90
    # tenfold every 20 steps from 0.0005 at step 30 to 0.2 (step 82), then it holds
    kl = [min(0.2, 0.0005 * 10 ** (max(0, i - 30) / 20)) * rng.lognormvariate(0, 0.3)
          for i in range(n)]
    reward = [-0.3 + 0.5 * g + rng.gauss(0, 0.2) for g in grow]
    run = {"reward": reward, "kl": kl}
    found = _of(run_doctor(metrics(run)), "kl_blowup")
    assert all(f.severity == "info" for f in found), [f.message for f in found]
    # the same KL while the reward stays where it was: a runaway
    run["reward"] = [-0.3 + rng.gauss(0, 0.2) for _ in range(n)]
    assert _serious(run_doctor(metrics(run)), "kl_blowup")


def test_a_small_batch_reward_at_its_ceiling_for_a_few_steps_is_not_frozen() -> None:
    for seed in range(4):
        reward = _small_batch_reward(500, seed)
        run = {"reward": reward, "entropy": [0.3] * 500}
        assert _serious(run_doctor(metrics(run)), "reward_frozen") == [], seed
    # a reward that stops moving altogether is still found
    reward = _small_batch_reward(300, 7)[:200] + [0.5] * 100
    [found] = _serious(run_doctor(metrics({"reward": reward})), "reward_frozen")
    assert 200 <= found.step <= 212, found.message
