"""The sink: what attached workers push their batches into, beside the driver's run.

:class:`SinkCore` is plain Python so it can be tested without Ray; ``host.py`` runs it
as a Ray actor (named, so workers find it with no configuration). It only holds
batches in a bounded queue; the driver's process pulls them (``drain``) and appends
them to its spool, because only that process may write the spool.

Exactly once: each worker numbers its batches; a batch number already seen is
acknowledged and ignored, so a worker may resend after a timeout. The driver's pull
is acknowledged the same way (``drain(acked)`` keeps batches until acknowledged).
"""

from __future__ import annotations

import socket
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from trackmux.attached.nodes import assign_name
from trackmux.core.procs import process_alive

#: Events the sink holds before it answers ``full`` (workers keep them and retry).
DEFAULT_MAX_QUEUED = 200_000


#: How many of a worker's latest gaps between pushes its liveness window looks at.
GAPS_KEPT = 20
#: A worker is live while its silence is under this many times its longest recent gap.
SILENCE_FACTOR = 3.0


@dataclass
class _Worker:
    last_batch: int = 0
    seen: float = 0.0
    flushed_at: float = 0.0
    dropped: int = 0
    inputs: list[Any] | None = None  # its bad-input drops, when they changed since drain
    #: its latest gaps between pushes: how late it may be heard from on this machine
    gaps: deque[float] = field(default_factory=lambda: deque(maxlen=GAPS_KEPT))
    left: bool = False  # its handle was closed: nothing more will come from it


class SinkCore:
    """Bounded queue of worker batches for one run; single-threaded (a Ray actor)."""

    def __init__(self, run_id: str, project: str, flush_interval: float,
                 max_queued: int = DEFAULT_MAX_QUEUED, *, system_metrics: float | None = None,
                 driver_node: str | None = None, driver_host: str | None = None) -> None:
        self.run_id = run_id
        #: the run's sampling interval: attached workers on other nodes sample theirs
        self.system_metrics = system_metrics
        self.driver_node = driver_node
        self._nodes: dict[str, str] = {}  # Ray node id -> name in system/<name>/...
        if driver_node is not None and driver_host is not None:
            assign_name(self._nodes, driver_node, driver_host)  # reserve the driver's name
        self.project = project
        self.flush_interval = flush_interval
        self.max_queued = max_queued
        self._queue: deque[tuple[int, list[Any]]] = deque()
        self._queued_events = 0
        self._next_id = 0
        self._workers: dict[str, _Worker] = {}
        self._closed = False
        self._host = socket.gethostname()
        self.received = 0
        self.rejected_full = 0
        #: the finding the driver's run stopped for (issue 45): then each push that is
        #: taken answers ``stop`` instead of ``ok``, and the worker's handle raises its flag
        self.stop_reason: dict[str, Any] | None = None

    def info(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "project": self.project,
                "flush_interval": self.flush_interval, "system_metrics": self.system_metrics,
                "driver_node": self.driver_node}

    def node_name(self, node_id: str, hostname: str) -> str:
        """The node's name in ``system/<node>/...``: unique in the run, stable for it."""
        return assign_name(self._nodes, node_id, hostname)

    def push(self, worker: str, batch: int, events: list[Any], dropped: int,
             flushed_at: float, inputs: list[Any] | None = None) -> str:
        """Take one batch: ``ok``, ``stop`` (taken, and the driver's run was asked to
        stop: the worker's ``should_stop``), ``full`` (not taken: retry later) or ``closed``.

        ``flushed_at``: the worker's clock when its buffer was last empty (then all it
        logged before that time has been pushed); ``dropped``: its running drop count;
        ``inputs``: its whole list of bad-input drops when it changed (else None)."""
        if self._closed:
            return "closed"
        state = self._workers.setdefault(worker, _Worker())
        now = time.time()
        if state.seen:
            state.gaps.append(now - state.seen)
        state.seen = now
        state.dropped = max(state.dropped, dropped)
        if inputs is not None:
            state.inputs = inputs
        if batch > state.last_batch and events:
            if self._queued_events + len(events) > self.max_queued and self._queue:
                self.rejected_full += 1
                return "full"
            self._next_id += 1
            self._queue.append((self._next_id, events))
            self._queued_events += len(events)
            self.received += len(events)
        if batch > state.last_batch:
            state.last_batch = batch
        state.flushed_at = max(state.flushed_at, flushed_at)
        return "ok" if self.stop_reason is None else "stop"

    def ask_stop(self, reason: dict[str, Any]) -> None:
        """The driver's run was asked to stop (the doctor's ``stop_on``): tell the workers
        in the answer to their next push."""
        self.stop_reason = dict(reason)

    def drain(self, acked: int, limit: int = 20_000
              ) -> tuple[list[tuple[int, list[Any]]], int, dict[str, list[Any]]]:
        """Forget batches up to ``acked``; return the next ones (up to ``limit`` events),
        the workers' total drop count, and the bad-input lists that changed (by worker)."""
        while self._queue and self._queue[0][0] <= acked:
            _, events = self._queue.popleft()
            self._queued_events -= len(events)
        out: list[tuple[int, list[Any]]] = []
        size = 0
        for item in self._queue:
            if out and size + len(item[1]) > limit:
                break
            out.append(item)
            size += len(item[1])
        inputs = {name: w.inputs for name, w in self._workers.items() if w.inputs is not None}
        for name in inputs:
            self._workers[name].inputs = None
        return out, sum(w.dropped for w in self._workers.values()), inputs

    def join(self, worker: str) -> str:
        """A worker's handle found the sink: from now on ``finish()`` waits for it, even
        before its first push. A worker on a busy node could log its whole work before its
        flusher first pushed, and the driver, told the work was done, finished without
        it. ``closed`` if the run finished already, else ``ok``."""
        state = self._workers.setdefault(worker, _Worker())
        if not state.seen:
            state.seen = time.time()
        return "closed" if self._closed else "ok"

    def leave(self, worker: str) -> None:
        """The worker's handle was closed (after its last push): not waited for."""
        self._workers.setdefault(worker, _Worker()).left = True

    def waiting_for(self, since: float) -> list[str]:
        """Live workers that have not flushed past ``since``.

        Live: a worker on this host whose process exists (workers are named
        ``host:pid:tag``), unless its handle was closed; elsewhere, one heard from within
        two flush periods, or within ``SILENCE_FACTOR`` times its own longest recent gap
        between pushes. A worker pushes every flush period, but on a busy node its pushes
        come seconds apart; a fixed window took a live worker for a killed one and its
        last events missed the run. A killed worker's process is gone, or it falls
        silent for longer than it ever paused."""
        now = time.time()
        base = 2 * self.flush_interval + 0.5
        waiting = []
        for name, w in self._workers.items():
            if w.left or w.flushed_at >= since:
                continue
            pid = self._local_pid(name)
            if pid is not None:
                live = process_alive(pid)
            else:
                live = now - w.seen <= max(base, SILENCE_FACTOR * max(w.gaps, default=0.0))
            if live:
                waiting.append(name)
        return waiting

    def _local_pid(self, worker: str) -> int | None:
        host, _, rest = worker.partition(":")
        pid = rest.partition(":")[0]
        return int(pid) if host == self._host and pid.isdigit() else None

    def close(self) -> None:
        """Refuse further batches (workers then stop sending, with one warning)."""
        self._closed = True

    def stats(self) -> dict[str, Any]:
        return {"workers": len(self._workers), "received": self.received,
                "queued": self._queued_events, "rejected_full": self.rejected_full,
                "dropped": sum(w.dropped for w in self._workers.values())}

