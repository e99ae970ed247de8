"""trackmux.attach without Ray: in the run's own process, the sink's bookkeeping, bounded
worker buffers, and the clear error in a process that has nothing to attach to."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import trackmux
from trackmux.attached import wire
from trackmux.attached.handle import AttachedRun
from trackmux.attached.sink import SinkCore
from trackmux.core.events import (
    ConfigEvent,
    HistogramEvent,
    ImageEvent,
    MetricsEvent,
    TableEvent,
    TextEvent,
)
from trackmux.core.spool.reader import SpoolReader


def test_attach_in_the_run_process_prefixes_role_and_keeps_its_own_steps(
        memory_backend: Any, tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    run.log({"loss": 1.0}, step=100)
    rollout = trackmux.attach(role="rollout")
    assert trackmux.attach(role="rollout") is rollout
    rollout.log({"gen_s": 0.5})          # step 0: its own steps, not the driver's 100
    rollout.log({"gen_s": 0.6, "n": {"tokens": 7}})
    rollout.log_table("samples", ["p", "r"], [["a", 1.0]], step=3)
    rollout.log_text("note", "hi")
    run.finish()
    got = memory_backend[run.id]
    assert got.metrics()["rollout/gen_s"] == [(0, 0.5), (1, 0.6)]
    assert got.metrics()["rollout/n/tokens"] == [(1, 7)]
    assert got.metrics()["loss"] == [(100, 1.0)]
    assert [(t.key, t.step) for t in got.of_kind("table")] == [("rollout/samples", 3)]
    assert [(t.key, t.step) for t in got.of_kind("text")] == [("rollout/note", 1)]


def test_calls_after_finish_are_no_ops_with_one_warning(
        memory_backend: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    handle = trackmux.attach(role="w")
    handle.log({"a": 1.0})
    run.finish()
    with caplog.at_level(logging.WARNING, logger="trackmux"):
        for _ in range(3):
            handle.log({"a": 2.0})
            handle.flush(2)
        assert handle.gone
        # the thread that finds the sink gone sets ``gone`` first and warns right after
        deadline = time.monotonic() + 30
        while not any("do nothing" in r.getMessage() for r in caplog.records) and \
                time.monotonic() < deadline:
            time.sleep(0.01)
        handle.log({"a": 3.0})
        handle.flush(2)
    assert sum("do nothing" in r.getMessage() for r in caplog.records) == 1
    assert memory_backend[run.id].metrics()["w/a"] == [(0, 1.0)]


def test_wire_round_trip_keeps_every_kind_step_and_time() -> None:
    events = [MetricsEvent({"a": 1.0, "b": 2}, 3, 1.5),
              ConfigEvent({"lr": 0.1}, 0, 2.0),
              TableEvent("t", ("x", "y"), (("a", 1.0), (None, True)), 4, 2.5),
              ImageEvent("i", b"\x89PNG", 2, 1, "RGB", 5, 3.0, "cap"),
              TextEvent("x", "hello", 6, 3.5)]
    assert wire.decode(wire.encode(events)) == events
    with pytest.raises(ValueError, match="unknown event kind"):
        wire.decode([("FutureEvent", ())])


def test_sink_ignores_a_resent_batch_and_answers_full_when_its_queue_is_full() -> None:
    sink = SinkCore("r", "p", flush_interval=0.5, max_queued=3)
    batch = wire.encode([MetricsEvent({"a": 1.0}, 0, 1.0), MetricsEvent({"a": 2.0}, 1, 1.0)])
    assert sink.push("w1", 1, batch, 0, 10.0) == "ok"
    assert sink.push("w1", 1, batch, 0, 10.0) == "ok"  # a resend after a timeout
    assert sink.push("w2", 1, batch, 5, 10.0) == "full"  # 2 + 2 > 3: kept by the worker
    batches, dropped, inputs = sink.drain(0)
    assert [n for n, _ in batches] == [1] and dropped == 5 and inputs == {}
    assert sink.drain(1)[0] == []  # acknowledged batches are forgotten
    assert sink.push("w2", 1, batch, 5, 10.0) == "ok"
    assert sink.waiting_for(11.0) == ["w1", "w2"]
    assert sink.waiting_for(9.0) == []
    sink.close()
    assert sink.push("w1", 2, batch, 0, 12.0) == "closed"


class _FullSink:
    """A transport whose sink never takes a batch (backpressure for ever)."""

    heartbeat = False

    def __init__(self) -> None:
        self.calls = 0

    def connect(self) -> bool:
        return True

    def push(self, batch: int, events: list[Any], dropped: int, flushed_at: float,
             inputs: list[Any] | None = None) -> str:
        self.calls += 1
        return "full"

    def describe(self) -> str:
        return "a full sink"


def test_a_sink_that_falls_behind_bounds_the_worker_buffer_and_counts_drops(
        caplog: pytest.LogCaptureFixture) -> None:
    transport = _FullSink()
    handle = AttachedRun(transport, run_id=None, role="w", flush_interval=0.05,
                         max_buffered=100)
    # The flusher keeps trying meanwhile (takes a batch out, is told "full", puts it
    # back): a batch out of the queue still counts against the bound.
    with caplog.at_level(logging.ERROR, logger="trackmux"):
        for step in range(250):
            handle.log({"a": float(step)}, step=step)
    assert handle.dropped == 150
    assert sum("buffer is full" in r.getMessage() for r in caplog.records) == 1
    handle._stop.set()
    handle._wake.set()
    handle._thread.join(10)
    assert not handle._thread.is_alive()
    assert len(handle._queue) == 100
    tried = transport.calls
    assert not handle.flush(0.3)
    assert transport.calls > tried  # the sink was asked and said full
    assert [e.step for e in handle._queue] == list(range(100))  # order kept, nothing lost


class _HeldSink:
    """A transport whose first batch is held (the sink busy) until the test releases
    it, then refused ("full"); later batches are taken and recorded in order."""

    heartbeat = False

    def __init__(self) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()
        self.reachable = threading.Event()  # no batch can leave before the test says so
        self.taken: list[int] = []
        self._first = True

    def connect(self) -> bool:
        return self.reachable.is_set()

    def push(self, batch: int, events: list[Any], dropped: int, flushed_at: float,
             inputs: list[Any] | None = None) -> str:
        if events and self._first:
            self._first = False
            self.holding.set()
            assert self.release.wait(30), "the test never released the held batch"
            return "full"
        self.taken.extend(e.step for e in events)
        return "ok"

    def describe(self) -> str:
        return "a held sink"


def _hold_a_batch(max_buffered: int = 100_000) -> tuple[AttachedRun, _HeldSink]:
    """A handle whose flusher holds steps 0-9 out of its queue, in a push the sink has
    not answered (it waits for ``sink.release``)."""
    sink = _HeldSink()
    handle = AttachedRun(sink, run_id=None, role="w", flush_interval=60.0,
                         max_buffered=max_buffered)
    for step in range(10):
        handle.log({"a": float(step)}, step=step)
    sink.reachable.set()
    handle._wake.set()  # the flusher sends now (one batch of all 10), not in 60 s
    assert sink.holding.wait(30), "the flusher never sent"
    return handle, sink


def test_flush_is_false_while_the_flusher_holds_a_batch_the_sink_has_not_taken() -> None:
    handle, sink = _hold_a_batch()
    try:
        assert not handle._queue  # the batch is out of the queue, not at the sink
        # issue 46: flush() looked at the queue alone and said True here
        assert not handle.flush(0)
        assert not handle.flush(0.2)  # and honours its deadline while the send is held
        assert sink.taken == []
    finally:
        sink.release.set()
    assert handle.flush(30)  # refused once, put back, then taken
    assert sink.taken == list(range(10))
    handle.close()


def test_flush_counts_what_the_sink_took_not_what_the_queue_still_holds() -> None:
    handle, sink = _hold_a_batch()
    done: list[bool] = []
    flusher = threading.Thread(target=lambda: done.append(handle.flush(30)))
    flusher.start()  # waits for the held send, then sends the batch itself
    sink.release.set()
    flusher.join(60)
    assert done == [True]
    assert sink.taken == list(range(10))  # True only once the sink had all of them
    handle.close()


def test_a_batch_in_flight_counts_against_the_buffer_bound() -> None:
    handle, sink = _hold_a_batch(max_buffered=10)
    try:
        for step in range(10, 15):  # the queue looks empty; the 10 in flight are not gone
            handle.log({"a": float(step)}, step=step)
        assert handle.dropped == 5
    finally:
        sink.release.set()
    assert handle.flush(30)
    assert sink.taken == list(range(10))
    handle.close()


def test_flush_is_false_when_the_sink_closed_with_events_unsent() -> None:
    class Closed(_FullSink):
        def push(self, batch: int, events: list[Any], dropped: int, flushed_at: float,
                 inputs: list[Any] | None = None) -> str:
            return "closed"

    handle = AttachedRun(Closed(), run_id=None, role="w", flush_interval=60.0)
    handle.log({"a": 1.0})
    assert not handle.flush(5)  # discarded when the sink went, not sent
    assert handle.gone
    assert not handle.flush(5)  # and still unsent when asked again


def test_drops_reach_the_run_as_dropped_events(memory_backend: Any, tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    assert isinstance(run, trackmux.Run)
    run._count_dropped(7)
    summary = run.finish()
    assert summary.dropped == 7 and not summary.complete


def test_bad_arguments_name_themselves(memory_backend: Any, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="run_id"):
        trackmux.attach(run_id=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="role"):
        trackmux.attach(role=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="role"):
        trackmux.attach(role="//")
    with pytest.raises(ValueError, match="flush_interval"):
        trackmux.attach(flush_interval=0)
    with pytest.raises(ValueError, match="max_buffered"):
        trackmux.attach(max_buffered=0)
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path, strict=True)
    handle = trackmux.attach(role="bad")  # the run's own policy: strict
    with pytest.raises(TypeError, match="'x'"):
        handle.log({"x": "text"})
    with pytest.raises(TypeError, match="text"):
        handle.log_text("k", 3)  # type: ignore[arg-type]
    run.finish()


def test_bad_input_of_an_attached_worker_is_dropped_named_and_counted(
        memory_backend: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """By default an attached worker drops a bad value as the driver does: the rest of the
    call arrives, the key is named once in the worker's log and counted."""
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    handle = trackmux.attach(role="w")
    with caplog.at_level("WARNING", logger="trackmux"):
        for step in range(3):
            handle.log({"x": "text", "ok": float(step)}, step=step)
        handle.log_text("k", 3)  # type: ignore[arg-type]
        handle.log_table("t", ["a"], [[1], [1, 2], [3]], step=1)
    run.finish()
    metrics = memory_backend[run.id].metrics()
    assert metrics["w/ok"] == [(0, 0.0), (1, 1.0), (2, 2.0)] and "w/x" not in metrics
    assert memory_backend[run.id].of_kind("table")[0].rows == ((1,), (3,))
    assert {(p.kind, p.count) for p in handle.problems()} == {
        ("metric 'x'", 3), ("text 'k'", 1), ("table row 't'", 1)}
    assert sum("bad metric 'x'" in r.getMessage() for r in caplog.records) == 1


