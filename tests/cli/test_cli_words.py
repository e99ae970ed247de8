"""Issue 27, words a newcomer reads: a mid-run sync never says "acknowledged 3478 of
3204"; the report's duration is the run's wall time (to its last event when it never
finished)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import trackmux
from trackmux.cli.sync import outcome
from trackmux.core.delivery.sync import deliver_by_name
from trackmux.report.load import load_run
from trackmux.report.sections import wall_time


def test_a_sync_of_a_live_run_never_acknowledges_more_than_its_target(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path / "spool")
    for step in range(2000):
        run.log({"x": float(step)}, step=step)
    run._spool.flush(10)
    stop = threading.Event()

    def keep_logging() -> None:
        step = 2000
        while not stop.is_set():
            run.log({"x": float(step)}, step=step)
            step += 1
            time.sleep(0.0005)

    writer = threading.Thread(target=keep_logging)
    writer.start()
    try:
        result = deliver_by_name(run.dir, ["file"], {"file": {"root": str(tmp_path / "out")}},
                                 timeout=20)
    finally:
        stop.set()
        writer.join()
        run.finish()
    assert result.acked["file"] <= result.target and result.acked["file"] >= 2000
    line = outcome(result, "file")
    assert f"of {result.target}" in line or "complete" in line, line


def test_the_reports_duration_is_the_runs_wall_time(tmp_path: Path) -> None:
    assert wall_time(100.0, 103.0, 102.0, "finished") == "3.0 s"
    assert wall_time(100.0, None, 190.0, "crashed") == "1m 30s (crashed: to its last event)"
    assert wall_time(None, 103.0, 102.0, "finished") == ""
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    run.log({"a": 1.0})
    time.sleep(0.3)
    run.log({"a": 2.0})
    run.finish()
    data = load_run(run.dir)
    assert data.last_time is not None and data.last_time - run.started_at >= 0.3
