"""The index of a spool's events by kind: made in new spools, so a run list reads a run's
findings (and a report its tables) without scanning 10,000s of metrics rows; spools
written before it are read the same, and never changed by reading or resuming them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trackmux
from trackmux.core.events import FindingEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.runs import summarize
from trackmux.doctor.read import stored_findings


def _run(root: Path, steps: int = 300) -> Path:
    run = trackmux.init(project="p", name="r", run_id="r1", backends=[], dir=root)
    assert isinstance(run, trackmux.Run)
    for step in range(steps):
        run.log({"loss": 1.0 / (step + 1), "reward": step * 0.01}, step=step)
        if step % 100 == 0:
            run.log_table("samples", ["text"], [[f"step {step}"]], step=step)
    assert run.finish(timeout=60).complete
    return run.dir


def _indexes(run_dir: Path) -> set[str]:
    with sqlite3.connect(run_dir / "spool.db") as conn:
        return {name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events'")}


def _plan(run_dir: Path, sql: str) -> str:
    with sqlite3.connect(run_dir / "spool.db") as conn:
        return " ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql))


def _what_a_run_list_reads(run_dir: Path) -> tuple[int, int, list[str], list[str]]:
    summary = summarize(run_dir)
    reader = SpoolReader(run_dir)
    try:
        tables = [e.key for e in reader.events_of_kind("table")]  # type: ignore[attr-defined]
    finally:
        reader.close()
    found = stored_findings(run_dir) or []
    return summary.events, summary.last_seq, tables, [f.rule for f in found]


def test_a_new_spool_is_indexed_by_kind_and_reads_use_it(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    assert "events_kind" in _indexes(run_dir)
    assert "events_kind" in _plan(run_dir, "SELECT seq FROM events WHERE kind = 'finding'")
    events, last_seq, tables, _ = _what_a_run_list_reads(run_dir)
    with sqlite3.connect(run_dir / "spool.db") as conn:
        rows = conn.execute("SELECT count(*) FROM events NOT INDEXED").fetchone()[0]
    assert events == rows == last_seq
    assert tables == ["samples", "samples", "samples"]


def test_a_spool_without_the_index_reads_the_same_and_is_left_alone(
        tmp_path: Path) -> None:
    indexed = _run(tmp_path / "a")
    old = _run(tmp_path / "b")
    with sqlite3.connect(old / "spool.db") as conn:
        conn.execute("DROP INDEX events_kind")
    before = (old / "spool.db").read_bytes()

    assert _what_a_run_list_reads(old) == _what_a_run_list_reads(indexed)
    assert (old / "spool.db").read_bytes() == before  # reading did not build it

    # a resumed run goes on writing the old spool as it is (no index built at init)
    run = trackmux.init(project="p", run_id="r1", resume="must", backends=[],
                        dir=tmp_path / "b")
    assert isinstance(run, trackmux.Run)
    run.log({"loss": 0.5}, step=300)
    run.finish(timeout=60)
    assert "events_kind" not in _indexes(old)
    assert summarize(old).events == summarize(indexed).events + 1


def test_findings_are_found_through_the_index(tmp_path: Path) -> None:
    run = trackmux.init(project="p", name="r", backends=[], dir=tmp_path)
    assert isinstance(run, trackmux.Run)
    for step in range(200):
        run.log({"loss": float("nan") if step == 150 else 1.0}, step=step)
    assert run.finish(timeout=60).complete
    found = stored_findings(run.dir)
    assert found is not None and any(isinstance(f, FindingEvent) and f.rule == "nonfinite"
                                     for f in found)
