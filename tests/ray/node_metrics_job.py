"""A Ray job on a 3-node local cluster (``ray.cluster_utils.Cluster``: one machine, three
Ray nodes, the same hostname): run by test_ray_node_metrics.py in a child process,
because a process can join only one Ray cluster and the other tests use
``ray.init(num_cpus=2)``. Prints one JSON line with what it saw.

Nodes: ``head`` (the driver and its sink), ``a`` (two workers), ``b`` (one worker). The
driver samples every 0.2 s. Phases: all log; the sampling worker on ``a`` is killed (the
other takes over); the worker on ``b`` closes (nobody samples ``b`` any more).
"""

from __future__ import annotations

import json
import socket
import statistics
import sys
import time
from typing import Any

from ray.cluster_utils import Cluster

import ray
import trackmux
from trackmux.attached.nodes import short_host
from trackmux.core.events import MetricsEvent
from trackmux.core.spool.reader import SpoolReader

INTERVAL = 0.2


@ray.remote(num_cpus=0)
class Worker:
    def __init__(self, role: str) -> None:
        self.handle = trackmux.attach(role=role)

    def node(self) -> str:
        return str(ray.get_runtime_context().get_node_id())

    def sampling(self) -> bool:
        return self.handle.sampling

    def work(self, seconds: float) -> list[float]:
        costs = []
        end = time.monotonic() + seconds
        step = 0
        while time.monotonic() < end:
            start = time.perf_counter_ns()
            self.handle.log({"loss": 1.0 / (step + 1), "reward": float(step)}, step=step)
            costs.append((time.perf_counter_ns() - start) / 1000)
            step += 1
            time.sleep(0.001)
        return costs

    def close(self) -> float:
        self.handle.close(10)
        return time.time()


def main(out_dir: str) -> dict[str, Any]:
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"head": 100}, "include_dashboard": False})
    cluster.add_node(num_cpus=1, resources={"a": 100})
    cluster.add_node(num_cpus=1, resources={"b": 100})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address)
    try:
        return job(out_dir)
    finally:
        ray.shutdown()
        cluster.shutdown()


def _until(check: Any, what: str, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {timeout} s")
        time.sleep(0.1)


def _count(run_dir: Any, key: str) -> int:
    reader = SpoolReader(run_dir)
    try:
        return sum(1 for e in reader.iter_events()
                   if isinstance(e, MetricsEvent) and key in e.data)
    finally:
        reader.close()


def job(out_dir: str) -> dict[str, Any]:
    run = trackmux.init(project="nodes", backends=[], dir=out_dir, system_metrics=INTERVAL)
    assert isinstance(run, trackmux.Run)
    where = {"a1": "a", "a2": "a", "b1": "b", "h1": "head"}
    workers = {name: Worker.options(resources={node: 1}).remote(name)
               for name, node in where.items()}
    node_ids = ray.get([w.node.remote() for w in workers.values()])
    node_of = dict(zip(workers, node_ids, strict=True))
    costs = ray.get([w.work.remote(2.5) for w in workers.values()])

    def sampling(*names: str) -> list[bool]:
        return list(ray.get([workers[n].sampling.remote() for n in names]))

    # b's worker and one of a's took their node's sampler (waited for: on a loaded machine
    # 2.5 s of work did not always cover a flusher's plan, lock and first tick)
    _until(lambda: sampling("b1")[0] and any(sampling("a1", "a2")),
           "a sampler on nodes a and b")
    flags1 = dict(zip(workers, sampling(*workers), strict=True))
    # hand-over: kill the sampler of node a; the other worker there takes over
    victim = next(n for n in ("a1", "a2") if flags1[n])
    heir = "a2" if victim == "a1" else "a1"
    # once its samples reached the run: taking the sampler is not yet having sent one (a
    # loaded machine killed it before its first flush, and node a had no "before")
    name_a = f"system/{short_host(socket.gethostname())}-{node_of[victim][:8]}/cpu/percent"
    _until(lambda: _count(run.dir, name_a) > 0, "node a's samples in the run")
    killed_at = time.time()
    ray.kill(workers[victim], no_restart=True)
    ray.get(workers[heir].work.remote(3.0))
    # the heir takes over within a retry (1 s) and a tick; waited for, then read
    _until(lambda: sampling(heir)[0], "the heir to take node a over")
    heir_sampling = sampling(heir)[0]
    # the only worker of node b closes: nobody samples b any more
    closed_at = ray.get(workers["b1"].close.remote())
    ray.get(workers[heir].work.remote(1.5))
    summary = run.finish(timeout=30)
    reader = SpoolReader(run.dir)
    samples: dict[str, list[float]] = {}
    keys: set[str] = set()
    for event in reader.iter_events():
        if isinstance(event, MetricsEvent):
            for key in event.data:
                keys.add(key)
                parts = key.split("/")
                if key.startswith("system/") and parts[-2:] == ["cpu", "percent"]:
                    samples.setdefault("/".join(parts[1:-2]) or "<driver>", []).append(
                        event.time)
    reader.close()
    all_costs = [c for series in costs for c in series]
    return {
        "driver_node": ray.get_runtime_context().get_node_id(), "node_of": node_of,
        "flags": flags1, "victim": victim, "heir": heir, "killed_at": killed_at,
        "heir_sampling": heir_sampling, "closed_at": closed_at,
        "samples": {k: sorted(v) for k, v in samples.items()},
        "keys": sorted(k for k in keys if k.startswith("system/")),
        "log_us": {"calls": len(all_costs), "median": statistics.median(all_costs),
                   "p99": sorted(all_costs)[int(0.99 * len(all_costs))]},
        "status": summary.status,
    }


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(sys.argv[1])), flush=True)
