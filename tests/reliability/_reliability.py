"""Helpers of the reliability suite (module name unique: tests/integration has _support)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

import trackmux

SRC = Path(trackmux.__file__).resolve().parents[1]


def child_env(**extra: str) -> dict[str, str]:
    """Environment for child processes: this trackmux on the path, no rank, no backends."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "TRACKMUX_BACKENDS", "TRACKMUX_DIR")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def spawn(code: str, *args: str, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=child_env(**env))


def trackmux_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the real ``trackmux`` command (``python -m trackmux``) in a child process."""
    return subprocess.run([sys.executable, "-m", "trackmux", *args], capture_output=True,
                          text=True, env=child_env(**env), timeout=120)


def file_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines a file backend wrote (empty when the file does not exist)."""
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def wait_delivered(run: Any, backends: list[str], timeout: float = 120.0) -> None:
    """Wait until each of ``backends`` acknowledged every event logged so far (a run whose
    other backends are stuck cannot use finish() for this: it waits for those to its
    deadline, and a short deadline on a loaded machine cut the healthy ones short too)."""
    import time

    assert run.flush(timeout), "the spool did not commit what was logged"
    deadline = time.monotonic() + timeout
    while True:
        progress = run.delivery()
        behind = {n: progress[n] for n in backends if progress[n][0] < progress[n][1]}
        if not behind:
            return
        assert time.monotonic() < deadline, f"not delivered in {timeout} s: {behind}"
        time.sleep(0.05)
