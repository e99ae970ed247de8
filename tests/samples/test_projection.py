"""What each backend is shown of a batch: cap, stated policy, whole groups, determinism,
bad options named at init, and the table fallback through a real delivery."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import trackmux
from trackmux.core.delivery.sample_rows import select, to_table
from trackmux.core.events import SamplesEvent, TokenArray
from trackmux.core.spool.samplepack import pack, unpack


def _event(n: int = 24, group: int = 4, reward: Any = None) -> SamplesEvent:
    rewards = reward or [float((i * 7) % n) for i in range(n)]
    cols = ("uid", "reward", "response")
    values = (tuple(f"g{i // group}" for i in range(n)), tuple(rewards),
              tuple(f"r{i}" for i in range(n)))
    lp = TokenArray("lp", "f4", tuple([2] * n),
                    b"".join(bytes(4) * 2 for _ in range(n)))
    return SamplesEvent("k", cols, values, (lp,), 7, 1.0)


def test_whole_groups_are_chosen_up_to_the_cap() -> None:
    event = _event()
    for policy in ("spread", "best", "worst", "extremes", "random"):
        rows = select(event, 10, policy, seed=1)
        groups = {i // 4 for i in rows}
        assert len(rows) == 8 and all(all(g * 4 + k in rows for k in range(4)) for g in groups)
    assert select(event, 100, "best") == list(range(24))


def test_best_and_worst_rank_groups_by_mean_reward() -> None:
    rewards = [0.0] * 4 + [1.0] * 4 + [0.5] * 4
    event = _event(12, 4, rewards)
    assert select(event, 4, "best") == [4, 5, 6, 7]
    assert select(event, 4, "worst") == [0, 1, 2, 3]
    assert select(event, 8, "extremes") == [0, 1, 2, 3, 4, 5, 6, 7]


def test_random_is_deterministic_per_seed_and_step() -> None:
    event = _event(64, 1)
    assert select(event, 5, "random", 3) == select(event, 5, "random", 3)
    assert select(event, 5, "random", 3) != select(event, 5, "random", 4)


def test_a_group_larger_than_the_cap_is_cut() -> None:
    assert select(_event(10, 10), 3, "spread") == [0, 1, 2]


def test_table_projection_has_step_sample_and_token_summaries() -> None:
    event = unpack(*_packed(_event()), 7, 1.0, 0)
    table = to_table(event, [0, 5])
    assert table.columns == ("step", "sample", "uid", "reward", "response", "tokens",
                             "lp/mean")
    assert table.rows[1][:5] == (7, 5, "g1", 11.0, "r5") and table.rows[1][5:] == (2, 0.0)


def _packed(event: SamplesEvent) -> tuple[dict[str, Any], bytes]:
    return pack(event)


def test_bad_sample_options_fail_at_init(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sample_policy must be one of"):
        trackmux.init(project="p", backends=["file"], dir=tmp_path,
                      backend_options={"file": {"sample_policy": "top"}})
    with pytest.raises(ValueError, match="sample_rows must be >= 1"):
        trackmux.init(project="p", backends=["file"], dir=tmp_path,
                      backend_options={"file": {"sample_rows": 0}})


def test_file_and_console_get_capped_tables_each_step(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = trackmux.init(project="p", backends=["file", "console"], dir=tmp_path,
                        backend_options={"file": {"sample_rows": 6,
                                                  "sample_policy": "best"}})
    for step in range(3):
        run.log_samples("rollouts", {"uid": [i // 3 for i in range(12)],
                                     "reward": [float(i) for i in range(12)],
                                     "response": [f"s{step}r{i}" for i in range(12)]},
                        step=step)
    run.finish(timeout=30)
    files = list(tmp_path.rglob("*.tables.jsonl"))  # the file backend writes in the run
    assert len(files) == 1
    lines = [orjson.loads(x) for x in files[0].read_bytes().splitlines()]
    assert [line["step"] for line in lines] == [0, 1, 2]
    for line in lines:  # the two best groups (rewards 9-11 and 6-8), every step
        assert [row[1] for row in line["rows"]] == [6, 7, 8, 9, 10, 11]
    out = capsys.readouterr().out
    assert out.count("12 samples, showing 3 (spread)") == 3  # console: cap 4, whole groups
    assert "#0 uid=0 reward=0 | 's2r0'" in out
