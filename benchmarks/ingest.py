"""B3 sustained ingest: log() of 100 floats as fast as possible for N seconds, one backend down.

The backend is mlflow pointed at a port where nothing listens, so its delivery worker
keeps failing to open and backs off; everything stays in the spool. Reported:

- accepted points/s: what ``log()`` took from the caller during the N seconds;
- committed points/s: points in the spool divided by the time until the last was
  committed (includes draining what was still queued in memory when the loop stopped);
- RSS: growth of the peak (VmHWM) over the RSS just before the loop.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from pathlib import Path

from benchmarks.common import KEYS, N_METRICS, rss_kb
from trackmux.testing.mlflow_server import free_port


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--profile", default="", help="write a cProfile of the loop here")
    args = ap.parse_args()
    root = Path(args.root)
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    import trackmux

    dead = f"http://127.0.0.1:{free_port()}"
    run = trackmux.init(project="bench", name="b3-ingest", backends=["mlflow"],
                        dir=root / "spool", backend_options={"mlflow": {"tracking_uri": dead}})
    # Values differ per step (as real metrics do), built before the loop so that only
    # log() is measured; 64 distinct dicts are reused round-robin.
    dicts = [{k: (i * N_METRICS + j) * 1e-3 for j, k in enumerate(KEYS)} for i in range(64)]
    for i in range(200):  # warm up: key cache, writer thread
        run.log(dicts[i % 64], step=i)
    run._spool.flush(30)
    # Baseline once mlflow's first open has failed (reported as a problem): delivery has
    # settled into retrying (in thread mode that is also after mlflow's ~100 MB import).
    deadline = time.monotonic() + 120
    while not run.problems() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    base_rss, _ = rss_kb()
    peak_sampled = [base_rss]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.25):
            peak_sampled.append(rss_kb()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    log = run.log
    step = 200
    calls = 0
    t0 = time.perf_counter()
    end = t0 + args.seconds
    clock = time.perf_counter
    while True:
        for _ in range(256):
            log(dicts[step & 63], step=step)
            step += 1
        calls += 256
        if clock() >= end:
            break
    t_loop = clock() - t0
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    run._spool.flush(600)
    t_commit = clock() - t0
    stop.set()
    sampler.join()
    cur_rss, peak_rss = rss_kb()
    committed = run._spool.status.committed
    dropped = run._spool.status.dropped
    summary = run.finish(timeout=2)
    spool_bytes = sum(p.stat().st_size for p in run.dir.glob("spool.db*"))
    result = {"B3": {
        "seconds": t_loop, "calls": calls, "points": calls * N_METRICS,
        "accepted_points_per_s": calls * N_METRICS / t_loop,
        "committed_points_per_s": calls * N_METRICS / t_commit,
        "drain_after_loop_s": t_commit - t_loop,
        "committed_events": committed, "dropped": dropped,
        "rss_before_mb": base_rss / 1024, "rss_peak_mb": max(peak_rss, max(peak_sampled)) / 1024,
        "rss_growth_mb": (max([*peak_sampled, peak_rss]) - base_rss) / 1024,
        "rss_end_mb": cur_rss / 1024, "spool_mb": spool_bytes / 2**20,
        "down_backend": "mlflow (nothing listening)", "pending": summary.pending,
    }}
    Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
