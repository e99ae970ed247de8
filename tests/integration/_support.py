"""Helpers shared by the integration tests: the real CLI in a subprocess, a real mlflow server,
reading back what the server and the spool hold.

Everything here talks to real processes: ``trackmux`` runs as ``python -m trackmux``, the
mlflow server is ``trackmux.testing.mlflow_server.MlflowServer`` on 127.0.0.1.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from trackmux.core.spool.reader import SpoolReader

HERE = Path(__file__).parent
#: Bounded mlflow HTTP behaviour for every process we start (a dead server must fail fast).
MLFLOW_ENV = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    "DO_NOT_TRACK": "1",
}


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(MLFLOW_ENV)
    env.pop("MLFLOW_TRACKING_URI", None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def cli(*args: str, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
    """``trackmux ARGS`` in a fresh process (the real entry point, not click's runner)."""
    return subprocess.run([sys.executable, "-m", "trackmux", *args], env=child_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)


def cli_popen(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "trackmux", *args], env=child_env(),
                            text=True, **kwargs)


def spooled(run_dir: Path) -> list[Any]:
    """Every intact event in a run's spool, in seq order."""
    reader = SpoolReader(run_dir)
    try:
        return list(reader.iter_events())
    finally:
        reader.close()


def cursor(run_dir: Path, backend: str) -> Any:
    reader = SpoolReader(run_dir)
    try:
        return reader.cursor(backend)
    finally:
        reader.close()


def expected_metrics(events: list[Any]) -> dict[str, list[tuple[int, float]]]:
    """key -> [(step, value)] in logging order, from spooled or logged events."""
    out: dict[str, list[tuple[int, float]]] = {}
    for event in events:
        if event.kind == "metrics":
            for key, value in event.data.items():
                out.setdefault(key, []).append((event.step, float(value)))
    return out


class MlflowReadback:
    """What the mlflow server stores for one trackmux run (found by its run-id tag)."""

    def __init__(self, url: str) -> None:
        from mlflow import MlflowClient

        self.client = MlflowClient(tracking_uri=url)

    def runs(self, project: str) -> list[Any]:
        experiment = self.client.get_experiment_by_name(project)
        if experiment is None:
            return []
        return list(self.client.search_runs([experiment.experiment_id], max_results=100))

    def history(self, run_id: str, key: str) -> list[tuple[int, float, int]]:
        """(step, value, timestamp) of every stored point, ordered by (timestamp, step)."""
        points = self.client.get_metric_history(run_id, key)
        return sorted(((m.step, m.value, m.timestamp) for m in points),
                      key=lambda p: (p[2], p[0]))

    @staticmethod
    def stored_rows(db_path: Path, run_id: str) -> list[tuple[Any, ...]]:
        """Every metric row in the server's own SQLite store for ``run_id`` (one query; the
        REST API needs one request per key)."""
        import sqlite3

        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
        try:
            return sorted(conn.execute("SELECT key, step, timestamp, value FROM metrics "
                                       "WHERE run_uuid = ?", (run_id,)).fetchall())
        finally:
            conn.close()

    def all_history(self, run_id: str) -> dict[str, list[tuple[int, float]]]:
        run = self.client.get_run(run_id)
        return {key: [(s, v) for s, v, _ in self.history(run_id, key)]
                for key in run.data.metrics}


def process_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_delivery_process_gone(run_dir: Path, timeout: float = 120) -> None:
    """The run's delivery process goes on after its trainer ended (killed, or finish()
    stopped waiting: orphan_timeout) and holds the delivery locks meanwhile, so a sync
    started then is refused: wait for it to finish and exit, as a user who reads that
    refusal does."""
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run_dir)
    try:
        pid = reader.meta().get("delivery_pid")
    finally:
        reader.close()
    if pid:
        assert wait_until(lambda: not process_alive(int(pid)), timeout), \
            "the delivery process did not exit"


def wait_until(predicate: Any, timeout: float, interval: float = 0.2) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds pass (bounded, never forever)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def _run_delay() -> int | None:
    """Nanoseconds this thread has spent runnable but waiting for a CPU (Linux schedstat)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None


class CallTimer:
    """Times calls on the caller's thread, wall clock and "blocked" time.

    ``blocked`` is wall time minus the time the thread sat runnable in the kernel's run
    queue: on a shared machine (these tests run on 2 cores next to other jobs) the OS
    preempts the trainer for several ms at a time, which is not trackmux blocking it.
    Waiting on a lock, the GIL, I/O or the network still counts. Where schedstat is
    missing, ``blocked`` is the wall time.
    """

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.blocked: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def call(self, name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        queued = _run_delay()
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        wall = time.perf_counter() - start
        after = _run_delay()
        blocked = wall if queued is None or after is None else wall - (after - queued) / 1e9
        self.wall[name] = max(self.wall.get(name, 0.0), wall)
        self.blocked[name] = max(self.blocked.get(name, 0.0), blocked)
        self.calls[name] = self.calls.get(name, 0) + 1
        return out

    def report(self) -> str:
        return ", ".join(f"{n}: {self.calls[n]} calls, max {self.wall[n] * 1e3:.1f} ms wall / "
                         f"{self.blocked[n] * 1e3:.1f} ms blocked" for n in sorted(self.calls))
