"""Offline delivery of a spool: the same DeliveryWorker as live runs, driven to the end.

Used by ``trackmux sync`` and by the conformance suite. Each backend delivers only what
it has not acknowledged, continuing its remote run (identity kept in the spool), under
the per-backend delivery lock (a second sync of the same run and backend is refused).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trackmux.core.backends.contract import Backend, RunInfo
from trackmux.core.backends.registry import get_registry
from trackmux.core.delivery.host import stop_orphaned_delivery
from trackmux.core.delivery.reporting import Problem, Reporter
from trackmux.core.delivery.worker import DeliveryWorker, Progress, acquire_delivery_lock
from trackmux.core.spool.reader import SpoolReader


@dataclass
class SyncResult:
    run_dir: Path
    target: int
    acked: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    damage: list[str] = field(default_factory=list)
    before: dict[str, int] = field(default_factory=dict)  # acknowledged when sync began
    where: dict[str, str] = field(default_factory=dict)  # each backend's output location
    #: backends that failed permanently (not retried), with the cause
    failed: dict[str, str] = field(default_factory=dict)
    notes: list[Problem] = field(default_factory=list)
    quarantined: dict[str, int] = field(default_factory=dict)

    def delivered_now(self, name: str) -> int:
        return max(0, self.acked.get(name, 0) - self.before.get(name, 0))

    @property
    def pending(self) -> dict[str, int]:
        return {name: self.target - acked for name, acked in self.acked.items()
                if acked < self.target}

    @property
    def complete(self) -> bool:
        return not self.pending


def run_info(run_dir: Path, reader: SpoolReader) -> RunInfo:
    """The RunInfo a live run had, rebuilt from the spool's meta."""
    meta = reader.meta()
    run_id = str(meta.get("run_id") or run_dir.name)
    return RunInfo(str(meta.get("project") or run_dir.parent.name),
                   str(meta.get("name") or run_id), run_id, run_dir,
                   float(meta.get("started_at") or 0.0), tuple(meta.get("tags") or ()))


def deliver(run_dir: Path, factories: Mapping[str, Callable[[], Backend]], *,
            timeout: float | None = None, batch_size: int = 1000,
            on_progress: Callable[[Progress], None] | None = None) -> SyncResult:
    """Deliver ``run_dir`` to each backend until it has every event (or ``timeout``)."""
    reader = SpoolReader(run_dir)
    try:
        info = run_info(run_dir, reader)
        target = reader.last_seq()
        meta = reader.meta()
        status = str(meta.get("state") or "crashed")
        stop_orphaned_delivery(run_dir, meta)
        locks = {name: acquire_delivery_lock(run_dir, name) for name in factories}
        before = {name: reader.cursor(name).acked_seq for name in factories}
    finally:
        reader.close()
    reporter = Reporter()
    deadline = None if timeout is None else time.monotonic() + timeout
    workers = []
    for name, factory in factories.items():
        worker = DeliveryWorker(name, factory, info, reporter, batch_size=batch_size,
                                on_progress=on_progress, lock=locks[name])
        worker.finish(target, status if status in ("finished", "stopped") else "crashed",
                      deadline)
        workers.append(worker)
        worker.start()
    try:
        for worker in workers:
            while not worker.join(0.2):
                if deadline is not None and time.monotonic() > deadline:
                    worker.stop()
                    worker.join(1.0)
                    break
    except KeyboardInterrupt:
        for worker in workers:
            worker.stop()
        for worker in workers:
            worker.join(5.0)
        raise
    damage = sorted({error for worker in workers for error in worker.damage})
    where = {}
    for worker in workers:
        try:
            place = worker.backend.where() if worker.backend is not None else None
        except Exception:  # a plugin's where() must not fail a finished sync
            place = None
        if place:
            where[worker.name] = place
    acked = {w.name: w.acked for w in workers}
    # A sync of a live run (to a backend it does not use) delivers what was added while it
    # ran too: the target is then the last event delivered, never below what was acked.
    target = max([target, *acked.values()])
    return SyncResult(run_dir, target, acked,
                      reporter.problems(), damage, before, where,
                      {w.name: w.error or "" for w in workers if w.failed},
                      reporter.notes(), {w.name: w.quarantined for w in workers if w.quarantined})


def deliver_by_name(run_dir: Path, names: list[str],
                    options: Mapping[str, Mapping[str, Any]] | None = None,
                    cursors: Mapping[str, str] | None = None,
                    **kwargs: Any) -> SyncResult:
    """``deliver`` with backends looked up in the plugin registry. ``cursors`` maps a
    backend to the name its acknowledgements are kept under (default: its own name; a new
    destination of the same backend gets one of its own, see cli/sync.py)."""
    registry = get_registry()
    factories: dict[str, Callable[[], Backend]] = {}
    for name in names:
        opts = dict((options or {}).get(name, {}))
        spec = registry.backend(name, opts)
        factories[(cursors or {}).get(name, name)] = functools.partial(spec.factory, opts)
    return deliver(run_dir, factories, **kwargs)
