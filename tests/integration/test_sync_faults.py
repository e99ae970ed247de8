"""``trackmux sync`` against a real mlflow server: killed mid-delivery and rerun gives
exactly once; a second sync of the same run and backend at once is refused (exit 2)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from _support import MlflowReadback, cli, cli_popen, cursor, wait_until

import trackmux

pytest.importorskip("mlflow")

STEPS = 400
KEYS = 50  # 20,000 metric points: 20+ log_batch requests, a few seconds over HTTP


def value(step: int, j: int) -> float:
    return step * 0.25 - j


def spool_only_run(root: Path, project: str) -> Path:
    """A finished run that no backend has seen (backends=[]: spool only)."""
    run = trackmux.init(project=project, backends=[], dir=root)
    assert isinstance(run, trackmux.Run)
    for step in range(STEPS):
        run.log({f"k/{j:02d}": value(step, j) for j in range(KEYS)}, step=step)
    run.log_text("notes", "a text event between metrics", step=STEPS - 1)
    summary = run.finish(timeout=10)
    assert summary.events == STEPS + 1
    return run.dir


def server_rows(server: Any, project: str) -> tuple[list[Any], list[tuple[Any, ...]]]:
    view = MlflowReadback(server.url)
    runs = view.runs(project)
    rows = [r for run in runs for r in view.stored_rows(server.db_path, run.info.run_id)]
    return runs, rows


def db_metric_count(server: Any) -> int:
    import sqlite3

    conn = sqlite3.connect(f"file:{server.db_path}?mode=ro", uri=True, timeout=30)
    try:
        return int(conn.execute("SELECT count(*) FROM metrics").fetchone()[0])
    except sqlite3.OperationalError:  # tables not created yet
        return 0
    finally:
        conn.close()


@pytest.mark.parametrize("seed", [7])
def test_sync_killed_mid_delivery_then_rerun_delivers_exactly_once(
        mlflow_server: Any, tmp_path: Path, seed: int) -> None:
    run_dir = spool_only_run(tmp_path / "spool", "killed-sync")
    mlflow_server.start()
    url_option = f"mlflow.tracking_uri={mlflow_server.url}"
    first = cli_popen("sync", str(run_dir), "--to", "mlflow", "-o", url_option,
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: db_metric_count(mlflow_server) > 0, 90, interval=0.05), \
            "the first sync never delivered anything"
        time.sleep(random.Random(seed).uniform(0.0, 1.0))
        assert first.poll() is None, "the first sync finished before it could be killed"
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    stored_at_kill = db_metric_count(mlflow_server)
    acked_at_kill = cursor(run_dir, "mlflow").acked_seq
    assert stored_at_kill < STEPS * KEYS, "nothing was left to deliver after the kill"

    second = cli("sync", str(run_dir), "--to", "mlflow", "-o", url_option)
    assert second.returncode == 0, second.stdout + second.stderr
    print(f"killed with {stored_at_kill} points stored, cursor at event {acked_at_kill}")
    assert cursor(run_dir, "mlflow").acked_seq == STEPS + 1
    runs, rows = server_rows(mlflow_server, "killed-sync")
    assert len(runs) == 1, "the rerun created a second mlflow run instead of continuing"
    assert len(rows) == STEPS * KEYS
    got = sorted((key, step, value) for key, step, _, value in rows)
    assert got == sorted((f"k/{j:02d}", s, value(s, j)) for s in range(STEPS)
                         for j in range(KEYS))
    texts = MlflowReadback(mlflow_server.url).client.list_artifacts(runs[0].info.run_id,
                                                                     "text/notes")
    assert len(texts) == 1


def _read_available(stream: Any, into: bytearray) -> None:
    os.set_blocking(stream.fileno(), False)
    try:
        chunk = os.read(stream.fileno(), 65536)
    except BlockingIOError:
        return
    into.extend(chunk or b"")


def test_second_sync_of_same_run_and_backend_is_refused(
        mlflow_server: Any, tmp_path: Path) -> None:
    run_dir = spool_only_run(tmp_path / "spool", "two-syncs")
    mlflow_server.start()
    mlflow_server.pause()  # the first sync hangs in mlflow while holding the lock
    url_option = f"mlflow.tracking_uri={mlflow_server.url}"
    first = cli_popen("sync", str(run_dir), "--to", "mlflow", "-o", url_option, "--progress",
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        err = bytearray()
        assert first.stderr is not None

        def first_is_delivering() -> bool:
            _read_available(first.stderr, err)
            return b"mlflow" in err  # its progress bar exists: it holds the lock

        assert wait_until(first_is_delivering, 60, interval=0.1), err.decode()
        second = cli("sync", str(run_dir), "--to", "mlflow", "-o", url_option)
        assert second.returncode == 2, second.stdout + second.stderr
        assert "another process is already delivering" in second.stderr
        assert run_dir.name in second.stderr and "mlflow" in second.stderr
    finally:
        mlflow_server.resume()
    out, rest = first.communicate(timeout=180)
    assert first.returncode == 0, out + rest
    runs, rows = server_rows(mlflow_server, "two-syncs")
    assert len(runs) == 1 and len(rows) == STEPS * KEYS


def test_sync_options_are_typed_and_a_bad_option_fails_fast(tmp_path: Path) -> None:
    """``-o mlflow.http_timeout=5`` reaches the backend as a number (it used to arrive as
    "5" and be rejected), and a bad option is a usage error (exit 2) at once instead of an
    ``open`` retried with backoff until ``--timeout`` (or forever without one)."""
    run_dir = tmp_path / "spool"
    run = trackmux.init(project="options", backends=[], dir=run_dir)
    assert isinstance(run, trackmux.Run)
    run.log({"x": 1.5}, step=3)
    run.finish(timeout=5)
    store = f"mlflow.tracking_uri=sqlite:///{tmp_path / 'store.db'}"
    good = cli("sync", str(run.dir), "--to", "mlflow", "-o", store,
               "-o", "mlflow.http_timeout=5", "--timeout", "120")
    assert good.returncode == 0, good.stdout + good.stderr
    # no --timeout: a retry loop would never exit (cli() would raise at 180 s); exit 2 is
    # the usage error, decided before any open
    bad = cli("sync", str(run.dir), "--to", "mlflow", "-o", store, "-o", "mlflow.colour=red")
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "colour" in bad.stderr and "mlflow" in bad.stderr
