"""Issue 6: a real mlflow server that dies or hangs mid-run never reaches the training loop,
and every event still reaches it exactly once.

The training loop runs in a child process (``_child.py log-to-mlflow``) as a real trainer
would; the test owns the server and kills, restarts, pauses and resumes it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _child import wide_metrics
from _support import (
    HERE,
    MlflowReadback,
    child_env,
    cli,
    cursor,
    wait_delivery_process_gone,
    wait_until,
)

from trackmux.core.spool.reader import SpoolReader

pytest.importorskip("mlflow")

# The "no log() call blocks over 10 ms" is a speed claim, measured by benchmark B2
# (log() with mlflow dead, docs/performance.md); here the trainer is shown to keep logging
# while the server is dead or hung, which it could not do if log() waited on the server.
GROWS_BY = 50  # events the trainer spools while the server cannot answer
RESTART_AFTER = 30.0  # the issue: restarted 30 s later


def start_trainer(url: str, root: Path, *, pace: float, finish_timeout: float,
                  wait_delivery: float) -> tuple[subprocess.Popen[bytes], Path]:
    result = root / "result.json"
    root.mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen(
        [sys.executable, str(HERE / "_child.py"), "log-to-mlflow", url, str(root), str(result),
         str(pace), str(finish_timeout), str(wait_delivery)],
        env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert wait_until(result.exists, 60), "the trainer did not start"
    return child, result


def wait_trainer(child: subprocess.Popen[bytes], result: Path, timeout: float) -> dict[str, Any]:
    try:
        _, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        _, err = child.communicate()
        raise AssertionError(f"trainer did not exit within {timeout} s: {err.decode()[-2000:]}"
                             ) from None
    assert child.returncode == 0, err.decode()[-3000:]
    data: dict[str, Any] = json.loads(result.read_text())
    return data


def spooled_seq(run_dir: Path) -> int:
    """The last event the trainer's log() calls committed to the spool."""
    reader = SpoolReader(run_dir)
    try:
        return int(reader.last_seq())
    finally:
        reader.close()


def live_acked(run_dir: Path) -> int:
    try:
        return int(cursor(run_dir, "mlflow").acked_seq)
    except Exception:  # the spool may not exist yet
        return 0


def assert_exactly_once_in_order(server: Any, steps: int) -> None:
    """Each key's stored history is steps 0..steps-1 with the logged values, once each, and
    the server's timestamps order them as they were logged."""
    view = MlflowReadback(server.url)
    runs = view.runs("faults")
    assert len(runs) == 1, f"{len(runs)} mlflow runs for one trackmux run"
    run_id = runs[0].info.run_id
    rows = view.stored_rows(server.db_path, run_id)
    assert len(rows) == steps * 20, f"{len(rows)} rows stored for {steps} steps x 20 metrics"
    for key in ("m/00", "m/19"):
        history = view.history(run_id, key)  # ordered by (timestamp, step)
        assert [s for s, _, _ in history] == list(range(steps)), key
        assert [v for _, v, _ in history] == [wide_metrics(s)[key] for s in range(steps)], key
    by_key: dict[str, list[tuple[int, float]]] = {}
    for key, step, _, value in rows:
        by_key.setdefault(key, []).append((step, value))
    for key, points in by_key.items():
        assert sorted(points) == [(s, wide_metrics(s)[key]) for s in range(steps)], key


@pytest.mark.slow
def test_server_killed_and_restarted_30s_later(mlflow_server: Any, tmp_path: Path) -> None:
    mlflow_server.start()
    child, result = start_trainer(mlflow_server.url, tmp_path / "spool", pace=0.05,
                                  finish_timeout=30, wait_delivery=120)
    run_dir = Path(json.loads(result.read_text())["run_dir"])
    assert wait_until(lambda: live_acked(run_dir) > 10, 60), "live delivery never started"
    mlflow_server.kill()
    acked_at_kill = live_acked(run_dir)
    killed_at = spooled_seq(run_dir)
    assert wait_until(lambda: spooled_seq(run_dir) >= killed_at + GROWS_BY, 120), \
        "the trainer stopped logging when the server died"
    time.sleep(RESTART_AFTER)  # the outage: the server stays dead 30 s
    mlflow_server.start()  # same port, same database
    time.sleep(2.0)  # keep logging a little against the restarted server
    (tmp_path / "spool" / "stop").touch()
    out = wait_trainer(child, result, timeout=240)
    print(f"killed at event {acked_at_kill}; {out['steps']} steps; live delivery caught up "
          f"{out['caught_up_after']:.1f} s after the last log(); log() max "
          f"{out['wall']['log'] * 1e3:.1f} ms wall / {out['blocked']['log'] * 1e3:.1f} ms blocked")
    # Live delivery resumed by itself: everything acknowledged before finish() was called.
    acked, last = out["delivery_before_finish"]
    assert acked == last == out["steps"], out
    assert out["pending"] == {}
    assert acked_at_kill < out["steps"]
    assert_exactly_once_in_order(mlflow_server, out["steps"])


def test_server_hangs_finish_keeps_deadline_and_sync_delivers_the_rest(
        mlflow_server: Any, tmp_path: Path) -> None:
    finish_timeout = 3.0
    mlflow_server.start()
    root = tmp_path / "spool"
    child, result = start_trainer(mlflow_server.url, root, pace=0.01,
                                  finish_timeout=finish_timeout, wait_delivery=0)
    run_dir = Path(json.loads(result.read_text())["run_dir"])
    assert wait_until(lambda: live_acked(run_dir) > 10, 60), "live delivery never started"
    mlflow_server.pause()  # SIGSTOP: connections open, nothing answers
    try:
        paused_at = spooled_seq(run_dir)
        # training goes on against the hung server (it stays stopped until the trainer
        # exited: its log() and finish() calls all returned while nothing answered)
        assert wait_until(lambda: spooled_seq(run_dir) >= paused_at + GROWS_BY, 120), \
            "the trainer stopped logging when the server hung"
        (root / "stop").touch()
        out = wait_trainer(child, result, timeout=120)
    finally:
        mlflow_server.resume()
    print(f"{out['steps']} steps; finish took {out['finish_seconds']:.2f} s; pending "
          f"{out['pending']}; log() max {out['wall']['log'] * 1e3:.1f} ms wall / "
          f"{out['blocked']['log'] * 1e3:.1f} ms blocked")
    # finish() returned while the server was still stopped (so by its deadline, not by
    # delivering); 10x its deadline is a bound only a hang passes, not a speed claim
    assert out["finish_seconds"] < finish_timeout * 10, out
    assert out["pending"].get("mlflow", 0) > 0, "the hang left nothing to sync later"

    # the server resumed, the trainer's delivery process (still going: orphan_timeout)
    # delivers the rest and exits; a sync meanwhile would be refused
    wait_delivery_process_gone(run_dir)
    synced = cli("sync", str(run_dir))
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert cursor(run_dir, "mlflow").acked_seq == out["events"]
    assert_exactly_once_in_order(mlflow_server, out["steps"])
