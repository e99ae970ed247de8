"""``trackmux ui postgresql://...``: the team store's runs as local spool replicas, kept
up to date on a thread, so the UI serves them with the code that serves spools.

A cold start must not wait for every event (100 runs of 10k steps are 1M rows to
copy), so the mirror fills the replicas in an order the UI can show at once:

1. every run's meta first, with its first ``FIRST_CHUNK`` events (a few queries for all
   runs, and one replica write each): the run list has every run, with host, user and
   state, and a chart a beginning of each, within the first round;
2. then events, in bounded chunks per run (``FIRST_CHUNK`` growing to ``CHUNK``), runs
   that received fewer chunks first, running and most recently active runs first among
   equals: every run soon has a beginning to chart, and one huge run does not hold the
   others back; a round copies for about ``ROUND_BUDGET`` seconds, then polls again;
3. a run whose replica has caught up is live: its new events are copied first in every
   round, before any backlog, so a step committed on another machine is in the replica
   within ``POLL`` seconds plus a round, also while the backlog is copied.

The UI's refresh picks up each replica's growth like a growing spool. Every
``POLL`` seconds each run's highest seq and state are read (one query, an index lookup
per run). Only SELECTs are sent: the UI runs with a read-only role. A store that goes
away is retried; the replicas stay.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from trackmux.core.spool.writer import SPOOL_FILE
from trackmux.readers.base import RunEntry

log = logging.getLogger("trackmux")
POLL = 0.5
FIRST_CHUNK = 64  # events of a run's first chunk: a beginning to chart, for every run soon
CHUNK = 4000  # at most this many events of one run per turn
ROUND_BUDGET = 0.4  # seconds of backlog copying per round, then live runs again
LIVE_CHUNK = 10 * CHUNK  # a live run's burst (a backfill) is copied over several rounds


class StoreMirror:
    def __init__(self, dsn: str, root: Path | None = None, poll: float = POLL) -> None:
        from trackmux.store.read import StoreSource, replica_root

        self.dsn = dsn
        self.root = root if root is not None else replica_root(dsn)
        self.poll = poll
        self.source = StoreSource(dsn)  # fails now on bad credentials, not later
        self._entries: dict[str, RunEntry] = {}  # by store id, as last replicated
        self._states: dict[str, str] = {}  # the state each run had then (as marks() says)
        self._copied: dict[str, int] = {}  # highest seq each replica holds
        self._turns: dict[str, int] = {}  # chunks each run received while catching up
        self._live: set[str] = set()  # runs whose replica caught up once
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        self.rounds = 0
        #: whether the last round left events to copy (the next round then comes at once)
        self.pending = False
        #: called before each backlog chunk: the UI's Store.step_aside, so a request in
        #: flight is not starved by copying (one process, one GIL)
        self.step_aside: Callable[[], None] | None = None

    @property
    def behind(self) -> int:
        """How many runs' replicas have not caught up with the store once yet."""
        return sum(1 for ref in self._entries if ref not in self._live)

    def sync_once(self, budget: float | None = ROUND_BUDGET) -> int:
        """One round: the meta of new or changed runs, the new events of live runs, then
        backlog chunks for about ``budget`` seconds (0: none; None: until every replica
        has caught up). Returns how many runs moved."""
        from trackmux.store.read import replica_folder

        marks = self.source.marks()
        stale = [int(ref) for ref, (_, state) in marks.items()
                 if ref not in self._entries or self._states.get(ref) != state]
        moved = 0
        entries = self.source.runs(ids=stale, counts=False) if stale else []
        # a run without a replica gets its first chunk with its meta: every such run's
        # first events in two queries (not two per run), read before the history that
        # marks them
        fresh = [int(e.ref) for e in entries if e.ref not in self._entries
                 and not (replica_folder(e, self.root) / SPOOL_FILE).exists()]
        firsts = self.source.first_events(fresh, FIRST_CHUNK) if fresh else {}
        history = self.source.history(stale) if stale else {}
        for entry in entries:
            # meta, attempts and marks (and a new run's first chunk): the list shows the
            # run, and a chart its beginning, before the rest of its events is copied
            first = firsts.get(entry.ref)
            self._copied[entry.ref] = self.source.copy_forward(
                entry, replica_folder(entry, self.root), limit=0,
                history=history.get(entry.ref, ([], [])), events=first)
            if first:
                self._turns[entry.ref] = max(1, self._turns.get(entry.ref, 0))
            self._entries[entry.ref] = entry
            self._states[entry.ref] = marks[entry.ref][1]
            moved += 1
        due = [ref for ref, (seq, _) in marks.items()
               if ref in self._entries and self._copied.get(ref, 0) < seq]
        live = [ref for ref in due if ref in self._live]
        backlog = sorted((ref for ref in due if ref not in self._live),
                         key=lambda ref: (self._turns.get(ref, 0),
                                          _recency(self._entries[ref])))
        started = time.monotonic()
        for ref in live + backlog:
            if (budget is not None and ref not in self._live
                    and (budget <= 0 or time.monotonic() - started > budget)):
                break
            if self.step_aside is not None and ref not in self._live:
                self.step_aside()
            entry = self._entries[ref]
            turns = self._turns.get(ref, 0)
            limit = (None if budget is None else LIVE_CHUNK if ref in self._live
                     else min(CHUNK, FIRST_CHUNK << turns))
            self._copied[ref] = self.source.copy_forward(
                entry, replica_folder(entry, self.root), limit=limit)
            self._turns[ref] = turns + 1
            moved += 1
        self.pending = False
        for ref, (seq, _) in marks.items():
            if ref in self._entries and self._copied.get(ref, 0) >= seq:
                self._live.add(ref)
            else:
                self.pending = True
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
            # a backlog is copied round after round; caught up, poll at the pace
            self._stop.wait(0.02 if self.pending and self.error is None else self.poll)

    def _reconnect(self) -> None:
        from trackmux.store.read import StoreSource

        try:
            self.source.close()
            self.source = StoreSource(self.dsn)
        except Exception as exc:
            log.debug("trackmux ui: store still unreachable: %s", exc)

    def start(self, wait: bool = False) -> StoreMirror:
        """Replicate every run's meta now (a few ms a run: the server's first run list
        then has them all), then copy their events on a thread; ``wait``: copy every run
        completely first."""
        self.sync_once(budget=None if wait else 0.0)
        self._thread = threading.Thread(target=self._loop, name="trackmux-store-mirror",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self.source.close()


def _recency(entry: RunEntry) -> tuple[int, float]:
    """Sort key: running runs first, then the most recently finished or started."""
    ended = entry.finished_at
    if entry.state == "running" or ended is None:
        return (0, -(entry.started_at or 0.0))
    return (1, -float(ended))
