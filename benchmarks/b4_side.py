"""One side of a B4 comparison, in a process of its own: a ceiling or trackmux's sync.

B4 runs every side *at the same time*, each in its own process (no shared GIL), so all
see the same machine: the ceiling and trackmux for one target compete for the CPU on
equal terms. Protocol on stdin/stdout, so that imports and set-up stay outside the
timing: the side prints ``ready`` once its libraries are imported, waits for a line on
stdin, runs, and prints one JSON line ``{"seconds": ...}``.

    python -m benchmarks.b4_side mlflow --uri sqlite:///c.db --points 1000000
    python -m benchmarks.b4_side tensorboard --log-dir tb --points 1000000
    python -m benchmarks.b4_side trackmux --run-dir RUN --backend mlflow \
        --options '{"tracking_uri": "sqlite:///t.db"}'
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import N_METRICS, payload

LIBRARY = {"mlflow": "mlflow.tracking",  # what each side has imported when it says ready
           "tensorboard": "tensorboard.compat.proto.event_pb2"}


def mlflow_ceiling(uri: str, points: int, name: str) -> float:
    """``MlflowClient.log_batch`` of 1000 metrics; the time includes creating the
    experiment and the run, as trackmux's ``open`` does."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    t0 = time.perf_counter()
    client = MlflowClient(uri)
    exp = client.create_experiment(name)
    run_id = client.create_run(exp, run_name=name).info.run_id
    batch: list[Any] = []
    ts = int(time.time() * 1000)
    for step in range(points // N_METRICS):
        for key, value in payload(step).items():
            batch.append(Metric(key, value, ts + step, step))
            if len(batch) == 1000:
                client.log_batch(run_id, metrics=batch)
                batch = []
    if batch:
        client.log_batch(run_id, metrics=batch)
    client.set_terminated(run_id)
    return time.perf_counter() - t0


def tensorboard_ceiling(log_dir: Path, points: int) -> float:
    """tensorboard's ``EventFileWriter`` with one ``Event`` of 100 values per step."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    t0 = time.perf_counter()
    writer = EventFileWriter(str(log_dir), max_queue_size=1000, flush_secs=5)
    now = time.time()
    for step in range(points // N_METRICS):
        values = [Summary.Value(tag=k, simple_value=v) for k, v in payload(step).items()]
        writer.add_event(Event(wall_time=now + step, step=step, summary=Summary(value=values)))
    writer.flush()
    writer.close()
    return time.perf_counter() - t0


def trackmux_sync(run_dir: Path, backend: str, options: dict[str, Any]) -> float:
    """The code behind ``trackmux sync``: every event of the run to ``backend``."""
    from trackmux.core.delivery.sync import deliver_by_name

    t0 = time.perf_counter()
    result = deliver_by_name(run_dir, [backend], {backend: options})
    elapsed = time.perf_counter() - t0
    if not result.complete:
        raise RuntimeError(f"sync to {backend} incomplete: {result.pending} {result.problems}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.b4_side")
    ap.add_argument("kind", choices=["mlflow", "tensorboard", "trackmux"])
    ap.add_argument("--points", type=int, default=0, help="ceilings: points to log")
    ap.add_argument("--uri", default="", help="mlflow tracking URI")
    ap.add_argument("--name", default="ceil", help="mlflow experiment and run name")
    ap.add_argument("--log-dir", default="", help="tensorboard directory")
    ap.add_argument("--run-dir", default="", help="trackmux: the spooled run to sync")
    ap.add_argument("--backend", default="", help="trackmux: the backend to sync to")
    ap.add_argument("--options", default="{}", help="trackmux: backend options, JSON")
    args = ap.parse_args()
    # the libraries are imported before "ready", outside the timing, on both sides
    if args.kind == "trackmux":
        from trackmux.core.backends.registry import get_registry

        get_registry().backend(args.backend)  # loads the entry points
        importlib.import_module(LIBRARY[args.backend])

        def go() -> float:
            return trackmux_sync(Path(args.run_dir), args.backend, json.loads(args.options))
    elif args.kind == "mlflow":
        importlib.import_module(LIBRARY["mlflow"])

        def go() -> float:
            return mlflow_ceiling(args.uri, args.points, args.name)
    else:
        importlib.import_module(LIBRARY["tensorboard"])

        def go() -> float:
            return tensorboard_ceiling(Path(args.log_dir), args.points)
    print("ready", flush=True)
    if not sys.stdin.readline():
        return  # the benchmark went away
    print(json.dumps({"seconds": go()}), flush=True)


if __name__ == "__main__":
    main()
