"""The driver's side: serve the run to attached workers, and the transports they use.

``serve(run)`` starts the Ray sink actor (named, on the driver's node, no CPU reserved)
and a pump thread in the run's process that pulls the sink's batches and appends the
events to the run's spool as they were stamped. ``Run.finish`` calls ``close``: it
waits until every live worker has flushed what it logged before ``finish()`` (one flush
period; a killed worker is not live and is not waited for), then closes the sink and
appends the rest. Nothing here imports Ray at module import.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from trackmux.attached import wire
from trackmux.attached.handle import FLUSH_INTERVAL, SinkGone, SinkSlow
from trackmux.attached.nodes import NodePlan
from trackmux.attached.sink import DEFAULT_MAX_QUEUED, SinkCore
from trackmux.core.events import Event

if TYPE_CHECKING:
    from trackmux.core.lifecycle.run import Run

log = logging.getLogger("trackmux")

DEFAULT_NAME = "trackmux-sink"
PUMP_IDLE = 0.05
#: A call to the sink actor that has not answered is slow, not lost: Ray answers every
#: call or fails it with an actor error when the actor dies. On a loaded node an answer
#: (or the actor's start: a new worker process importing Ray) can take tens of seconds,
#: so both sides wait for the same call's answer, saying so once after ``SLOW_AFTER``,
#: and call the sink gone only on an actor error or after ``GIVE_UP_AFTER`` without one.
#: the longest attach() waits for the sink to know the worker (then the first push does)
JOIN_WAIT = 10.0
ANSWER_WAIT = 30.0  # one wait of a worker's push (then it retries the same call)
SLOW_AFTER = 30.0
GIVE_UP_AFTER = 600.0


def sink_name(run_id: str | None) -> str:
    """The named actor of a run: ``trackmux-sink:<id>``; the namespace's first run's
    sink is also reachable as ``trackmux-sink`` (what ``attach()`` without id finds)."""
    return DEFAULT_NAME if run_id is None else f"{DEFAULT_NAME}:{run_id}"


def ray_if_initialized() -> Any:
    """The ray module if Ray is imported and initialised in this process, else None."""
    ray = sys.modules.get("ray")
    if ray is None or not hasattr(ray, "is_initialized"):
        return None
    try:
        return ray if ray.is_initialized() else None
    except Exception:
        return None


def maybe_serve(run: Run) -> None:
    """Run start hook (registered by ``trackmux.attached``): serve Ray workers when Ray is up."""
    if ray_if_initialized() is None:
        return
    try:
        serve(run)
    except Exception as exc:  # the run itself must not fail because of its sink
        log.warning("trackmux: could not start the sink for attached Ray workers (%s: %s); "
                    "trackmux.attach() in workers will not reach run %s",
                    type(exc).__name__, exc, run.id)


def serve(run: Run, *, flush_interval: float = FLUSH_INTERVAL,
          max_queued: int = DEFAULT_MAX_QUEUED) -> RaySinkHost:
    """Let Ray workers attach to ``run``. Automatic when Ray is initialised before
    ``trackmux.init()``; call it after ``ray.init()`` otherwise. Idempotent."""
    for host in run._sinks:
        if isinstance(host, RaySinkHost):
            return host
    ray = ray_if_initialized()
    if ray is None:
        raise RuntimeError("trackmux.serve() needs Ray: call ray.init() first")
    host = RaySinkHost(ray, run, flush_interval, max_queued)
    run._sinks.append(host)
    return host


class RaySinkHost:
    """Owns the sink actor of one run and the pump that empties it into the spool."""

    def __init__(self, ray: Any, run: Run, flush_interval: float, max_queued: int) -> None:
        self._ray = ray
        self._run = run
        self.flush_interval = flush_interval
        actor_cls = ray.remote(SinkCore)
        node = ray.get_runtime_context().get_node_id()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        options: dict[str, Any] = {
            "num_cpus": 0, "max_restarts": 0, "max_concurrency": 1,
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=True),
        }
        self.name = DEFAULT_NAME if _default_name_free(ray) else sink_name(run.id)
        sampler = run._sampler
        self.actor = actor_cls.options(name=self.name, **options).remote(
            run.id, run.project, flush_interval, max_queued,
            system_metrics=sampler.interval if sampler is not None else None,
            driver_node=node, driver_host=socket.gethostname())
        self._acked = 0
        self._dropped_seen = 0
        self._stop_told = False  # the run's should_stop was passed on to the workers
        self._slow_told = False
        self.pulled = 0
        self._closing = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pump, name="trackmux-sink-pump",
                                        daemon=True)
        self._thread.start()

    def _pull_once(self) -> int:
        answer = self._answer(self.actor.drain.remote(self._acked))
        if answer is None:  # stopped while waiting
            return 0
        batches, dropped, inputs = answer
        count = 0
        for number, events in batches:
            if number <= self._acked:
                continue
            for event in wire.decode(events):
                self._run._append_stamped(event)
            count += len(events)
            self._acked = number
        if dropped > self._dropped_seen:
            self._run._count_dropped(dropped - self._dropped_seen)
            self._dropped_seen = dropped
        for worker, drops in inputs.items():
            self._run._intake.absorb(worker, drops)
        self.pulled += count
        if self._run.should_stop and not self._stop_told:  # issue 45: to the workers too
            self._stop_told = True  # (calls from one caller run in order: no wait needed)
            self.actor.ask_stop.remote(self._run.stop_reason or {})
        return count

    def _answer(self, ref: Any) -> Any:
        """The answer of one call to the sink; None if the pump was stopped meanwhile.
        Slow is not gone: it waits (in short slices, so a stop is seen) and says so once."""
        started = time.monotonic()
        while True:
            try:
                return self._ray.get(ref, timeout=1.0)
            except self._ray.exceptions.GetTimeoutError:
                if self._stop.is_set():
                    return None
                waited = time.monotonic() - started
                if waited > GIVE_UP_AFTER:
                    raise
                if waited > SLOW_AFTER and not self._slow_told:
                    self._slow_told = True
                    log.warning("trackmux: the sink of run %s has not answered for %.0f s "
                                "(a busy node?); still waiting for it", self._run.id, waited)

    def _pump(self) -> None:
        while not self._stop.is_set():
            try:
                got = self._pull_once()
            except Exception as exc:
                if self._stop.is_set():
                    return
                log.warning("trackmux: the sink of run %s stopped answering (%s: %s); "
                            "attached workers' events after this are not in the run",
                            self._run.id, type(exc).__name__, exc)
                return
            if not got:
                if self._closing.is_set():
                    return
                self._stop.wait(PUMP_IDLE)

    def close(self, deadline: float) -> None:
        """Wait for live workers' last flush (bounded), close the sink, pull the rest."""
        ray = self._ray
        since = time.time()
        start = time.monotonic()
        at_least = min(deadline, start + self.flush_interval + 0.1)
        # live workers (by their own pace: SinkCore.waiting_for) are waited for up to half
        # the finish budget; the other half delivers. A killed one drops out of "live".
        limit = min(deadline, start + max(2 * self.flush_interval + 1.0,
                                          (deadline - start) / 2))
        try:
            while time.monotonic() < limit:
                waiting = ray.get(self.actor.waiting_for.remote(since),
                                  timeout=max(5.0, deadline - time.monotonic()))
                if not waiting and time.monotonic() >= at_least:
                    break
                time.sleep(0.05)
            ray.get(self.actor.close.remote(), timeout=max(5.0, deadline - time.monotonic()))
        except Exception as exc:
            log.warning("trackmux: closing the sink of run %s failed (%s: %s)",
                        self._run.id, type(exc).__name__, exc)
        self._closing.set()
        self._thread.join(max(0.1, deadline - time.monotonic()))
        self._stop.set()
        self._thread.join(1.0)
        with contextlib.suppress(Exception):  # already gone with its node or the cluster
            ray.kill(self.actor, no_restart=True)


