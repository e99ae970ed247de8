"""B4 resync: ``trackmux sync`` of a 1-million-point run against the backend's own bulk API.

The run (10,000 ``log()`` calls of 100 floats) is spooled with no backend. Then, in this
process and alternating target by target, the ceiling (the backend's fastest bulk API
driven directly with the same points) and trackmux's delivery (the code behind
``trackmux sync``, ``core.sync.deliver_by_name``) run against: mlflow with a sqlite store,
mlflow through a real server on 127.0.0.1, and tensorboard event files.

Ceilings: mlflow ``MlflowClient.log_batch`` of 1000 metrics; tensorboard's
``EventFileWriter`` with one ``Event`` per step holding the 100 values. A ceiling may run
on fewer points than the sync (``--ceiling-points``); it is reported as a rate.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

from benchmarks.common import KEYS, N_METRICS, payload
from trackmux.testing.mlflow_server import MlflowServer


def make_run(root: Path, points: int) -> Path:
    import trackmux

    run = trackmux.init(project="bench", name="b4-source", backends=[], dir=root / "spool")
    t0 = time.time()
    for step in range(points // N_METRICS):
        run.log(payload(step), step=step)
    run.finish(timeout=600)
    assert run.dir is not None
    print(f"b4: spooled {points} points in {time.time() - t0:.1f} s", flush=True)
    return run.dir


def mlflow_ceiling(uri: str, points: int, name: str) -> float:
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


def trackmux_sync(run_dir: Path, copy_to: Path, backend: str, options: dict[str, Any]) -> float:
    from trackmux.core.sync import deliver_by_name

    shutil.copytree(run_dir, copy_to)  # each target gets a fresh cursor
    for lock in copy_to.glob("*.lock"):
        lock.unlink()
    t0 = time.perf_counter()
    result = deliver_by_name(copy_to, [backend], {backend: options})
    elapsed = time.perf_counter() - t0
    if not result.complete:
        raise RuntimeError(f"sync to {backend} incomplete: {result.pending} {result.problems}")
    return elapsed


def profile_sync(run_dir: Path, copy_to: Path, backend: str, options: dict[str, Any]
                 ) -> list[str]:
    """cProfile of a second sync of the same run (to a fresh remote run): top functions by
    cumulative time, as text lines."""
    import cProfile
    import io
    import pstats

    if backend == "mlflow":  # another experiment: the first sync's run would be resumed
        options = {**options, "experiment_name": "bench-profile"}
    from trackmux.core.delivery import DeliveryWorker

    # cProfile sees only its own thread: run the delivery worker's loop on this thread.
    start, join = DeliveryWorker.start, DeliveryWorker.join
    DeliveryWorker.start = lambda self: self._main()  # type: ignore[method-assign]
    DeliveryWorker.join = lambda self, timeout: True  # type: ignore[method-assign]
    prof = cProfile.Profile()
    prof.enable()
    try:
        trackmux_sync(run_dir, copy_to, backend, options)
    finally:
        prof.disable()
        DeliveryWorker.start, DeliveryWorker.join = start, join  # type: ignore[method-assign]
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(25)
    return [line for line in buf.getvalue().splitlines() if line.strip()][-27:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--ceiling-points", type=int, default=0, help="default: --points")
    ap.add_argument("--mlflow-points", type=int, default=0,
                    help="a smaller run for mlflow (its store takes ~5-15k points/s; "
                         "default: --points)")
    args = ap.parse_args()
    root = Path(args.root) / "b4"
    root.mkdir(parents=True, exist_ok=True)
    points = args.points
    ceil_points = args.ceiling_points or points
    ml_points = min(args.mlflow_points or points, points)
    ml_ceil = min(ceil_points, ml_points)
    assert len(KEYS) == N_METRICS
    server = MlflowServer(root / "mlflow-server")
    server.start()
    out: dict[str, Any] = {"points": points, "ceiling_points": ceil_points}
    try:
        run_dir = make_run(root / "full", points)
        ml_dir = run_dir if ml_points == points else make_run(root / "small", ml_points)
        targets = [
            ("mlflow_sqlite", "mlflow", ml_dir, ml_points, ml_ceil,
             lambda: mlflow_ceiling(f"sqlite:///{root / 'ceiling.db'}", ml_ceil, "ceil"),
             {"tracking_uri": f"sqlite:///{root / 'trackmux.db'}"}),
            ("mlflow_http", "mlflow", ml_dir, ml_points, ml_ceil,
             lambda: mlflow_ceiling(server.url, ml_ceil, "ceil"),
             {"tracking_uri": server.url}),
            ("tensorboard", "tensorboard", run_dir, points, ceil_points,
             lambda: tensorboard_ceiling(root / "tb-ceiling", ceil_points),
             {"log_dir": str(root / "tb-trackmux")}),
        ]
        from mlflow import MlflowClient

        for uri in (f"sqlite:///{root / 'ceiling.db'}", f"sqlite:///{root / 'trackmux.db'}"):
            MlflowClient(uri).search_experiments()  # create the schema outside the timings
        for label, backend, src, n, n_ceil, ceiling, options in targets:
            c = ceiling()
            t = trackmux_sync(src, root / f"copy-{label}", backend, options)
            c_rate, t_rate = n_ceil / c, n / t
            out[label] = {"points": n, "ceiling_points": n_ceil, "ceiling_s": c,
                          "trackmux_s": t, "ceiling_points_per_s": c_rate,
                          "trackmux_points_per_s": t_rate, "fraction_of_ceiling": t_rate / c_rate}
            print(f"b4: {label}: ceiling {c_rate:,.0f} pts/s, trackmux {t_rate:,.0f} pts/s",
                  flush=True)
            if t_rate < 0.8 * c_rate:  # target missed: where does trackmux's side spend it?
                out[label]["profile"] = profile_sync(src, root / f"prof-{label}", backend,
                                                     options)
    finally:
        server.stop()
    Path(args.out).write_text(json.dumps({"B4": out}, indent=1))


if __name__ == "__main__":
    main()
