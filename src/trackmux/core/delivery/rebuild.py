"""Rewriting a backend's acknowledged output from the spool, when that output is gone.

Core delivers only what a backend has not acknowledged. A backend that finds its own
output deleted, truncated or taken by another run (a file, an event file) cannot get the
earlier events from core's cursor; it reads them here, in spool order, adapted with the
same fallbacks as a live delivery, and writes them again instead of padding or leaving a
hole.
"""

from __future__ import annotations

from collections.abc import Iterator

from trackmux.core.backends.contract import Backend, RunInfo
from trackmux.core.delivery import fallbacks
from trackmux.core.events import Event


def acknowledged_batches(run: RunInfo, backend: Backend, upto: int,
                         size: int = 1000) -> Iterator[list[Event]]:
    """Events 1..``upto`` of ``run``'s spool as ``backend`` takes them, in batches."""
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run.run_dir)
    after = 0
    try:
        while after < upto:
            batch = reader.read(after, size)
            if batch.upto <= after:
                return
            events = [e for e in batch.events if e.seq <= upto]
            adapted = fallbacks.adapt(events, backend, lambda kind, message: None)
            if adapted:
                yield adapted
            after = batch.upto
    finally:
        reader.close()
