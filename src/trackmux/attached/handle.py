"""The worker's side of attach: a run handle that buffers and sends in batches.

``log()`` and friends check and convert their input, stamp step and wall time, and
append to an in-memory deque: no I/O and no round trip on the caller's thread. A
background thread sends the buffer to the sink at least every ``flush_interval``
seconds and at exit. The buffer is bounded: while the sink cannot take more, events
wait in it, and past ``max_buffered`` new events are dropped, counted, reported once,
and the count reaches the run (``dropped_events``). A batch the flusher has taken out to
send still counts against the bound, and ``flush()`` counts what the sink accepted (not
what the buffer no longer holds), so a batch in flight is never mistaken for a sent one.

A sink that is gone (the driver finished, or died) turns every call into a no-op after
one warning; nothing here raises into the worker's code (bad input is dropped, named once
and counted, as on the driver: core/values/intake.py; ``strict`` raises it instead).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from trackmux.core.delivery.reporting import Problem
from trackmux.core.events import (
    Event,
    ImageEvent,
    MetricsEvent,
    TableEvent,
    TextEvent,
)
from trackmux.core.lifecycle.run import input_problems
from trackmux.core.values import normalize
from trackmux.core.values.intake import Intake

log = logging.getLogger("trackmux")

FLUSH_INTERVAL = 0.5
DEFAULT_MAX_BUFFERED = 100_000
BATCH_EVENTS = 5_000
#: How long a worker keeps looking for a sink before it says so (it keeps looking).
CONNECT_WARN_AFTER = 15.0

_handles: weakref.WeakSet[AttachedRun] = weakref.WeakSet()


class SinkGone(Exception):
    """The sink no longer exists or refuses batches: the handle becomes a no-op."""


class SinkSlow(Exception):
    """The sink has not answered a batch yet: it may still take it. The handle keeps the
    batch and sends the same one (same number, same events) again; the transport then
    waits for the first call's answer instead of sending a second copy."""


class Transport(Protocol):
    """Where a handle's batches go: a Ray sink actor, or a run in this process."""

    def connect(self) -> bool:
        """Find the sink; False if not there yet. Raises SinkGone if it never will be."""

    def push(self, batch: int, events: list[Event], dropped: int, flushed_at: float,
             inputs: list[Any] | None = None) -> str:
        """Send one batch: ``ok``, ``full`` or ``closed``; raises SinkGone, or SinkSlow
        (then the same batch comes again: the transport must not deliver it twice)."""

    def describe(self) -> str:
        """Where the batches go, for messages."""


