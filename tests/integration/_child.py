"""A training process for the integration tests, started with ``python _child.py MODE ...``.

Modes:

``log-to-mlflow URL ROOT RESULT PACE FINISH_TIMEOUT WAIT_DELIVERY``: a run with the
``mlflow`` backend logging ``wide_metrics(step)`` every PACE seconds until the file
``ROOT/stop`` appears; then, if WAIT_DELIVERY > 0, waiting up to that many seconds for live
delivery to catch up by itself; then ``finish(timeout=FINISH_TIMEOUT)``. Timings and the
finish summary go to RESULT as JSON.

``log-until-killed ROOT RECORD``: a run with the ``file`` backend logging steps as fast as
it can (a little work between steps), appending ``"<step> <monotonic time>"`` to RECORD
with ``os.write`` right after each ``log()`` returns. The page cache keeps those lines
when the process is SIGKILLed, so the parent knows which calls had returned, and when.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from _support import CallTimer

import trackmux


def metrics(step: int) -> dict[str, float]:
    """The values logged at ``step`` (the tests recompute them to check the spool)."""
    return {"loss": 1.0 / (step + 1), "reward/mean": step * 0.5, "lr": 1e-4 * (step % 7)}


def wide_metrics(step: int) -> dict[str, float]:
    return {f"m/{j:02d}": step + j / 100 for j in range(20)}


def log_to_mlflow(url: str, root: str, result: str, pace: str, finish_timeout: str,
                  wait_delivery: str) -> None:
    run = trackmux.init(project="faults", name="live", backends=["mlflow"], dir=root,
                        backend_options={"mlflow": {"tracking_uri": url}})
    assert isinstance(run, trackmux.Run)
    out: dict[str, object] = {"run_dir": str(run.dir)}
    Path(result).write_text(json.dumps(out))
    timer = CallTimer()
    stop = Path(root) / "stop"
    step = 0
    while not stop.exists():
        timer.call("log", run.log, wide_metrics(step), step=step)
        step += 1
        time.sleep(float(pace))
    out["steps"] = step
    out["logged_until"] = time.monotonic()
    if float(wait_delivery) > 0:
        deadline = time.monotonic() + float(wait_delivery)
        while time.monotonic() < deadline:
            acked, last = run.delivery()["mlflow"]
            if last >= step and acked >= last:
                break
            time.sleep(0.2)
        out["caught_up_after"] = time.monotonic() - out["logged_until"]  # type: ignore[operator]
        out["delivery_before_finish"] = run.delivery()["mlflow"]
    start = time.monotonic()
    summary = run.finish(timeout=float(finish_timeout))
    out.update(finish_seconds=time.monotonic() - start, pending=summary.pending,
               events=summary.events, blocked=timer.blocked, wall=timer.wall,
               calls=timer.calls)
    Path(result).write_text(json.dumps(out))


def log_until_killed(root: str, record: str) -> None:
    run = trackmux.init(project="crash", name="killed", backends=["file"], dir=root,
                        backend_options={"file": {"path": os.path.join(root, "file.jsonl")}})
    fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(fd, f"ready {run.dir}\n".encode())
    step = 0
    while True:
        run.log(metrics(step), step=step)
        done = time.monotonic()
        os.write(fd, f"{step} {done:.6f}\n".encode())
        if step % 50 == 0:
            run.log_table("samples", ["prompt", "reward"], [[f"p{step}", step * 0.5]],
                          step=step)
        step += 1
        time.sleep(0.0005)


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "log-until-killed":
        log_until_killed(*args)
    elif mode == "log-to-mlflow":
        log_to_mlflow(*args)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
