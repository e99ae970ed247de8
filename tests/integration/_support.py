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

from trackmux.core.spool import SpoolReader

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

    def all_history(self, run_id: str) -> dict[str, list[tuple[int, float]]]:
        run = self.client.get_run(run_id)
        return {key: [(s, v) for s, v, _ in self.history(run_id, key)]
                for key in run.data.metrics}


def wait_until(predicate: Any, timeout: float, interval: float = 0.2) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds pass (bounded, never forever)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