def test_attach_without_a_run_or_ray_says_what_to_do(tmp_path: Path) -> None:
    code = ("import sys, trackmux\n"
            "sys.modules['ray'] = None  # as if Ray were not installed\n"
            "try:\n    trackmux.attach()\n"
            "except trackmux.NotAttachableError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert "trackmux.init()" in done.stdout and "pip install -e '.[ray]'" in done.stdout


def test_log_is_safe_from_many_threads(memory_backend: Any, tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    handles = [trackmux.attach(role=f"t{i}") for i in range(4)]

    def work(handle: AttachedRun) -> None:
        for step in range(500):
            handle.log({"v": float(step)}, step=step)

    threads = [threading.Thread(target=work, args=(h,)) for h in handles]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run.finish()
    metrics = memory_backend[run.id].metrics()
    for i in range(4):
        assert metrics[f"t{i}/v"] == [(s, float(s)) for s in range(500)]


def test_attached_histograms_are_binned_in_the_worker_and_prefixed(
        memory_backend: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import numpy as np

    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    rollout = trackmux.attach(role="rollout")
    values = np.array([0.0, 1.0, 1.0, 2.0, np.nan, np.inf], dtype=np.float32)
    with caplog.at_level("WARNING", logger="trackmux"):
        rollout.log_histogram("reward", values, step=4, bins=2)
        rollout.log_histogram("reward", values, step=5, bins=2)
    with caplog.at_level("WARNING", logger="trackmux"):
        rollout.log_artifact(tmp_path)  # dropped and named: a worker is never stopped
    assert any("log_artifact is not available" in r.getMessage() for r in caplog.records)
    assert ("artifact", 1) in {(p.kind.split(" ")[0], p.count) for p in rollout.problems()}
    run.finish()
    reader = SpoolReader(run.dir)  # the spool keeps the histogram itself (memory: fallback)
    got = [e for e in reader.iter_events() if isinstance(e, HistogramEvent)]
    reader.close()
    assert [(h.key, h.step, list(h.counts), h.count) for h in got] == [
        ("rollout/reward", 4, [1, 3], 4), ("rollout/reward", 5, [1, 3], 4)]
    assert (got[0].nan, got[0].inf) == (1, 1)
    warned = [r for r in caplog.records if "NaN" in r.getMessage()]
    assert len(warned) == 1 and "'reward'" in warned[0].getMessage()


def test_attach_after_a_finished_run_gets_a_handle_on_the_next_run(
        memory_backend: Any, tmp_path: Path) -> None:
    first = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    old = trackmux.attach(role="w")
    old.log({"a": 1.0})
    first.finish()
    second = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    new = trackmux.attach(role="w")
    assert new is not old
    new.log({"a": 2.0})
    second.finish()
    assert memory_backend[first.id].metrics()["w/a"] == [(0, 1.0)]
    assert memory_backend[second.id].metrics()["w/a"] == [(0, 2.0)]


def test_the_sink_hands_each_workers_changed_bad_input_list_to_the_driver_once() -> None:
    sink = SinkCore("r", "p", flush_interval=0.5)
    drop = {"what": "attached worker w: metric", "name": "'x'", "reason": "r", "count": 2}
    assert sink.push("w1", 0, [], 0, 1.0, [drop]) == "ok"  # no events, only the drops
    assert sink.drain(0)[2] == {"w1": [drop]}
    assert sink.drain(0)[2] == {}  # unchanged since: not sent again


def test_an_attached_workers_bad_input_counts_in_the_drivers_run(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Drops on a worker reach the run's problems, the finish summary and the spool's
    meta (so `trackmux show` and the report see them), summed over workers of a role."""
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    first, second = trackmux.attach(role="rollout"), trackmux.attach(role="rollout")
    with caplog.at_level("WARNING", logger="trackmux"):
        first.log({"ok": 1.0, "bad": None}, step=1)
        second.log({"bad": "text"}, step=1)  # the only entry: the call sends no event
        second.log({"bad": None}, step=2)
    assert first.flush(10) and second.flush(10)
    summary = run.finish()
    kinds = {p.kind: p.count for p in summary.problems}
    assert kinds == {"attached worker rollout: metric 'bad'": 3}
    assert summary.input_dropped == 3
    meta = SpoolReader(run.dir)
    try:
        assert sum(d["count"] for d in meta.meta()["input_dropped"]) == 3
    finally:
        meta.close()


def test_log_never_waits_on_the_node_sampler(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sampler's work (on the flusher's thread) is held on an Event until every log()
    call below returned: they could not have returned had log() waited on it. (What a
    worker's log() costs is benchmark B8's figure, not this test's.)"""
    from trackmux.attached import nodes

    in_tick, release = threading.Event(), threading.Event()

    class StuckSampling:
        sampling = True

        def __init__(self, plan: Any, emit: Any) -> None:
            pass

        def tick(self) -> None:
            in_tick.set()
            release.wait(60)

        def stop(self) -> None:
            release.set()

    class Planned(_FullSink):
        def push(self, batch: int, events: list[Any], dropped: int, flushed_at: float,
                 inputs: list[Any] | None = None) -> str:
            return "ok"

        def node_plan(self) -> object:
            return object()

    monkeypatch.setattr(nodes, "NodeSampling", StuckSampling)
    handle = AttachedRun(Planned(), run_id=None, role="w", flush_interval=60.0)
    try:
        assert in_tick.wait(30), "the flusher never started sampling"
        for step in range(1000):
            handle.log({"a": float(step)}, step=step)
        assert len(handle._queue) == 1000 and handle.dropped == 0
    finally:
        release.set()
    assert handle.flush(30) and handle.sent == 1000
    handle.close()


def test_exit_actor_is_wrapped_once_to_close_the_handles_before_rays_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """ray_exit.install on a stand-in ``ray``: the wrapper closes every handle of the
    process first, then calls Ray's function; a second install does not wrap again."""
    from types import SimpleNamespace

    from trackmux.attached import handle as handle_module
    from trackmux.attached import ray_exit

    order: list[str] = []

    def rays_exit_actor() -> None:
        order.append("ray")
        raise SystemExit("exit_actor() is called.")

    fake_ray = SimpleNamespace(actor=SimpleNamespace(exit_actor=rays_exit_actor))
    monkeypatch.setattr(handle_module, "close_all",
                        lambda timeout=5.0: order.append(f"close {timeout}"))
    ray_exit.install(fake_ray)
    wrapped = fake_ray.actor.exit_actor
    assert wrapped is not rays_exit_actor
    ray_exit.install(fake_ray)
    assert fake_ray.actor.exit_actor is wrapped  # not wrapped twice
    with pytest.raises(SystemExit):
        fake_ray.actor.exit_actor()
    assert order == [f"close {ray_exit.CLOSE_TIMEOUT}", "ray"]
    ray_exit.install(SimpleNamespace())  # a Ray without ray.actor: nothing to wrap
