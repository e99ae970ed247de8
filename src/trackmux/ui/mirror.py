"""``trackmux ui postgresql://...``: the team store's runs as local spool replicas, kept
up to date on a thread, so the UI serves them with the code that serves spools.

Every ``POLL`` seconds each run's highest seq and state are read from the store (one
query, an index lookup per run); each run that moved is copied forward from where its
replica ended (only new rows).
A step committed on another machine is therefore in the replica within ``POLL`` seconds
plus one query, and the UI picks it up at its next refresh. Only SELECTs are sent: the UI
runs with a read-only role. A store that goes away is retried; the replicas stay.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

log = logging.getLogger("trackmux")
POLL = 0.5


class StoreMirror:
    def __init__(self, dsn: str, root: Path | None = None, poll: float = POLL) -> None:
        from trackmux.store.read import StoreSource, replica_root

        self.dsn = dsn
        self.root = root if root is not None else replica_root(dsn)
        self.poll = poll
        self.source = StoreSource(dsn)  # fails now on bad credentials, not later
        self._seen: dict[str, tuple[int, str]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        self.rounds = 0

    def sync_once(self) -> int:
        """Bring every changed run's replica up to date; returns how many moved."""
        marks = self.source.marks()
        changed = [int(ref) for ref, mark in marks.items() if self._seen.get(ref) != mark]
        moved = 0
        for entry in self.source.runs(ids=changed) if changed else []:
            self.source.replica(entry, self.root)
            self._seen[entry.ref] = marks[entry.ref]
            moved += 1
        self.rounds += 1
        return moved

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync_once()
                self.error = None
            except Exception as exc:  # the store is down or restarting: keep what we have
                if self.error is None:
                    log.warning("trackmux ui: cannot read the store (%s: %s); retrying",
                                type(exc).__name__, exc)
                self.error = f"{type(exc).__name__}: {exc}"
                self._reconnect()
            self._stop.wait(self.poll)

    def _reconnect(self) -> None:
        from trackmux.store.read import StoreSource

        try:
            self.source.close()
            self.source = StoreSource(self.dsn)
        except Exception as exc:
            log.debug("trackmux ui: store still unreachable: %s", exc)

    def start(self, wait: bool = True) -> StoreMirror:
        """Start polling; ``wait``: copy every run once first (the first page then shows
        them all), else the runs appear as their replicas are made."""
        if wait:
            self.sync_once()
        self._thread = threading.Thread(target=self._loop, name="trackmux-store-mirror",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self.source.close()