class AttachedRun:
    """A run handle for a process that did not start the run (see :func:`trackmux.attach`).

    Same logging calls as :class:`trackmux.Run`; keys get the ``role/`` prefix, and this
    handle's default steps are its own."""

    def __init__(self, transport: Transport, *, run_id: str | None, role: str | None,
                 flush_interval: float = FLUSH_INTERVAL,
                 max_buffered: int = DEFAULT_MAX_BUFFERED, strict: bool = False) -> None:
        self.run_id = run_id
        self.role = role
        self.flush_interval = flush_interval
        self.max_buffered = max_buffered
        self._prefix = f"{role}/" if role else ""
        self._prefixed: dict[str, str] = {}
        self._transport = transport
        self._queue: deque[Event] = deque()
        self._step = -1
        #: run.watch's events waiting for the next log() call's step (as Run._next_log)
        self._next_log: dict[int, Callable[[int, float], Sequence[Event]]] = {}
        self.dropped = 0
        self.sent = 0
        #: issue 45: the driver's run was asked to stop (the doctor's ``stop_on``); learnt
        #: from the sink's answer to this worker's next flush after it. A plain attribute
        #: (no I/O, no lock); the finding itself is the driver's ``run.stop_reason``.
        self.should_stop = False
        self.stop_reason: dict[str, Any] | None = None
        self._gone = False
        self._closed = False
        self._batch = 0
        self._flushed_at = 0.0
        self._started = time.monotonic()
        self._connected = False
        self._warned: set[str] = set()
        self._nonfinite: set[str] = set()  # histogram keys warned about NaN/inf
        # bad input: dropped, named once (in this worker's log) and counted; raised if strict
        self._intake = Intake(strict, where=f"attached worker{f' {role}' if role else ''}")
        self._inputs_sent = 0  # the intake's version the driver last took
        #: held while a batch is out of the queue: connect, push, put back on refusal
        self._send_lock = threading.Lock()
        #: events the flusher took out of the queue and has not yet resolved (sent or put
        #: back): log() counts them against max_buffered without taking the lock
        self._inflight = 0
        #: (size, intake version) of the batch sent whose answer has not come: sent again
        self._unanswered: tuple[int, int] | None = None
        self._discarded = 0  # events dropped from the buffer when the sink went away
        self._before_flush: list[Callable[[], None]] = []
        self._nodes: Any = None  # NodeSampling once the sink said this node is sampled
        self._plan_asked = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        # Found now, not by the flusher's first send: a busy worker could log all its work
        # before that thread ran, and the driver finish without waiting for it. A sink not
        # there yet (or one that never will be) is left to the flusher, as before.
        with contextlib.suppress(Exception):
            self._connected = transport.connect()
        self._thread = threading.Thread(target=self._loop, name="trackmux-attach-flusher",
                                        daemon=True)
        self._thread.start()
        self.samples_problems: dict[str, int] = {}  # as Run.samples_problems
        _handles.add(self)

    # -- the worker's API ------------------------------------------------------------
    def log(self, data: Mapping[str, Any], step: int | None = None) -> None:
        """Log scalar metrics at ``step`` (default: one past this handle's last step)."""
        metrics = self._intake.metrics(data)
        if step is None:
            step = self._step + 1
        elif type(step) is not int or step < 0 or step > normalize.MAX_INT:
            step = self._intake.step(step)
            if step is None:
                return
        self._step = step
        if self._next_log:
            pending, self._next_log = self._next_log, {}
            now = time.time()
            for build in pending.values():
                for event in build(step, now):
                    self.log_event(event)
        if not metrics or self._gone:
            return
        if self._prefix:
            names = self._prefixed
            try:
                metrics = {names[k]: v for k, v in metrics.items()}
            except KeyError:
                metrics = {self._key(k): v for k, v in metrics.items()}
        self._put(MetricsEvent(metrics, step, time.time()))

    def log_table(self, key: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                  step: int | None = None) -> None:
        """Log rows of samples under ``role/key`` at ``step`` (default: last)."""
        name = self._intake.key(key, "table")
        table = None if name is None else self._intake.table(name, columns, rows)
        at = None if table is None else self._attach_step(step)
        if name is not None and table is not None and at is not None and not self._gone:
            self._put(TableEvent(self._key(name), table[0], table[1], at, time.time()))

    def log_image(self, key: str, image: Any, step: int | None = None,
                  caption: str | None = None) -> None:
        """Log an image; encoded as PNG here, in the worker, not in the driver."""
        name = self._intake.key(key, "image")
        if name is None:
            return
        if caption is not None:
            caption = self._intake.text(name, caption, "caption")
        encoded = self._intake.image(name, image)
        at = None if encoded is None else self._attach_step(step)
        if encoded is not None and at is not None and not self._gone:
            self._put(ImageEvent(self._key(name), encoded.png, encoded.width, encoded.height,
                                 encoded.mode, at, time.time(), caption))

    def log_text(self, key: str, text: str, step: int | None = None) -> None:
        """Log free text (markdown) under ``role/key`` at ``step`` (default: last)."""
        name = self._intake.key(key, "text")
        checked = None if name is None else self._intake.text(name, text)
        at = None if checked is None else self._attach_step(step)
        if name is not None and checked is not None and at is not None and not self._gone:
            self._put(TextEvent(self._key(name), checked, at, time.time()))

    def log_histogram(self, key: str, values: Any, step: int | None = None,
                      bins: int = 64) -> None:
        """Log a distribution under ``role/key``, binned here in the worker (as
        ``Run.log_histogram``): only counts, edges and moments travel to the sink."""
        from trackmux.core.values.histogram import warn_nonfinite

        name = self._intake.key(key, "histogram")
        binned = None if name is None else self._intake.histogram(name, values, bins)
        at = None if binned is None else self._attach_step(step)
        if name is None or binned is None or at is None:
            return
        warn_nonfinite(name, binned, self._nonfinite)
        if not self._gone:
            self._put(binned.event(self._key(name), at, time.time()))

    def log_samples(self, key: str, samples: Any, step: int | None = None,
                    tokens: Mapping[str, Any] | None = None, *,
                    token_lengths: Any = None, token_dtype: str = "float16",
                    max_rows: int | None = None, strict: bool = False) -> None:
        """Log a batch of samples under ``role/key`` (as ``Run.log_samples``), converted
        here in the worker: only the packed columns and token arrays travel to the sink."""
        from trackmux.core.lifecycle.run import samples_event

        name = self._intake.key(key, "samples")
        at = None if name is None else self._attach_step(step)
        event = None if name is None or at is None else samples_event(
            self._intake, name, self._key(name), at, samples, self.samples_problems,
            tokens=tokens, token_lengths=token_lengths, token_dtype=token_dtype,
            max_rows=max_rows, strict=strict)
        if event is not None and not self._gone:
            self._put(event)

    def log_artifact(self, path: Any, name: str | None = None, type: str | None = None,
                     step: int | None = None, copy_max_bytes: int | None = None) -> None:
        """Not from a worker: an artifact's files are on the worker's node, and the run's
        folder (which copies them by hash, for sync to replay) is on the driver's. The call
        is dropped and named like bad input (strict raises), so a worker is never stopped."""
        self._intake.drop("artifact", name if isinstance(name, str) else str(path),
                          NotImplementedError(
                              "log_artifact is not available on an attached worker: its "
                              "files live on the worker's node. Write them to storage the "
                              "driver can read and call run.log_artifact(path) in the driver"),
                          "the call is dropped")

    def _at_next_log(self, owner: object, build: Callable[[int, float], Sequence[Event]]
                     ) -> None:
        """As ``Run._at_next_log``: ``build``'s events at the next ``log()`` call's step
        (what is pending at ``close()`` goes at the step after the last)."""
        self._next_log[id(owner)] = build

    def log_event(self, event: Event) -> None:
        """Send an already-built event (kinds added later); its key is not prefixed."""
        if not self._gone:
            self._put(event)

    @property
    def step(self) -> int:
        """The last step this handle used (-1 before the first log)."""
        return self._step

    def problems(self) -> list[Problem]:
        """Bad input this worker dropped (named once in its own log), with counts."""
        return input_problems(self._intake)

    @property
    def gone(self) -> bool:
        """True once the sink is gone: calls are then no-ops."""
        return self._gone

    @property
    def usable(self) -> bool:
        """False once closed or once its sink is known to be closed (the run in this
        process finished): ``attach()`` then makes a new handle, for the next run."""
        return not (self._gone or self._closed or getattr(self._transport, "closed", False))

    @property
    def sampling(self) -> bool:
        """True while this handle samples its node's system metrics (see
        ``trackmux/attached/nodes.py``)."""
        return self._nodes is not None and self._nodes.sampling

    def add_before_flush(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` before each send (integrations that group rows, e.g. verl's
        rollout traces, emit what is ready)."""
        self._before_flush.append(callback)

    def flush(self, timeout: float = 10.0) -> bool:
        """Send everything logged so far; True only once the sink accepted all of it,
        False if that did not happen in time (or the sink went away first).

        The target is read under the send lock, when no batch is in flight: every event
        appended before this call is then either counted in ``sent`` or in the queue."""
        deadline = time.monotonic() + timeout
        self._run_before_flush()
        if not self._send_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return False  # the flusher's send did not end in time: not all accepted
        try:
            target = self.sent + len(self._queue)
        finally:
            self._send_lock.release()
        while True:
            self._send_all(deadline)  # also when nothing is queued: drop counts, hello
            if self.sent >= target:
                return not self._discarded  # events the sink's going took are unsent too
            if self._gone or time.monotonic() >= deadline:
                return False
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))  # "full": retry

    def close(self, timeout: float = 10.0) -> bool:
        """Flush and stop the background thread (also run at interpreter exit)."""
        if self._closed:
            return not self._queue
        self._stop_sampling()  # first, so its last sample goes with the final flush
        pending, self._next_log = self._next_log, {}
        for build in pending.values():  # the last watched step, after the last log()
            for event in build(self._step + 1, time.time()):
                self.log_event(event)
        done = self.flush(timeout)
        self._closed = True
        leave = getattr(self._transport, "leave", None)
        if leave is not None and self._connected and not self._gone:
            try:  # the driver's finish() need not wait for this worker's next flush
                leave()
            except Exception:  # the sink gone meanwhile: nothing to tell
                log.debug("trackmux: could not tell the sink this worker left", exc_info=True)
        self._stop.set()
        self._wake.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(1.0)
        _handles.discard(self)
        return done

    def __enter__(self) -> AttachedRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<trackmux.AttachedRun role={self.role!r} run={self.run_id or 'driver'} "
                f"via {self._transport.describe()}>")

    # -- internals -------------------------------------------------------------------
    def _key(self, key: str) -> str:
        if not self._prefix:
            return key
        full = self._prefixed.get(key)
        if full is None:
            full = normalize.check_key(self._prefix + key)
            if len(self._prefixed) < 100_000:
                self._prefixed[key] = full
        return full

    def _attach_step(self, step: object) -> int | None:
        return max(self._step, 0) if step is None else self._intake.step(step)

    def _put(self, event: Event) -> None:
        queue = self._queue
        if len(queue) + self._inflight >= self.max_buffered:
            self.dropped += 1
            if "full" not in self._warned:
                self._warned.add("full")
                log.error("trackmux: attached worker buffer is full (%d events; the sink is "
                          "behind or unreachable); new events are dropped and counted in the "
                          "run's dropped_events", self.max_buffered)
            return
        queue.append(event)
        if len(queue) >= BATCH_EVENTS:
            self._wake.set()

    def _loop(self) -> None:
        first = True  # connect (and say hello) at once, so the sink knows this worker
        while not self._stop.is_set():
            if not first:
                self._wake.wait(self.flush_interval)
            first = False
            self._wake.clear()
            if self._stop.is_set():
                break
            self._run_before_flush()
            try:
                self._send_all(time.monotonic() + 30.0)
            except Exception:  # the flusher must never die silently nor raise anywhere
                log.exception("trackmux: attached worker could not send its batch")
            self._node_tick()

    def _node_tick(self) -> None:
        """Learn once whether this node is to be sampled; then compete to sample it."""
        if self._gone or self._closed or self._stop.is_set():
            return
        try:
            if self._nodes is None:
                if self._plan_asked or not self._connected:
                    return
                self._plan_asked = True
                plan_of = getattr(self._transport, "node_plan", None)
                try:
                    plan = plan_of() if plan_of is not None else None
                except SinkSlow:  # not answered yet: ask again on the next tick
                    self._plan_asked = False
                    return
                if plan is None:
                    return
                from trackmux.attached.nodes import NodeSampling

                self._nodes = NodeSampling(plan, self._put_sample)
            self._nodes.tick()
        except Exception as exc:  # sampling is optional: never at the worker's expense
            if "nodes" not in self._warned:
                self._warned.add("nodes")
                log.warning("trackmux: this worker does not sample its node's system "
                            "metrics (%s: %s)", type(exc).__name__, exc)

    def _put_sample(self, data: dict[str, float]) -> None:
        """From the node sampler's thread: one metrics event, keys as sampled (no role)."""
        if not self._gone and not self._closed:
            self._put(MetricsEvent(data, max(self._step, 0), time.time()))

    def _stop_sampling(self) -> None:
        nodes = self._nodes
        if nodes is not None:
            nodes.stop()

    def _run_before_flush(self) -> None:
        for callback in self._before_flush:
            try:
                callback()
            except Exception:  # an integration's grouping must not stop the flusher
                log.exception("trackmux: a before-flush callback of an attached run failed")

    def _send_all(self, deadline: float) -> None:
        if not self._send_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return  # another send holds its batch past this caller's deadline
        try:
            if self._gone:
                return
            if not self._connected:
                self._connected = self._transport.connect()
                if not self._connected:
                    self._not_connected()
                    return
            first = getattr(self._transport, "heartbeat", False)
            while ((self._queue or first or self._intake.version() != self._inputs_sent)
                   and time.monotonic() < deadline):
                first = False
                if not self._send_one():
                    return
        except SinkGone as exc:
            self._went(str(exc))
        finally:
            self._send_lock.release()

    def _send_one(self) -> bool:
        queue = self._queue
        now = time.time()
        # only this (lock-holding) sender pops, so ``take`` events are there; counted in
        # flight before they leave the queue, so log()'s bound never sees them vanish. A
        # batch the sink has not answered goes again unchanged (the transport waits for
        # its first call): events queued behind it meanwhile must not join it
        unanswered, self._unanswered = self._unanswered, None
        take = unanswered[0] if unanswered else min(len(queue), BATCH_EVENTS)
        self._inflight = take
        batch = [queue.popleft() for _ in range(take)]
        empty_after = not queue
        number = self._batch + 1 if batch else self._batch
        version = unanswered[1] if unanswered else self._intake.version()
        inputs = self._inputs() if version != self._inputs_sent else None
        try:
            result = self._transport.push(number, batch, self.dropped,
                                          now if empty_after else self._flushed_at, inputs)
        except SinkSlow as exc:
            queue.extendleft(reversed(batch))  # in order, at the front: the same next time
            self._inflight = 0
            self._unanswered = (take, version)
            if "slow" not in self._warned:
                self._warned.add("slow")
                log.warning("trackmux: %s; this worker keeps its events and waits for it",
                            exc)
            return False
        except BaseException:
            queue.extendleft(reversed(batch))  # not known to be taken: keep it, in order
            self._inflight = 0
            raise
        if result in ("ok", "stop"):
            if result == "stop":
                self.should_stop = True
            self._inputs_sent = version
            self._batch = number
            self.sent += len(batch)
            self._inflight = 0
            if empty_after:
                self._flushed_at = now
            return bool(queue)
        queue.extendleft(reversed(batch))  # not taken: keep order, retry on the next tick
        self._inflight = 0
        if result == "closed":
            raise SinkGone(f"the run's sink ({self._transport.describe()}) is closed: the "
                           "driver finished the run")
        return False  # "full": backpressure, the buffer holds them meanwhile

    def _inputs(self) -> list[dict[str, Any]]:
        """This worker's drops for the driver's problems, named as coming from here."""
        where = self._intake.where
        return [{**d.as_dict(), "what": f"{where}: {d.what}"} for d in self._intake.dropped()]

    def _not_connected(self) -> None:
        if (time.monotonic() - self._started > CONNECT_WARN_AFTER
                and "connect" not in self._warned):
            self._warned.add("connect")
            log.warning("trackmux: attached worker found no sink for %s after %.0f s; its "
                        "events wait in memory (up to %d). Call trackmux.init() in the driver "
                        "after ray.init() (or trackmux.serve(run) after it).",
                        self._transport.describe(), CONNECT_WARN_AFTER, self.max_buffered)

    def _went(self, reason: str) -> None:
        self._gone = True
        self._stop_sampling()
        lost = len(self._queue)
        self._discarded += lost
        self._queue.clear()
        if "gone" not in self._warned:
            self._warned.add("gone")
            log.warning("trackmux: %s; further calls on this attached run do nothing "
                        "(%d unsent events discarded)", reason, lost)


@atexit.register
def close_all(timeout: float = 5.0) -> None:
    """Close every open handle of this process (what it buffered is sent): at interpreter
    exit, and before a Ray actor ends itself (:mod:`trackmux.attached.ray_exit`)."""
    for handle in list(_handles):
        try:
            handle.close(timeout=timeout)
        except Exception:  # never turn interpreter exit into a traceback storm
            log.exception("trackmux: flushing an attached run at exit failed")
