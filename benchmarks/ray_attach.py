"""B8: Ray workers attached to the driver's run (``trackmux.attach``), on a local cluster.

    python -m benchmarks.ray_attach                    # 4 and 16 workers
    python -m benchmarks.ray_attach --workers 4 --steps 2000 --json out.json

Per worker count: every worker (a Ray actor, ``num_cpus=0``) attaches with a role and logs
``--steps`` steps of ``--metrics`` floats as fast as it can, timing each ``log()`` call.
Reported: worker ``log()`` latency (median, p99 over all calls of all workers), sink
throughput end to end (points from the first ``log()`` until the driver's spool has
committed every event, in points/s), and the driver process's memory (peak RSS over the
run, and its growth over the RSS before the workers started). The run has no backend
(spool only), so the figures are trackmux's own path, not a backend's. Needs
``trackmux[ray]``; the cluster is ``ray.init(num_cpus=2)`` like the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import stats


def _rss_kb() -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _worker_class(ray: Any) -> Any:
    @ray.remote(num_cpus=0)
    class Worker:
        def ready(self) -> bool:
            import trackmux  # noqa: F401 - imported before timing starts

            return True

        def work(self, role: str, steps: int, metrics: int) -> dict[str, Any]:
            import trackmux

            run = trackmux.attach(role=role)
            keys = [f"m{j}" for j in range(metrics)]
            timings: list[int] = []
            clock = time.perf_counter_ns
            started = time.time()
            for step in range(steps):
                data = {k: step + 0.5 for k in keys}
                t0 = clock()
                run.log(data, step=step)
                timings.append(clock() - t0)
            return {"timings": timings, "started": started, "dropped": run.dropped}

    return Worker


def measure(ray: Any, workers: int, steps: int, metrics: int, root: Path) -> dict[str, Any]:
    import trackmux

    run = trackmux.init(f"b8-{workers}", backends=[], dir=root / "spool")
    assert isinstance(run, trackmux.Run)
    actors = [_worker_class(ray).remote() for _ in range(workers)]
    ray.get([a.ready.remote() for a in actors])
    base_kb = _rss_kb()
    peak = [base_kb]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss_kb())
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    total_events = workers * steps
    results = ray.get([a.work.remote(f"w{i}", steps, metrics) for i, a in enumerate(actors)])
    spool = run._spool
    while spool.status.committed < total_events:
        time.sleep(0.01)
    committed_at = time.time()
    done.set()
    sampler.join()
    first = min(r["started"] for r in results)
    timings = [t for r in results for t in r["timings"]]
    finish_started = time.monotonic()
    summary = run.finish()
    for actor in actors:
        ray.kill(actor)
    return {
        "workers": workers, "steps": steps, "metrics": metrics,
        "log": stats(timings),
        "points": total_events * metrics,
        "seconds": committed_at - first,
        "points_per_s": total_events * metrics / (committed_at - first),
        "driver_rss_mb": {"before": base_kb / 1024, "peak": peak[0] / 1024,
                          "growth": (peak[0] - base_kb) / 1024},
        "dropped": sum(r["dropped"] for r in results) + summary.dropped,
        "finish_s": time.monotonic() - finish_started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="4,16")
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--metrics", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    out = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for count in (int(w) for w in args.workers.split(",")):
                res = measure(ray, count, args.steps, args.metrics, Path(tmp))
                out.append(res)
                log = res["log"]
                print(f"B8 workers={count:>2}: log() median {log['median_us']:.1f} us, "
                      f"p99 {log['p99_us']:.1f} us; sink {res['points_per_s']:,.0f} points/s "
                      f"({res['points']:,} points in {res['seconds']:.2f} s); driver RSS "
                      f"peak {res['driver_rss_mb']['peak']:.0f} MB (+"
                      f"{res['driver_rss_mb']['growth']:.0f} MB); dropped {res['dropped']}; "
                      f"finish {res['finish_s']:.2f} s", flush=True)
    finally:
        ray.shutdown()
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
