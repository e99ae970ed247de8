"""Per-node system metrics of attached workers, without Ray: node names, the one-sampler
election by a node-local lock, hand-over, and samples through a handle's batched path
(fake NVML, so GPU keys show; untested on real GPUs)."""

from __future__ import annotations

import itertools
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from trackmux.attached import nodes
from trackmux.attached.handle import AttachedRun
from trackmux.attached.nodes import NodePlan, NodeSampling, assign_name, short_host
from trackmux.attached.sink import SinkCore
from trackmux.core.events import Event, MetricsEvent
from trackmux.core.lifecycle import system_metrics

psutil = pytest.importorskip("psutil")
sys.path.insert(0, str(Path(__file__).parent))
from test_system_metrics import FakeNvml  # noqa: E402


def _plan(run_id: str = "run-a", node_id: str = "f" * 56, interval: float = 0.1) -> NodePlan:
    return NodePlan(run_id, node_id, "gpuhost", interval)


def test_node_names_are_key_safe_unique_and_stable() -> None:
    assert short_host("ip-10-0-0-7.ec2.internal") == "ip-10-0-0-7"
    assert short_host("weird host!") == "weird_host"
    assert short_host("...") == "node"
    names: dict[str, str] = {}
    assert assign_name(names, "a" * 56, "head.cluster") == "head"  # the driver's, reserved
    assert assign_name(names, "b" * 56, "head") == "head-bbbbbbbb"  # same hostname
    assert assign_name(names, "c" * 56, "gpu-1") == "gpu-1"
    assert assign_name(names, "b" * 56, "other") == "head-bbbbbbbb"  # stable for the run


def test_sink_tells_the_interval_and_names_nodes() -> None:
    sink = SinkCore("r1", "p", 0.5, system_metrics=2.0, driver_node="n0", driver_host="h")
    info = sink.info()
    assert info["system_metrics"] == 2.0 and info["driver_node"] == "n0"
    assert sink.node_name("n1xxxxxxxx", "h") == "h-n1xxxxxx"
    assert sink.node_name("n2", "other.example.org") == "other"
    assert SinkCore("r2", "p", 0.5).info()["system_metrics"] is None


class _FakeSampler:
    def __init__(self, emit: Any, plan: NodePlan) -> None:
        self.thread = type("T", (), {"is_alive": staticmethod(lambda: True)})()
        self.started = self.stopped = False

    def start(self) -> None:
        self.started = True

    def stop(self, timeout: float = 1.0) -> None:
        self.stopped = True


def test_one_sampler_per_run_and_node_and_hand_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nodes, "RETRY_MIN", 0.0)
    plan = _plan(run_id=f"elect-{time.time_ns()}")
    a = NodeSampling(plan, lambda d: None, sampler_factory=_FakeSampler)
    b = NodeSampling(plan, lambda d: None, sampler_factory=_FakeSampler)
    other_node = NodeSampling(_plan(plan.run_id, "e" * 56), lambda d: None,
                              sampler_factory=_FakeSampler)
    other_run = NodeSampling(_plan(plan.run_id + "x"), lambda d: None,
                             sampler_factory=_FakeSampler)
    for s in (a, b, other_node, other_run):
        s.tick()
    assert a.sampling and not b.sampling  # one per (run, node)
    assert other_node.sampling and other_run.sampling
    a.stop()  # the sampler's handle closes: the lock is free again
    assert not a.sampling
    time.sleep(0.11)
    b.tick()
    assert b.sampling
    for s in (b, other_node, other_run):
        s.stop()


def test_a_killed_sampler_process_hands_the_node_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nodes, "RETRY_MIN", 0.0)
    plan = _plan(run_id=f"killed-{time.time_ns()}")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from trackmux.attached.nodes import _node_lock, lock_path\n"
         f"lock = _node_lock(lock_path({plan.run_id!r}, {plan.node_id!r}))\n"
         "lock.acquire(timeout=0)\n"
         "print('held', flush=True)\n"
         "time.sleep(60)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        mine = NodeSampling(plan, lambda d: None, sampler_factory=_FakeSampler)
        mine.tick()
        assert not mine.sampling  # the other process samples this node
        holder.kill()  # SIGKILL: no cleanup runs; the kernel drops the lock
        holder.wait(10)
        time.sleep(0.11)
        mine.tick()
        assert mine.sampling
        mine.stop()
    finally:
        holder.kill()
        holder.wait(10)


