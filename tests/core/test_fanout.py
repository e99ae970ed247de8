"""Fan-out: a slow, raising or hanging backend never reaches the caller or the others."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import trackmux
from trackmux.testing import faults


def _received(store: Any, run_id: str, key: str) -> int:
    """Points of ``key`` the memory backend has (0 before it opened the run)."""
    got = store.runs.get(run_id)
    return 0 if got is None else len(got.metrics().get(key, []))


def test_a_hung_backend_holds_back_neither_log_nor_the_healthy_backend(
        test_backends: Any, spool_dir: Path) -> None:
    # "hanging" blocks in write() until faults.release is set, which only the fixture's
    # teardown does: every log() below returned, and the memory backend got every step,
    # while that backend was stuck, so neither waited on it. (log()'s speed is a
    # performance claim: benchmarks B1/B2, docs/performance.md.)
    run = trackmux.init(project="fanout", backends=["hanging", "memory"], dir=spool_dir)
    for step in range(10_000):
        run.log({"loss": 1.0 / (step + 1), "reward/mean": step * 0.001}, step=step)
    deadline = time.monotonic() + 120
    while _received(test_backends, run.id, "loss") < 10_000:
        assert time.monotonic() < deadline, "the healthy backend waited on the hung one"
        time.sleep(0.01)
    assert not faults.release.is_set()  # the hung backend was stuck all along
    summary = run.finish(timeout=2)
    received = test_backends[run.id].metrics()
    assert [s for s, _ in received["loss"]] == list(range(10_000))
    assert summary.pending.get("memory") is None
    assert summary.pending["hanging"] > 0  # still in the spool, reported, not lost


def test_raising_backend_is_reported_once_and_training_continues(
        test_backends: Any, spool_dir: Path, caplog: Any) -> None:
    caplog.set_level(logging.WARNING, logger="trackmux")
    run = trackmux.init(project="fanout", backends=["raising", "memory"], dir=spool_dir,
                        backend_options={"raising": {"where": "write"}})
    for step in range(200):
        run.log({"x": step}, step=step)
    run.log_table("t", ["a"], [[1]], step=5)
    # the raising backend holds finish() to its deadline: the healthy one is waited for
    # first, so a short deadline on a loaded machine cannot cut it short
    deadline = time.monotonic() + 120
    while _received(test_backends, run.id, "x") < 200:
        assert time.monotonic() < deadline, "the healthy backend waited on the raising one"
        time.sleep(0.01)
    summary = run.finish(timeout=3)
    reports = [r for r in caplog.records if "backend 'raising'" in r.getMessage()]
    assert len(reports) == 1, [r.getMessage() for r in reports]
    assert "write exploded" in reports[0].getMessage()
    assert [p.backend for p in summary.problems] == ["raising"]
    assert len(test_backends[run.id].metrics()["x"]) == 200
    assert summary.pending == {"raising": summary.events}


def test_backend_hanging_in_open_or_write_respects_finish_deadline(
        test_backends: Any, spool_dir: Path) -> None:
    run = trackmux.init(project="fanout", backends=["hanging", "memory"], dir=spool_dir,
                        backend_options={"hanging": {"where": "open"}})
    for step in range(100):
        run.log({"x": step}, step=step)
    start = time.monotonic()
    summary = run.finish(timeout=1.0)
    # The backend never returns from open() (nothing releases it before teardown), so
    # finish() came back by its deadline or not at all: 30x the deadline is a bound only
    # a hang passes, not a speed claim (B6 measures finish() against its deadline).
    assert time.monotonic() - start < 30
    assert summary.pending == {"hanging": 100}
    assert len(test_backends[run.id].metrics()["x"]) == 100


def test_finish_is_idempotent_and_log_after_finish_raises(
        test_backends: Any, spool_dir: Path) -> None:
    run = trackmux.init(project="p", backends=["memory"], dir=spool_dir)
    run.log({"x": 1})
    first = run.finish()
    assert run.finish() is first
    assert test_backends[run.id].closed == "finished"
    try:
        run.log({"x": 2})
    except trackmux.RunFinishedError as exc:
        assert run.id in str(exc)
    else:
        raise AssertionError("log after finish was accepted")


def test_context_manager_marks_failure(test_backends: Any, spool_dir: Path) -> None:
    try:
        with trackmux.init(project="p", backends=["memory"], dir=spool_dir) as run:
            run.log({"x": 1})
            raise KeyError("boom")
    except KeyError:
        pass
    assert test_backends[run.id].closed == "failed"
