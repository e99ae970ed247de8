"""A sink that answers late is slow, not gone (issue 46: under two suites' load the Ray
sink's first answer took over 30 s, the driver's pump and the workers gave up on a live
sink, and the run lost their events). Without Ray: the handle sends an unanswered batch
again unchanged, the Ray transport then waits for its first call instead of sending a
copy, and the driver's pump waits for a slow drain instead of stopping."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from trackmux.attached import host
from trackmux.attached.handle import AttachedRun, SinkGone, SinkSlow


class _LateSink:
    """Takes batches, but answers the first one late: raises SinkSlow until released.
    Records every call so the test sees what each attempt carried."""

    heartbeat = False

    def __init__(self) -> None:
        self.calls: list[tuple[int, list[int]]] = []
        self.answered = threading.Event()
        self.slow_once = threading.Event()
        self.taken: dict[int, list[int]] = {}

    def connect(self) -> bool:
        return True

    def push(self, batch: int, events: list[Any], dropped: int, flushed_at: float,
             inputs: list[Any] | None = None) -> str:
        steps = [e.step for e in events]
        self.calls.append((batch, steps))
        if not self.answered.is_set():
            self.slow_once.set()
            raise SinkSlow("the run's sink has not answered for 30 s")
        if batch not in self.taken:  # what a sink that deduplicates by number keeps
            self.taken[batch] = steps
        return "ok"

    def describe(self) -> str:
        return "a late sink"


def test_an_unanswered_batch_goes_again_unchanged_and_nothing_is_lost(
        caplog: pytest.LogCaptureFixture) -> None:
    sink = _LateSink()
    handle = AttachedRun(sink, run_id=None, role="w", flush_interval=60.0)
    with caplog.at_level(logging.WARNING, logger="trackmux"):
        for step in range(10):
            handle.log({"a": float(step)}, step=step)
        assert not handle.flush(0.5)  # the sink did not answer: not accepted
        assert sink.slow_once.is_set()
        assert not handle.gone  # slow is not gone: the handle keeps working
        for step in range(10, 25):  # logged while the first batch waits for its answer
            handle.log({"a": float(step)}, step=step)
        sink.answered.set()
        assert handle.flush(10)
    first_number, first_steps = sink.calls[0]
    assert first_steps == list(range(10))
    # every attempt with the first number carried exactly the first batch: had the
    # later steps joined it, a sink that already took that number would drop them
    assert all(steps == first_steps for number, steps in sink.calls if number == first_number)
    kept = [step for number in sorted(sink.taken) for step in sink.taken[number]]
    assert kept == list(range(25))
    assert handle.sent == 25
    assert sum("has not answered" in r.getMessage() for r in caplog.records) == 1
    handle.close()


class _Ref:
    def __init__(self, answer: Any) -> None:
        self.answer = answer


class _FakeRay:
    """Enough of Ray for the transport and the pump: calls return refs; ``get`` fails
    with GetTimeoutError while ``late`` holds, or raises the actor error it is given."""

    class exceptions:  # mirrors ray.exceptions
        class RayError(Exception):
            pass

        class GetTimeoutError(RayError, TimeoutError):
            pass

        class RayActorError(RayError):
            pass

    def __init__(self) -> None:
        self.late = 0  # this many more get() calls time out
        self.dead = False
        self.gets = 0

    def get(self, ref: _Ref, timeout: float | None = None) -> Any:
        self.gets += 1
        if self.dead:
            raise self.exceptions.RayActorError("the actor died")
        if self.late > 0:
            self.late -= 1
            raise self.exceptions.GetTimeoutError("not yet")
        return ref.answer


class _Method:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[Any, ...]] = []

    def remote(self, *args: Any) -> _Ref:
        self.calls.append(args)
        return _Ref(self.answer)


class _Actor:
    def __init__(self) -> None:
        self.push = _Method("ok")
        self.drain = _Method(([(1, ["e"])], 0, {}))


def _transport(ray: _FakeRay) -> tuple[host.RayTransport, _Actor]:
    transport = host.RayTransport(ray, run_id=None)
    actor = _Actor()
    transport._actor = actor
    return transport, actor


def test_the_ray_transport_waits_for_the_same_call_instead_of_sending_a_copy() -> None:
    ray = _FakeRay()
    transport, actor = _transport(ray)
    ray.late = 1
    with pytest.raises(SinkSlow):
        transport.push(1, [], 0, 0.0)
    assert transport.push(1, [], 0, 0.0) == "ok"  # the answer of the first call
    assert len(actor.push.calls) == 1
    assert transport.push(2, [], 0, 0.0) == "ok"  # the next batch is a new call
    assert len(actor.push.calls) == 2


def test_the_ray_transport_calls_the_sink_gone_on_an_actor_error_or_after_long() -> None:
    ray = _FakeRay()
    transport, _ = _transport(ray)
    ray.dead = True
    with pytest.raises(SinkGone, match="RayActorError"):
        transport.push(1, [], 0, 0.0)
    ray.dead = False
    ray.late = 1
    with pytest.raises(SinkSlow):
        transport.push(2, [], 0, 0.0)
    number, ref, sent_at = transport._pending or (0, None, 0.0)
    transport._pending = (number, ref, sent_at - host.GIVE_UP_AFTER - 1)  # long ago
    ray.late = 1
    with pytest.raises(SinkGone, match="did not answer"):
        transport.push(2, [], 0, 0.0)


def test_the_pump_waits_for_a_slow_drain_and_says_so_once(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    ray = _FakeRay()
    sink = object.__new__(host.RaySinkHost)  # its pump's wait alone, no actor, no thread
    sink._ray = ray
    sink._stop = threading.Event()
    sink._slow_told = False
    sink._run = type("R", (), {"id": "r1"})()
    monkeypatch.setattr(host, "SLOW_AFTER", 0.0)
    ray.late = 3
    with caplog.at_level(logging.WARNING, logger="trackmux"):
        assert sink._answer(_Ref("drained")) == "drained"
        ray.late = 2
        assert sink._answer(_Ref("again")) == "again"
    assert ray.gets == 7  # waited through every slow slice on the same call
    assert sum("has not answered" in r.getMessage() for r in caplog.records) == 1
    ray.late = 10**6
    sink._stop.set()
    assert sink._answer(_Ref("never")) is None  # a stop ends the wait
    ray.late = 0
    ray.dead = True
    sink._stop.clear()
    with pytest.raises(ray.exceptions.RayActorError):  # an actor error is not waited out
        sink._answer(_Ref("x"))


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def time(self) -> float:
        return self.now


def test_finish_waits_for_a_worker_that_pushes_slowly_but_not_for_a_killed_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Liveness by each worker's own pace: on a busy node a live worker's pushes come
    seconds apart (a fixed two-period window called it dead and finish() left its last
    events out); a killed worker falls silent for longer than it ever paused."""
    from trackmux.attached import sink as sink_module

    clock = _Clock()
    monkeypatch.setattr(sink_module, "time", clock)
    sink = sink_module.SinkCore("r", "p", flush_interval=0.5)
    for _ in range(5):  # "busy": pushes 3 s apart; "killed": every 0.5 s, then nothing
        sink.push("busy", 0, [], 0, clock.now - 10)
        for _ in range(6):
            sink.push("killed", 0, [], 0, clock.now - 10)
            clock.now += 0.5
    clock.now += 4.0  # 4 s since either was heard from
    assert sink.waiting_for(clock.now - 5) == ["busy"]  # 4 s < 3 x its 3 s gaps
    clock.now += 6.0  # 10 s: longer than three times anything it paused
    assert sink.waiting_for(clock.now - 5) == []


