"""``flat_groups`` and ``component_divergence`` on synthetic batches of samples shaped as
verl and TRL log them (each breaking its way, and healthy noisy runs silent), and on a
real ``run.log_samples`` run read back from the spool."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from synthetic import run_doctor, serious

from trackmux.core.events import SamplesEvent, TableEvent


def batch(step: int, columns: Mapping[str, Sequence[Any]], key: str = "rollout/samples"
          ) -> SamplesEvent:
    return SamplesEvent(key, tuple(columns), tuple(tuple(v) for v in columns.values()), (),
                        step, 1000.0 + step)


def verl_batch(step: int, rng: random.Random, solved: float = 0.0, groups: int = 16,
               size: int = 8) -> SamplesEvent:
    """verl's columns: uid groups, score and reward, reward/<extra>; prompts of varied
    difficulty, and a share ``solved`` of the groups that every sample solves."""
    uid, score, acc, pred = [], [], [], []
    for g in range(groups):
        p = 1.0 if g < solved * groups else rng.uniform(0.25, 0.75)
        for _ in range(size):
            hit = float(rng.random() < p)
            uid.append(f"uid-{step}-{g}")
            score.append(hit)
            acc.append(bool(hit))  # verl's math_dapo returns acc as a bool
            pred.append("42" if hit else "7")
    return batch(step, {"prompt": ["q"] * len(uid), "response": ["a"] * len(uid),
                        "score": score, "reward": list(score), "reward/acc": acc,
                        "reward/pred": pred, "uid": uid})


def trl_batch(step: int, rng: random.Random, acc_p: float, bonus_p: float,
              flip: bool = False, size: int = 4) -> SamplesEvent:
    """TRL's columns: group, reward (the weighted sum), reward/<function>."""
    n = 64
    acc = [float(rng.random() < acc_p) for _ in range(n)]
    if flip:  # the second function now pays exactly the samples the first one fails
        bonus = [1.0 - a if rng.random() < 0.9 else a for a in acc]
    else:
        bonus = [float(rng.random() < bonus_p) for _ in range(n)]
    reward = [a + 0.2 * b if flip else a + b for a, b in zip(acc, bonus, strict=True)]
    return batch(step, {"prompt": ["q"] * n, "response": ["a"] * n, "reward": reward,
                        "reward/accuracy": acc, "reward/format": bonus,
                        "group": [i // size for i in range(n)]})


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_healthy_batches_give_no_finding(seed: int) -> None:
    rng = random.Random(seed)
    events: list[Any] = [verl_batch(s, rng, solved=0.3) for s in range(60)]
    # TRL: accuracy rises, the format reward rises with it, noisily
    events += [trl_batch(s, rng, 0.2 + 0.5 * s / 80, 0.3 + 0.5 * s / 80) for s in range(80)]
    found = run_doctor(events)
    assert serious(found) == [], [f.message for f in found]


def test_flat_groups_found_once_naming_share_steps_and_groups() -> None:
    rng = random.Random(5)
    events = [verl_batch(s, rng, solved=0.2 if s < 30 else 0.85) for s in range(60)]
    found = [f for f in run_doctor(events) if f.rule == "flat_groups"]
    assert len(found) == 1, [f.message for f in found]
    [f] = found
    assert 30 <= f.step <= 31 and f.keys == ("rollout/samples",)
    assert "of the GRPO groups in rollout/samples carry no learning signal" in f.message
    assert "groups uid-" in f.message and "all at 1" in f.message
    assert f"{f.step}-" in f.message or f"step {f.step}" in f.message
    # a stricter share, and a user's group and reward columns
    assert [x for x in run_doctor(events, {"flat_groups": {"share": 1.0}})] == []
    renamed = [batch(e.step, {"prompt_id" if c == "uid" else "acc" if c == "score" else c: v
                              for c, v in zip(e.columns, e.values, strict=True)
                              if c != "reward"}) for e in events]
    assert run_doctor(renamed, {"flat_groups": True}) == []
    custom = run_doctor(renamed, {"flat_groups": {"group_columns": ["prompt_id"],
                                                  "reward_columns": ["acc"]}})
    assert [f.step for f in custom] == [f.step]
    globbed = run_doctor(renamed, {"flat_groups": {"group_columns": ["prompt_*"],
                                                   "reward_columns": ["re:^ac+$"]}})
    assert [f.step for f in globbed] == [f.step]


def test_flat_groups_reads_tables_and_skips_small_batches() -> None:
    rows = tuple((g, 0.0, "text") for g in range(4) for _ in range(4))
    tables = [TableEvent("rollout/table", ("group", "reward", "response"), rows, s, 1.0 + s)
              for s in range(5)]
    found = run_doctor(tables, {"flat_groups": True})
    assert [f.step for f in found] == [0] and "all at 0" in found[0].message
    small = [TableEvent("t", ("group", "reward"), tuple((g, 0.0) for g in range(3)), s, 1.0)
             for s in range(5)]  # groups of one sample carry no comparison
    assert run_doctor(small, {"flat_groups": True}) == []


def test_component_falling_while_total_rises_is_found() -> None:
    """Reward hacking: a format bonus climbs, the accuracy falls, the total rises."""
    rng = random.Random(7)
    events = [trl_batch(s, rng, 0.6, 0.1) for s in range(40)]
    events += [trl_batch(s, rng, 0.6 - 0.5 * min(1.0, (s - 40) / 10),
                         0.1 + 0.85 * min(1.0, (s - 40) / 10)) for s in range(40, 80)]
    found = [f for f in run_doctor(events) if f.rule == "component_divergence"]
    assert len(found) == 1, [f.message for f in found]
    [f] = found
    assert 40 <= f.step <= 50
    assert "reward component reward/accuracy in rollout/samples fell" in f.message
    assert "while the total reward rose" in f.message and "reward reward" not in f.message


def test_correlation_flip_is_found() -> None:
    rng = random.Random(9)
    events = [batch(s, {"reward": [a + 0.2 * a for a in acc], "reward/accuracy": acc,
                        "reward/format": list(acc), "group": [i // 4 for i in range(64)]})
              for s in range(30)
              for acc in [[float(rng.random() < 0.5) for _ in range(64)]]]
    events += [trl_batch(s, rng, 0.5, 0.5, flip=True) for s in range(30, 60)]
    found = [f for f in run_doctor(events) if f.rule == "component_divergence"]
    assert len(found) == 1, [f.message for f in found]
    assert "reward/format" in found[0].message and "flipped from +1.00" in found[0].message
    assert 30 <= found[0].step <= 35


def test_flat_groups_reads_a_real_log_samples_run(tmp_path: Path) -> None:
    """TRL-shaped batches logged with run.log_samples and read back from the spool."""
    import trackmux
    from trackmux.core.spool.reader import SpoolReader

    run = trackmux.init(project="p", backends=[], dir=tmp_path, doctor=False)
    for step in range(4):
        rewards = [1.0] * 16 + [0.0, 1.0, 0.0, 1.0]  # 4 of 5 groups all solved
        run.log_samples("rollout", {"prompt": ["p"] * 20, "response": ["r"] * 20,
                                    "reward": rewards, "reward/accuracy": list(rewards),
                                    "group": [i // 4 for i in range(20)]}, step=step)
    run.finish(timeout=30)
    reader = SpoolReader(run.dir)
    try:
        events = [e for e in reader.iter_events() if isinstance(e, SamplesEvent)]
    finally:
        reader.close()
    assert len(events) == 4
    found = run_doctor(events)
    assert [(f.rule, f.step) for f in found] == [("flat_groups", 0)]
    assert "80% of the GRPO groups in rollout" in found[0].message
    assert "4 of 5 groups at step 2" in found[0].message and "groups 0, 1, 2, 3)" in \
        found[0].message
