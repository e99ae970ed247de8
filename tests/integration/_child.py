"""A training process for the integration tests, started with ``python _child.py MODE ...``.

Modes:

``log-until-killed ROOT RECORD``: a run with the ``file`` backend logging steps as fast as
it can (a little work between steps), appending ``"<step> <monotonic time>"`` to RECORD
with ``os.write`` right after each ``log()`` returns. The page cache keeps those lines
when the process is SIGKILLed, so the parent knows which calls had returned, and when.
"""

from __future__ import annotations

import os
import sys
import time

import trackmux


def metrics(step: int) -> dict[str, float]:
    """The values logged at ``step`` (the tests recompute them to check the spool)."""
    return {"loss": 1.0 / (step + 1), "reward/mean": step * 0.5, "lr": 1e-4 * (step % 7)}


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
    else:
        raise SystemExit(f"unknown mode {mode!r}")
