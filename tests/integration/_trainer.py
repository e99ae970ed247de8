"""A trainer for the delivery-process tests: ``python _trainer.py ROOT MLFLOW_DB STEPS END``.

It logs STEPS steps of ``metrics(step)`` (plus a table every 10 steps) to the file backend
and mlflow (SQLite store) with ``durability="strict"``, so every ``log()`` that returned is
committed, prints ``LOGGED <run dir> <delivery pid>`` and then ends as END says:

- ``finish``: ``run.finish()``;
- ``exit``: returns from the script without calling ``finish()`` (atexit does it);
- ``os-exit``: ``os._exit(3)``, no atexit at all;
- ``wait``: sleeps until killed (the test sends SIGKILL or SIGINT);
- ``fork``: forks a child that logs and exits, then finishes.

Extra environment: ``TRAINER_DELIVERY`` (process/thread), ``TRAINER_PACE`` (seconds
between steps), ``TRAINER_BACKENDS`` (default ``file,mlflow``), ``TRAINER_ORPHAN``.
"""

from __future__ import annotations

import os
import sys
import time

import trackmux


def metrics(step: int) -> dict[str, float]:
    return {"loss": 1.0 / (step + 1), "reward/mean": step * 0.25, "kl": step * 1e-3}


def main(root: str, mlflow_db: str, steps: str, end: str) -> None:
    run = trackmux.init(
        project="delivery", name="trainer", dir=root,
        backends=os.environ.get("TRAINER_BACKENDS", "file,mlflow").split(","),
        durability="strict", delivery=os.environ.get("TRAINER_DELIVERY", "process"),
        orphan_timeout=float(os.environ.get("TRAINER_ORPHAN", "120")),
        backend_options={name: options for name, options in {
            "file": {"path": os.path.join(root, "out.jsonl")},
            "mlflow": {"tracking_uri": f"sqlite:///{mlflow_db}"}}.items()
            if name in os.environ.get("TRAINER_BACKENDS", "file,mlflow")})
    assert isinstance(run, trackmux.Run)
    pace = float(os.environ.get("TRAINER_PACE", "0"))
    for step in range(int(steps)):
        run.log(metrics(step), step=step)
        if step % 10 == 0:
            run.log_table("samples", ["prompt", "reward"], [[f"p{step}", step * 0.5]],
                          step=step)
        if pace:
            time.sleep(pace)
    print(f"LOGGED {run.dir} {run.delivery_pid}", flush=True)
    if end == "finish":
        summary = run.finish(timeout=float(os.environ.get("TRAINER_FINISH_TIMEOUT", "120")))
        print(f"FINISHED pending={summary.pending}", flush=True)
    elif end == "os-exit":
        os._exit(3)
    elif end == "wait":
        while True:
            time.sleep(1)
    elif end == "fork":
        pid = os.fork()
        if pid == 0:  # the forked child's calls are ignored with one warning
            run.log({"loss": -1.0}, step=10_000)
            os._exit(0)
        os.waitpid(pid, 0)
        run.log(metrics(int(steps)), step=int(steps))
        summary = run.finish(timeout=120)
        print(f"FINISHED pending={summary.pending}", flush=True)
    # "exit": fall off the end; atexit finishes the run


if __name__ == "__main__":
    main(*sys.argv[1:])