def _default_name_free(ray: Any) -> bool:
    """True unless a live sink of another run holds ``trackmux-sink`` in this namespace
    (a sink killed by its run's finish may keep the name for a moment: wait for it)."""
    deadline = time.monotonic() + 5.0
    while True:
        try:
            actor = ray.get_actor(DEFAULT_NAME)
        except ValueError:
            return True
        try:
            ray.get(actor.info.remote(), timeout=5)
            return False
        except Exception:  # dead: its name is about to be released
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)


class RayTransport:
    """A worker's way to the sink actor, found by name in the job's namespace."""

    heartbeat = True  # an empty push each period: the sink knows who is live at finish

    def __init__(self, ray: Any, run_id: str | None) -> None:
        self._ray = ray
        self._run_id = run_id
        self._actor: Any = None
        self._worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        #: the push whose answer has not come yet: (batch number, its call, sent at)
        self._pending: tuple[int, Any, float] | None = None

    def describe(self) -> str:
        return f"Ray actor {sink_name(self._run_id)!r}"

    def connect(self) -> bool:
        ray = self._ray
        for name in dict.fromkeys([sink_name(self._run_id), DEFAULT_NAME]):
            try:
                actor = ray.get_actor(name)
            except ValueError:
                continue
            if self._run_id is not None and name == DEFAULT_NAME:
                try:
                    info = ray.get(actor.info.remote(), timeout=30)
                except Exception:
                    continue
                if info.get("run_id") != self._run_id:
                    continue
            self._actor = actor
            try:  # the sink knows this worker before attach() returns (SinkCore.join)
                ray.get(actor.join.remote(self._worker), timeout=JOIN_WAIT)
            except Exception as exc:  # slow: its first push still makes it known
                log.debug("trackmux: the sink did not answer this worker's join: %s", exc)
            return True
        return False

    def node_plan(self) -> NodePlan | None:
        """What this worker's node samples for the run (None: nothing, or the driver's
        node, which the run samples itself). From the flusher thread; raises SinkSlow
        when the sink has not answered (both calls are safe to ask again)."""
        ray = self._ray
        try:
            info = ray.get(self._actor.info.remote(), timeout=ANSWER_WAIT)
            interval = info.get("system_metrics")
            if not interval:
                return None
            node_id = ray.get_runtime_context().get_node_id()
            if node_id is None or node_id == info.get("driver_node"):
                return None
            name = ray.get(self._actor.node_name.remote(node_id, socket.gethostname()),
                           timeout=ANSWER_WAIT)
        except ray.exceptions.GetTimeoutError as exc:
            raise SinkSlow("the run's sink has not told this worker's node plan yet") from exc
        return NodePlan(str(info["run_id"]), node_id, name, float(interval))

    def leave(self) -> None:
        """Tell the sink this handle is closed (not awaited: it follows the last push,
        calls from one caller run in order)."""
        self._actor.leave.remote(self._worker)

    def push(self, batch: int, events: list[Event], dropped: int, flushed_at: float,
             inputs: list[Any] | None = None) -> str:
        """Send a batch, or, when batch ``batch`` is the one whose answer did not come,
        wait again for that same call (never a second copy: exactly once)."""
        ray = self._ray
        pending = self._pending
        if pending is None or pending[0] != batch:
            ref = self._actor.push.remote(self._worker, batch, wire.encode(events), dropped,
                                          flushed_at, inputs)
            pending = self._pending = (batch, ref, time.monotonic())
        try:
            result: str = ray.get(pending[1], timeout=ANSWER_WAIT)
        except ray.exceptions.GetTimeoutError as exc:
            waited = time.monotonic() - pending[2]
            if waited > GIVE_UP_AFTER:
                self._pending = None
                raise SinkGone(f"the run's sink did not answer in {waited:.0f} s") from exc
            raise SinkSlow(f"the run's sink has not answered for {waited:.0f} s") from exc
        except ray.exceptions.RayError as exc:
            self._pending = None
            raise SinkGone(f"the run's sink is gone ({type(exc).__name__})") from exc
        self._pending = None
        return result


class LocalTransport:
    """attach() in the run's own process: batches go straight to the spool."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self.closed = False
        self._dropped = 0

    def describe(self) -> str:
        return f"run {self._run.id} in this process"

    def connect(self) -> bool:
        return True

    def push(self, batch: int, events: list[Event], dropped: int, flushed_at: float,
             inputs: list[Any] | None = None) -> str:
        if self.closed:
            return "closed"
        if inputs is not None:
            self._run._intake.absorb(f"in-process {id(self)}", inputs)
        for event in events:
            self._run._append_stamped(event)
        if dropped > self._dropped:
            self._run._count_dropped(dropped - self._dropped)
            self._dropped = dropped
        return "stop" if self._run.should_stop else "ok"


class LocalHost:
    """The handles attached inside the run's process, flushed by ``Run.finish``."""

    def __init__(self) -> None:
        self.handles: list[Any] = []

    def close(self, deadline: float) -> None:
        for handle in self.handles:
            handle.flush(max(0.1, deadline - time.monotonic()))
            handle._transport.closed = True
            handle._stop.set()
            handle._wake.set()