class _Transport:
    """A sink in memory that says: sample this node every 0.1 s."""

    heartbeat = False

    def __init__(self, plan: NodePlan | None) -> None:
        self.plan = plan
        self.events: list[Event] = []
        self.plan_asked = threading.Event()  # the handle asks once, from its flusher

    def connect(self) -> bool:
        return True

    def node_plan(self) -> NodePlan | None:
        self.plan_asked.set()
        return self.plan

    def push(self, batch: int, events: list[Event], dropped: int, flushed_at: float,
             inputs: list[Any] | None = None) -> str:
        self.events.extend(events)
        return "ok"

    def describe(self) -> str:
        return "memory"


def _samples(transport: _Transport) -> list[MetricsEvent]:
    return [e for e in list(transport.events) if isinstance(e, MetricsEvent)
            and "system/gpuhost/cpu/percent" in e.data]


def test_samples_travel_through_the_handle_with_wall_time_and_gpu_keys(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(system_metrics, "load_nvml", lambda: FakeNvml(2))
    transport = _Transport(_plan(run_id=f"path-{time.time_ns()}"))
    handle = AttachedRun(transport, run_id=None, role="rollout0", flush_interval=0.05)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not handle.sampling:
            time.sleep(0.02)
        assert handle.sampling
        start = time.time()
        for step in range(200):
            handle.log({"x": float(step)}, step=step)
            time.sleep(0.003)  # paces the loop; the samples are waited for below
        # three samples have reached the transport (on a loaded machine the sampler may
        # have taken fewer in the loop's 0.6 s)
        deadline = time.monotonic() + 60
        while len(_samples(transport)) < 3 and time.monotonic() < deadline:
            handle.flush(5)
            time.sleep(0.02)
        handle.flush(5)
    finally:
        handle.close(5)
    assert not handle.sampling  # close hands the node over
    samples = _samples(transport)
    assert len(samples) >= 3
    keys = set().union(*(e.data for e in samples))
    assert {"system/gpuhost/gpu0/util_percent", "system/gpuhost/gpu1/memory_used_gb",
            "system/gpuhost/memory/percent"} <= keys
    assert not any(k.startswith("rollout0/") for k in keys)  # no role prefix
    assert "system/gpuhost/process/rss_gb" not in keys  # a node's, not a process's
    times = [e.time for e in samples]
    assert times == sorted(times) and times[-1] >= start
    assert all(b - a > 0.05 for a, b in itertools.pairwise(times))  # one sampler
    assert any(e.data.get("rollout0/x") == 199.0 for e in transport.events
               if isinstance(e, MetricsEvent))


def test_no_plan_no_sampler_and_a_broken_psutil_never_reaches_the_worker(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    nothing = _Transport(None)
    quiet = AttachedRun(nothing, run_id=None, role=None, flush_interval=0.05)
    # asked once and told None: from here on the handle never samples (by construction)
    assert nothing.plan_asked.wait(60)
    assert not quiet.sampling
    quiet.close(2)

    def no_psutil() -> Any:
        raise ValueError("system_metrics needs psutil: pip install psutil")

    monkeypatch.setattr(system_metrics, "load_psutil", no_psutil)
    monkeypatch.setattr(nodes, "_warned", set())
    transport = _Transport(_plan(run_id=f"broken-{time.time_ns()}"))
    with caplog.at_level(logging.WARNING, logger="trackmux"):
        handle = AttachedRun(transport, run_id=None, role=None, flush_interval=0.05)
        for step in range(50):
            handle.log({"x": 1.0}, step=step)
            time.sleep(0.005)  # paces the loop
        # the flusher's node tick met the broken psutil (on a loaded machine it may come
        # after the loop): wait for its warning before close, which stops the ticks
        deadline = time.monotonic() + 60
        while not _warned_psutil(caplog) and time.monotonic() < deadline:
            time.sleep(0.02)
        handle.close(5)
    assert not handle.sampling
    assert sum(isinstance(e, MetricsEvent) for e in transport.events) == 50
    assert _warned_psutil(caplog)


def _warned_psutil(caplog: pytest.LogCaptureFixture) -> bool:
    return any("not sampled by this process" in r.getMessage() and "psutil" in
               r.getMessage() for r in list(caplog.records))
