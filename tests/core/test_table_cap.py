"""Rollout tables at volume: ``max_rows`` per call and per backend, the spool keeps all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import trackmux
from trackmux.core.delivery.fallbacks import cap_rows
from trackmux.core.delivery.sync import deliver
from trackmux.core.events import TableEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.plugins.file import FileBackend


def _rows(n: int) -> list[list[Any]]:
    return [[f"prompt {i}", f"response {i}", i / n] for i in range(n)]


def test_cap_picks_evenly_keeping_first_and_last() -> None:
    event = TableEvent("t", ("a",), tuple((i,) for i in range(100)), 0, 0.0)
    assert [r[0] for r in cap_rows(event, 5).rows] == [0, 25, 50, 74, 99]
    assert cap_rows(event, 1).rows == ((0,),)
    assert cap_rows(event, None) is event and cap_rows(event, 100) is event
    capped = TableEvent("t", ("a",), event.rows, 0, 0.0, max_rows=3)
    assert [r[0] for r in cap_rows(capped, None).rows] == [0, 50, 99]
    assert [r[0] for r in cap_rows(capped, 10).rows] == [0, 50, 99]  # smaller cap wins
    assert cap_rows(capped, 2).rows == ((0,), (99,))


def test_spool_keeps_all_rows_backends_show_their_cap(tmp_path: Path,
                                                      memory_backend: Any) -> None:
    files = tmp_path / "files"
    run = trackmux.init(project="t", name="cap", backends=["memory", "file"], dir=tmp_path,
                        backend_options={"file": {"root": str(files), "max_rows": 10}})
    run.log_table("rollouts", ["prompt", "response", "reward"], _rows(1000), step=1)
    run.log_table("rollouts", ["prompt", "response", "reward"], _rows(1000), step=2,
                  max_rows=4)
    assert run.finish().complete
    reader = SpoolReader(run.dir)
    spooled = [e for e in reader.iter_events() if isinstance(e, TableEvent)]
    reader.close()
    assert [len(e.rows) for e in spooled] == [1000, 1000]
    assert [e.max_rows for e in spooled] == [None, 4]
    memory = memory_backend[run.id].of_kind("table")
    assert [len(e.rows) for e in memory] == [1000, 4]  # memory: no backend cap
    lines = (files / "t" / "cap.tables.jsonl").read_bytes().splitlines()
    shown = [orjson.loads(line)["rows"] for line in lines]
    assert [len(r) for r in shown] == [10, 4]
    assert shown[0][0][0] == "prompt 0" and shown[0][-1][0] == "prompt 999"


def test_a_later_sync_shows_the_same_rows(tmp_path: Path) -> None:
    run = trackmux.init(project="t", name="again", backends=[], dir=tmp_path)
    run.log_table("rollouts", ["prompt", "response", "reward"], _rows(500), max_rows=7)
    run.finish()
    shown = []
    for target in ("a", "b"):
        root = tmp_path / target
        deliver(run.dir, {f"file-{target}": lambda root=root: FileBackend(
            {"root": str(root), "max_rows": 50})}, timeout=30)
        [line] = (root / "t" / "again.tables.jsonl").read_bytes().splitlines()
        shown.append(orjson.loads(line)["rows"])
    assert len(shown[0]) == 7 and shown[0] == shown[1]


@pytest.mark.parametrize(("cap", "error"), [(0, ValueError), (-3, ValueError),
                                            (2.5, TypeError), (True, TypeError),
                                            ("10", TypeError)])
def test_bad_caps_name_max_rows(tmp_path: Path, cap: Any, error: type[Exception]) -> None:
    run = trackmux.init(project="t", backends=[], dir=tmp_path, strict=True)
    with pytest.raises(error, match="max_rows"):
        run.log_table("k", ["a"], [[1]], max_rows=cap)
    run.finish()
    run = trackmux.init(project="t", backends=[], dir=tmp_path)  # default: dropped, named
    run.log_table("k", ["a"], [[1]], max_rows=cap)
    [problem] = run.finish().problems
    assert problem.kind == "table 'k'" and "max_rows" in problem.message
    with pytest.raises(error, match="max_rows"):
        FileBackend({"max_rows": cap})