def _sink_with_a_live_and_a_dead_worker_name(monkeypatch: pytest.MonkeyPatch
                                             ) -> tuple[Any, _Clock, str, str]:
    """A SinkCore on a test clock, and two worker names of this host: one of this process
    (live), one of a process that has ended (dead)."""
    import os
    import socket
    import subprocess
    import sys

    from trackmux.attached import sink as sink_module

    clock = _Clock()
    monkeypatch.setattr(sink_module, "time", clock)
    sink = sink_module.SinkCore("r", "p", flush_interval=0.5)
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    host = socket.gethostname()
    return (sink, clock, f"{host}:{os.getpid()}:aaaaaa",
            f"{host}:{int(ended.stdout)}:bbbbbb")


def test_a_worker_on_this_host_is_waited_for_while_its_process_lives(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On the sink's own host the process table says who is live, however long a busy
    worker was silent; a worker whose process ended, or whose handle said it left, is
    not waited for."""
    sink, clock, live, dead = _sink_with_a_live_and_a_dead_worker_name(monkeypatch)
    closed = live[:-6] + "cccccc"
    for name in (live, dead, closed):
        sink.push(name, 0, [], 0, clock.now - 10)
    sink.leave(closed)
    clock.now += 120.0  # silent for two minutes: a starved flusher, not a killed one
    assert sink.waiting_for(clock.now - 1) == [live]


class _LeavingSink(_LateSink):
    def __init__(self) -> None:
        super().__init__()
        self.answered.set()
        self.left = 0

    def leave(self) -> None:
        self.left += 1


def test_closing_a_handle_tells_the_sink_it_left() -> None:
    sink = _LeavingSink()
    handle = AttachedRun(sink, run_id=None, role="w", flush_interval=60.0)
    handle.log({"a": 1.0}, step=0)
    assert handle.close(10)
    assert sink.left == 1
    assert [steps for _, steps in sink.calls if steps] == [[0]]  # after its last batch


def test_a_worker_that_joined_is_waited_for_before_its_first_push(monkeypatch: Any) -> None:
    """A busy worker can log all its work before its flusher first pushes; the driver,
    told the work is done, finishes. The join said at attach makes it known: waited for
    while its process lives, not once it is gone (seen in a loaded pair of suites: a
    worker's 2,008 events discarded as 'closed')."""
    sink, clock, live, dead = _sink_with_a_live_and_a_dead_worker_name(monkeypatch)
    assert sink.join(live) == "ok" and sink.join(dead) == "ok"
    clock.now += 60.0
    assert sink.waiting_for(clock.now - 1) == [live]
    sink.close()
    assert sink.join(live[:-6] + "cccccc") == "closed"


class _ConnectSink(_LateSink):
    def __init__(self) -> None:
        super().__init__()
        self.answered.set()
        self.connected_from: list[str] = []

    def connect(self) -> bool:
        self.connected_from.append(threading.current_thread().name)
        return True


def test_attach_finds_the_sink_before_it_returns() -> None:
    sink = _ConnectSink()
    handle = AttachedRun(sink, run_id=None, role="w", flush_interval=60.0)
    assert sink.connected_from == [threading.current_thread().name]  # not the flusher's
    handle.log({"a": 1.0}, step=0)
    assert handle.close(10)
    assert sink.connected_from == [threading.current_thread().name]  # once
