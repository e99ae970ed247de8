"""The durable local spool: one SQLite database (WAL) per run, written off the caller's thread.

Layout of a run directory (0700; files 0600)::

    <root>/<project>/<run_id>/spool.db     events, blobs, meta, attempts, superseded events
                                           (core/spool/attempts.py); written by the trainer
                                           only while it lives
    <root>/<project>/<run_id>/delivery.db  per-backend cursors and quarantine rows, written
                                           by delivery (core/spool/acks.py; a spool from
                                           before it keeps them in spool.db, still read)
    <root>/<project>/<run_id>/run.lock     held by the live process; free + "running" = crashed
    <root>/<project>/<run_id>/deliver-<backend>.lock   held by whoever delivers to that backend

Table ``quarantine`` (in delivery.db) lists events, or some keys of an event, a backend
refused for good: delivery moved past them; they stay in ``events``. New spools still get
an empty ``cursors`` table, which older trackmux versions expect.

Durability contract (docs/guarantees.md): the writer thread commits at least every
``COMMIT_INTERVAL`` seconds; a commit in WAL mode survives SIGKILL of the process (the
WAL frames are in the OS page cache). So by default every event whose ``log()`` returned
``DURABILITY_WINDOW`` seconds before a SIGKILL is in the spool. With
``durability="strict"`` ``log()`` returns only after its event is committed.

When the spool cannot be written (disk full, ``max_bytes`` reached, an I/O error, a write
lock held by another process), events wait in memory up to ``max_buffered`` events and
``max_buffered_bytes`` (estimated) and are then dropped and counted; the condition is
reported once (no traceback), retried every ``DISK_RETRY_INTERVAL``, and the count is
recorded in the run's meta and shown by ``trackmux runs``. ``durability="strict"`` waits
for a commit only while the spool is writable: while it is not, ``log()`` returns and the
event waits in memory like the others (a training run never blocks on a full disk).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
import stat
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from trackmux.core import settings
from trackmux.core.errors import RunFinishedError
from trackmux.core.events import (
    DeferredEvent,
    Event,
    ImageEvent,
    MetricsEvent,
    SamplesEvent,
    TableEvent,
    TextEvent,
)
from trackmux.core.spool import codec
from trackmux.core.spool.checkpoint import Checkpointer

log = logging.getLogger("trackmux")

SPOOL_FILE = "spool.db"
RUN_LOCK = "run.lock"
COMMIT_INTERVAL = 0.05
DURABILITY_WINDOW = 0.5
COMMIT_BATCH = 5000
#: A commit round takes the queue TAKE_CHUNK events at a time, encoding and inserting each
#: chunk before taking the next (one transaction for the round), so a caller held by
#: backpressure gets room after one chunk, not after the whole batch: a 4,000-event batch
#: takes 20-200 ms to encode and insert, which one log() waited out whole (issue 43 item 17).
TAKE_CHUNK = 64
# Backpressure: above HIGH_WATER queued events (~7 KB each for 100 floats) a caller waits
# for the writer to take the queue below it, so a caller faster than the disk costs bounded
# memory instead of gigabytes (benchmark B3). LOW_WATER wakes the writer early.
HIGH_WATER = 4000
LOW_WATER = 2000
#: One call waits at most BACKPRESSURE_HOLD, then goes on one event past the mark: the
#: writer's INSERT can sit 10-20 ms in I/O or off the CPU (a checkpoint's fsync, a loaded
#: machine), and one log() waited that long (issue 43 item 17). Above the mark a caller then
#: runs at most one call per hold, so the queue grows past HIGH_WATER only while the writer
#: takes nothing, by one event a hold (counted in ``holds_expired``).
BACKPRESSURE_HOLD = 0.003
#: A writer that moves nothing (takes, encodes or inserts no event) for BACKPRESSURE_WAIT of
#: held calls is stalled (blocked in I/O, another process's write lock): backpressure is off
#: until its next commit, and events wait in memory up to the buffer's bound.
BACKPRESSURE_WAIT = 0.5
DISK_RETRY_INTERVAL = 1.0
BUSY_TIMEOUT = 30.0  # how long SQLite waits for another process's write lock
#: How often the writer tries again for a write lock another process holds (SpoolWriter._begin)
LOCK_POLL = 0.0005
DEFAULT_MAX_BUFFERED_BYTES = 256 * 1024 * 1024
# While the spool is unwritable, each retry first writes PROBE_BYTES to a file beside the
# spool (and removes it): a disk still full is found without encoding a batch, whose bytes
# would double what the trainer holds (the queue plus its encoded copy). Once the probe
# passes, the first commit takes at most RECOVERY_BATCH events.
PROBE_FILE = ".probe"
PROBE_BYTES = 64 * 1024
RECOVERY_BATCH = 16

#: An index of the events by kind, made in new spools (by their writer): a run list reads
#: a run's findings (a handful of rows among 10,000s of metrics) through it instead of
#: scanning the whole table, 6.6 -> 0.7 ms for a 10,000-step run. (Its event count still
#: scans the table: that read is what notices a damaged page.) Spools written before it
#: are read as they are, with no index.
KIND_INDEX = "CREATE INDEX IF NOT EXISTS events_kind ON events(kind)"


def index_if_new(conn: sqlite3.Connection) -> None:
    """``KIND_INDEX`` in a spool that holds no event yet (an old spool opened again for a
    resumed run is left as it is: building an index there would stall the resume)."""
    if conn.execute("SELECT 1 FROM events LIMIT 1").fetchone() is None:
        conn.execute(KIND_INDEX)


SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, step INTEGER NOT NULL,
    time REAL NOT NULL, body BLOB NOT NULL, crc INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS blobs (hash TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS cursors (
    backend TEXT PRIMARY KEY, acked_seq INTEGER NOT NULL, remote_id TEXT,
    state BLOB NOT NULL, updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS attempts (
    number INTEGER PRIMARY KEY, started_at REAL NOT NULL, pid INTEGER NOT NULL,
    host TEXT NOT NULL, first_seq INTEGER NOT NULL, rewind_to INTEGER);
CREATE TABLE IF NOT EXISTS superseded (seq INTEGER PRIMARY KEY, attempt INTEGER NOT NULL);
"""


class CommitPacer:
    """When the writer thread commits: at a wake (``flush``, ``close``, new meta, a queue
    past ``LOW_WATER``, a strict ``append``) or ``interval`` seconds after its last round.
    One object owns both, so a test can hold commits on purpose (a pacer whose clock never
    runs: trackmux.testing.pacer) instead of hoping no thread wakes the writer."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def wake(self) -> None:
        """Ask for a commit round now (any thread; never blocks)."""
        self._event.set()

    def wait(self, interval: float) -> None:
        """Called by the writer thread between rounds: return at a wake or after ``interval``."""
        self._event.wait(interval)
        self._event.clear()


#: makes each new writer's pacer; trackmux.testing.pacer swaps it for a held one
new_pacer: Callable[[], CommitPacer] = CommitPacer


def make_private_dir(path: Path) -> None:
    """Create ``path`` (and parents) with mode 0700 for the directories we create."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    for created in (*missing, path):  # mkdir gives parents the umask's mode, not ``mode``
        os.chmod(created, 0o700)


def touch_private(path: Path) -> None:
    """Create ``path`` with mode 0600 if missing (SQLite's -wal/-shm inherit the mode)."""
    # O_NOFOLLOW: a spool.db replaced by a symlink must not redirect the run's writes.
    try:
        fd = os.open(path, os.O_CREAT | os.O_RDWR | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError(f"{path} is a symlink; a spool is a regular file of its own run"
                             ) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file")
    finally:
        os.close(fd)
    os.chmod(path, 0o600)


def connect(path: Path, readonly: bool = False) -> sqlite3.Connection:
    """A connection tuned for the spool (WAL, NORMAL sync, generous busy timeout)."""
    if readonly:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT,
                               check_same_thread=False)
    else:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, check_same_thread=False,
                               isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    return conn


#: What waits in the writer's queue: events, events the writer finishes
#: (:class:`DeferredEvent`), and a metrics event as one flat tuple ``(step, time, *keys,
#: *values)`` (``Run.log``, :func:`metrics_event`). A tuple that holds no container
#: leaves the garbage collector's lists at its first young collection, where a
#: ``MetricsEvent`` (or a tuple holding a dict) stays tracked until written: queued that
#: long, events were promoted to the oldest generation and died there, so full
#: collections of the whole heap ran every few thousand calls, each holding the GIL for
#: its whole length (12 ms with mlflow imported) inside a ``log()`` or in the writer
#: (issue 43 item 17).
Queued = Event | DeferredEvent | tuple[Any, ...]


def metrics_event(queued: tuple[Any, ...]) -> MetricsEvent:
    """The event of a queued ``(step, time, *keys, *values)``."""
    half = (len(queued) - 2) // 2
    return MetricsEvent(dict(zip(queued[2:2 + half], queued[2 + half:], strict=True)),
                        queued[0], queued[1])


def event_bytes(event: Queued) -> int:
    """A rough size in memory of one queued event (used only while the spool is unwritable)."""
    if isinstance(event, tuple):
        return 200 + 40 * len(event)
    if isinstance(event, DeferredEvent):
        return 200 + event.size()
    if isinstance(event, MetricsEvent):
        return 200 + 80 * len(event.data)
    if isinstance(event, ImageEvent):
        return 300 + len(event.png)
    if isinstance(event, TextEvent):
        return 200 + sys.getsizeof(event.text)
    if isinstance(event, SamplesEvent):
        return 200 + 64 * event.count * max(len(event.columns), 1) + sum(
            len(t.data) + 8 * len(t.lengths) for t in event.tokens)
    if isinstance(event, TableEvent):
        return 200 + sum(64 + (sys.getsizeof(c) if isinstance(c, str) else 24)
                         for row in event.rows for c in row)
    return 200 + len(orjson.dumps(getattr(event, "config", None)))


def is_disk_full(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "full" in text or "no space" in text or getattr(exc, "sqlite_errorcode", 0) == 13


@dataclass
class SpoolStatus:
    """What the writer knows about its own health (read by Run and the CLI)."""

    committed: int = 0
    dropped: int = 0
    full: str | None = None
    #: of ``dropped``: events the codec could not store (named in the log), not a full spool
    unstorable: int = 0
    #: of ``dropped``: events attached workers dropped (their buffer was full)
    attached: int = 0

    def drop_causes(self) -> str:
        """Why ``dropped`` events were dropped, in words (for the finish line)."""
        full = self.dropped - self.unstorable - self.attached
        parts = [f"{full} because the spool could not take them (full or unwritable)"
                 if full > 0 else "",
                 f"{self.unstorable} that could not be stored (named in the log above)"
                 if self.unstorable else "",
                 f"{self.attached} that attached workers could not send (their buffer was "
                 "full)" if self.attached else ""]
        return ", ".join(p for p in parts if p)


class SpoolWriter:
    """Owns the run's database for writing; ``append`` never does I/O."""

    def __init__(self, run_dir: Path, *, durability: str = "default",
                 max_bytes: int | None = None, max_buffered: int = 1_000_000,
                 on_commit: Callable[[int], None] | None = None,
                 max_buffered_bytes: int | None = None,
                 meta_source: Callable[[], dict[str, Any] | None] | None = None,
                 pacer: CommitPacer | None = None) -> None:
        if durability not in ("default", "strict"):
            raise ValueError(f"durability must be 'default' or 'strict', got {durability!r}")
        self.run_dir = run_dir
        self.path = run_dir / SPOOL_FILE
        self.strict = durability == "strict"
        self.max_bytes = max_bytes
        self.max_buffered = max_buffered
        self.max_buffered_bytes = settings.positive_int(
            "max_buffered_bytes", max_buffered_bytes, "TRACKMUX_MAX_BUFFERED_BYTES",
            DEFAULT_MAX_BUFFERED_BYTES)
        self._limit = max_buffered  # lowered from the bytes bound while the spool is unwritable
        self.status = SpoolStatus()
        self._on_commit = on_commit
        # asked at each commit for meta that changed (the run's bad-input counts)
        self._meta_source = meta_source
        make_private_dir(run_dir)
        touch_private(self.path)
        self._conn = connect(self.path)
        self._conn.executescript(SCHEMA)
        index_if_new(self._conn)
        # from here SQLite does not wait for a lock on this connection: _begin does
        self._conn.execute("PRAGMA busy_timeout = 0")
        # nor checkpoint inside a COMMIT of this thread: core/spool/checkpoint.py does
        self._conn.execute("PRAGMA wal_autocheckpoint = 0")
        self._checkpointer = Checkpointer(self.path)
        #: the largest value SQLite stores (SQLITE_LIMIT_LENGTH): a bigger event is dropped
        #: alone before the transaction, not with its whole batch
        limit = getattr(sqlite3, "SQLITE_LIMIT_LENGTH", None)  # Python >= 3.11
        getlimit = getattr(self._conn, "getlimit", None)
        self._max_value = (int(getlimit(limit)) if limit is not None and getlimit is not None
                           else 1_000_000_000)
        self._last_seq = self._conn.execute("SELECT coalesce(max(seq), 0) FROM events"
                                            ).fetchone()[0]
        self._queue: deque[Queued] = deque()
        self._lock = threading.Lock()
        self._appended = 0
        self._written = 0
        self._committed_cond = threading.Condition()
        self._pacer = pacer if pacer is not None else new_pacer()
        self._closing = False
        self._full_reported = False
        self._unstorable_reported = False
        self._dropped_recorded = 0
        self._retry = threading.Event()  # cuts a disk-full retry wait short on close
        #: events the writer has taken, encoded or inserted, ever: a waiting caller tells a
        #: slow writer (it moves) from a stalled one (it does not); written by one thread
        self._progress = 0
        self._pressure = True  # backpressure on; off after a stalled wait, on at a commit
        #: calls held by backpressure, and of them those that went on after
        #: BACKPRESSURE_HOLD with the queue still at the mark
        self.holds = 0
        self.holds_expired = 0
        self._stall_seen = -1  # the writer's progress when held calls last saw it move
        self._stall_since = 0.0  # ... and since when it has not moved (monotonic)
        self._last_held = float("-inf")
        self._round = 0  # events the current commit round takes in all (_commit_pending)
        self._meta_pending: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._run, name="trackmux-spool-writer",
                                        daemon=True)
        self._thread.start()

    # -- caller side -------------------------------------------------------------------
    def append(self, event: Queued) -> None:
        """Queue one event; in strict mode wait until it is committed. After ``close()``
        began it raises instead of queueing an event no writer would take. A
        :class:`DeferredEvent` is finished (``resolve``) on the writer's thread."""
        with self._lock:
            if self._closing:
                raise RunFinishedError(f"the spool {self.path} is closed; the run is finished")
            overflow = len(self._queue) >= self._limit
            if overflow:
                self.status.dropped += 1
            else:
                self._queue.append(event)
                self._appended += 1
                ticket = self._appended
        if overflow:  # reported outside the lock: no I/O while holding it
            self._report_full("in-memory buffer is full")
            return
        if self.strict:
            self._pacer.wake()
            with self._committed_cond:
                while (self._written < ticket and self._thread.is_alive()
                       and self.status.full is None):
                    self._committed_cond.wait(0.5)
        elif len(self._queue) >= LOW_WATER:
            self._pacer.wake()
            if len(self._queue) >= HIGH_WATER and self._pressure:
                self._backpressure()

    def _backpressure(self) -> None:
        """Wait until the writer took the queue below HIGH_WATER, at most
        ``BACKPRESSURE_HOLD``. It takes the queue a chunk at a time (``TAKE_CHUNK``), so a
        moving writer releases the caller within one chunk's encode and insert; a writer in
        I/O or off the CPU no longer holds one call for its whole stall (issue 43 item 17).
        Not while the spool cannot be written (events then wait in memory, then drop). A
        writer that moved nothing through ``BACKPRESSURE_WAIT`` of held calls is stalled,
        not slow: backpressure is off until its next commit. Slow is fine: a writer short
        of CPU (a loaded machine, the doctor's and delivery threads in this process) still
        moves, and callers held one hold per call keep the queue near the mark (issue 46)."""
        now = time.monotonic()
        with self._committed_cond:
            if (self._progress != self._stall_seen
                    or now - self._last_held > BACKPRESSURE_WAIT):  # moved, or a new episode
                self._stall_seen, self._stall_since = self._progress, now
            elif now - self._stall_since >= BACKPRESSURE_WAIT:
                self._pressure = False
                return
            self._last_held = now
            self.holds += 1
            deadline = now + BACKPRESSURE_HOLD
            while (len(self._queue) >= HIGH_WATER and self.status.full is None
                   and self._pressure and self._thread.is_alive()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.holds_expired += 1
                    return
                self._committed_cond.wait(remaining)

    def count_attached_drops(self, count: int) -> None:
        """Count ``count`` events that attached workers dropped before they reached this
        writer, in the run's ``dropped_events`` (recorded at the next commit, asked for now)."""
        with self._lock:
            self.status.dropped += count
            self.status.attached += count
        self._pacer.wake()

    def set_meta(self, **values: Any) -> None:
        """Record run metadata in the next commit (state, finished_at, ...)."""
        with self._lock:
            self._meta_pending.update(values)
        self._pacer.wake()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything appended so far is committed; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        target = self._appended
        if self._written < target:  # no wake for nothing: it would commit later events early
            self._pacer.wake()
        with self._committed_cond:
            while self._written < target and self._thread.is_alive():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._committed_cond.wait(0.05 if remaining is None else min(remaining, 0.05))
        return self._written >= target

    @property
    def last_seq(self) -> int:
        return int(self._last_seq)

    @property
    def queued(self) -> int:
        """Events appended but not committed (yet)."""
        with self._lock:
            return len(self._queue)

    def close(self, timeout: float | None = None) -> bool:
        """Commit what is queued (within ``timeout``) and stop the writer thread."""
        done = self.flush(timeout)
        with self._lock:  # from now on append() raises: nothing is queued unseen
            self._closing = True
        if not done and self.status.full is not None:
            # The spool cannot take them and the process is about to go: count them now
            # (the writer counts a batch it holds) so dropped_events and finish() say so.
            with self._lock:
                self.status.dropped += len(self._queue)
                self._queue.clear()
        self._retry.set()
        self._pacer.wake()
        self._thread.join(timeout if timeout is not None else None)
        return done and not self._thread.is_alive()

    # -- writer thread -----------------------------------------------------------------
    def _run(self) -> None:
        while True:
            self._pacer.wait(COMMIT_INTERVAL)
            closing = self._closing
            try:
                self._commit_pending()
            except Exception:  # never let the writer die silently
                log.exception("trackmux: spool writer failed")
                with contextlib.suppress(sqlite3.Error):  # leave no transaction open
                    self._conn.execute("ROLLBACK")
                time.sleep(DISK_RETRY_INTERVAL)
            if closing and not self._queue:
                break
        self._checkpointer.close()  # first: the writer's connection closes last, and so
        with contextlib.suppress(Exception):  # checkpoints and removes the WAL
            self._conn.close()

    def _round_limit(self) -> int:
        """The most events one commit round takes."""
        return COMMIT_BATCH * 4 if self.status.full is None else RECOVERY_BATCH

    def _take(self, limit: int | None = None) -> list[Queued]:
        """Up to ``limit`` (default: a round's limit) events, off the queue. A caller held
        by backpressure is woken now, not after the commit: the queue it waits on is drained
        here, and waiting for the commit too held one log() for the rest of this batch's
        commit and the whole next one (issue 34.9). Memory stays bounded: HIGH_WATER queued
        plus this round's batch in flight."""
        batch: list[Queued] = []
        queue = self._queue
        if limit is None:
            limit = self._round_limit()
        while queue and len(batch) < limit:
            batch.append(queue.popleft())
        self._progress += len(batch)
        if batch:
            with self._committed_cond:
                self._committed_cond.notify_all()
        return batch

    def _probe(self) -> str | None:
        """Whether the spool's filesystem takes a small write again: None if it does, else
        the reason. Costs one 64 KB write, not the encoding of a batch."""
        path = self.run_dir / PROBE_FILE
        try:
            fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC
                         | getattr(os, "O_NOFOLLOW", 0), 0o600)
            try:
                os.write(fd, b"\0" * PROBE_BYTES)
            finally:
                os.close(fd)
        except OSError as exc:
            reason = "disk full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "cannot write"
            return f"{reason} ({type(exc).__name__}: {exc})"
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        return None

    def _commit_pending(self) -> None:
        with self._lock:
            meta, self._meta_pending = self._meta_pending, {}
        if self._meta_source is not None:
            extra = self._meta_source()
            if extra:
                meta = {**meta, **extra}
        # This round writes the events queued now, not those the caller adds meanwhile (a
        # round that chased a fast caller would commit past the durability window); the
        # first chunk is taken here, the rest by _write as it goes.
        self._round = min(len(self._queue), self._round_limit())
        batch = self._take(min(self._round, TAKE_CHUNK))
        if not batch and not meta and self.status.dropped == self._dropped_recorded:
            return
        try:
            over_cap = self._over_cap()
        except OSError as exc:
            self._unwritable(batch, meta, f"cannot stat the spool ({exc})")
            return
        if over_cap:
            self._unwritable(batch, meta, f"size cap of {self.max_bytes} bytes reached")
            return
        if self.status.full is not None and batch:
            still = self._probe()
            if still is not None:
                self._unwritable(batch, meta, still)
                return
        failure = None
        try:
            self._write(batch, meta)
        except (sqlite3.Error, OSError) as exc:
            # Disk full, an I/O error (EIO), a write lock held past the busy timeout: the
            # batch goes back to the queue (never lost uncounted) and is retried.
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            reason = "disk full" if is_disk_full(exc) else "cannot write"
            failure = f"{reason} ({type(exc).__name__}: {exc})"
        if failure is not None:
            # Outside the except block: its traceback holds _write's frame, whose encoded
            # rows (a copy of the batch) would otherwise stay alive through the retry wait.
            self._unwritable(batch, meta, failure)
            return
        if self.status.full is not None:
            log.warning("trackmux: spool %s is writable again", self.path)
            self.status.full = None
            self._full_reported = False
            self._limit = self.max_buffered
        with self._committed_cond:
            self._written += len(batch)
            self._pressure = True
            self._committed_cond.notify_all()
        self.status.committed += len(batch)
        if batch and self._on_commit is not None:
            self._on_commit(self._last_seq)

    def _write(self, batch: list[Queued], meta: dict[str, Any]) -> None:
        """Commit ``batch`` and ``meta`` in one transaction. A non-empty ``batch`` is the
        round's first chunk: the rest of the round (``self._round`` events) is taken here a
        chunk at a time, each encoded and inserted before the next is taken, and appended to
        ``batch`` in place, so a failed round puts all of it back. The seq is read inside
        SQLite's write lock: another process may append too (the delivery process appends
        the doctor's findings, append_events below), so seq stays contiguous and in commit
        order whoever commits."""
        conn = self._conn
        self._begin()
        try:
            seq = max(self._last_seq, int(conn.execute(
                "SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]))
        except (sqlite3.DatabaseError, TypeError, ValueError):  # a damaged index: ours
            seq = self._last_seq
        done = 0
        nbytes = 0  # about what goes into the WAL, for the checkpointer
        while done < len(batch):
            encoded = self._encode(batch, done)
            done = len(batch)
            nbytes += sum(len(row[3]) + 40 + (len(row[4][1]) if row[4] is not None else 0)
                          for row in encoded)
            for *_, blob in encoded:
                if blob is not None:
                    conn.execute("INSERT OR IGNORE INTO blobs(hash, data) VALUES (?, ?)", blob)
            first = seq

            def rows(encoded: list[tuple[Any, ...]] = encoded, first: int = first
                     ) -> Iterator[tuple[Any, ...]]:
                """Made as SQLite takes them, so a waiting caller sees the insert move."""
                for number, (kind, step, ts, body, _blob) in enumerate(encoded, first + 1):
                    self._progress += 1
                    yield number, kind, step, ts, body, codec.row_crc(number, kind, step, ts,
                                                                      body)

            conn.executemany("INSERT INTO events(seq, kind, step, time, body, crc) "
                             "VALUES (?, ?, ?, ?, ?, ?)", rows())
            seq = first + len(encoded)
            if done < self._round:
                batch.extend(self._take(min(self._round - done, TAKE_CHUNK)))
        dropped = self.status.dropped
        if dropped:
            meta = {**meta, "dropped_events": dropped,
                    "dropped_unstorable": self.status.unstorable,
                    "dropped_attached": self.status.attached}
        for key, value in meta.items():
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                         (key, orjson.dumps(value)))
        conn.execute("COMMIT")
        self._last_seq = seq
        self._dropped_recorded = dropped
        self._checkpointer.committed(nbytes)
        self._restart_wal()

    def _restart_wal(self) -> None:
        """After a commit, when the checkpointer asks (its WAL is long): copy the frames
        since its last pass, so that the next transaction starts the WAL over. Tried again
        after each commit until every frame is copied; never while the checkpointer runs."""
        checkpointer = self._checkpointer
        if not checkpointer.restart_due or not checkpointer.lock.acquire(blocking=False):
            return
        try:
            busy, frames, copied = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)"
                                                      ).fetchone()
            checkpointer.restart_due = bool(busy) or frames != copied
        except sqlite3.Error:
            pass  # a full disk, damage: tried again after the next commit
        finally:
            checkpointer.lock.release()

    def _begin(self) -> None:
        """``BEGIN IMMEDIATE``, tried again every ``LOCK_POLL`` while another process holds
        the write lock, for up to ``BUSY_TIMEOUT``. SQLite's own busy handler sleeps 1, 2,
        5, 10, 15, 20, 25 ms between its tries, so a lock the delivery process held for a
        millisecond (its cursor) cost this writer, and a caller held by backpressure, 10 to
        20 ms (issue 43 item 17)."""
        deadline = time.monotonic() + BUSY_TIMEOUT
        while True:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                code = getattr(exc, "sqlite_errorcode", None)  # Python >= 3.11
                busy = (code & 0xFF == 5 if code is not None  # SQLITE_BUSY
                        else "locked" in str(exc))
                if not busy or time.monotonic() >= deadline:
                    raise
            time.sleep(LOCK_POLL)

    def _encode(self, batch: list[Queued], start: int) -> list[tuple[Any, ...]]:
        """The rows of ``batch[start:]``. One event that cannot be stored must not poison
        the round or the writer: it is dropped, counted and reported, before its insert."""
        encoded = []
        for i in range(start, len(batch)):
            queued = batch[i]
            self._progress += 1
            # a metrics tuple becomes its event here and dies young: kept in the batch it
            # would outlive the young collections (Queued)
            event = metrics_event(queued) if isinstance(queued, tuple) else queued
            try:
                if isinstance(event, DeferredEvent):
                    event = batch[i] = event.resolve()  # kept resolved if the batch is retried
                row, blob = codec.encode(event)
                codec.row_crc(0, *row)  # fails here, not mid-insert, on a bad step
                size = max(len(row[3]), len(blob[1]) if blob is not None else 0)
                if size > self._max_value:  # SQLite would refuse the whole transaction
                    raise ValueError(f"{size} bytes encoded, above SQLite's limit of "
                                     f"{self._max_value} for one value")
                encoded.append((*row, blob))  # flat: untracked by the collector at once
            except Exception as exc:
                self.status.dropped += 1
                self.status.unstorable += 1
                if not self._unstorable_reported:
                    self._unstorable_reported = True
                    log.error("trackmux: a %s event%s at step %s could not be stored and is "
                              "dropped alone, the rest of its batch is kept (reported once, "
                              "counted in dropped_events): %s: %s", event.kind,
                              f" {getattr(event, 'key', '')!r}" if hasattr(event, "key")
                              else "", event.step, type(exc).__name__, exc)
        return encoded

    def _unwritable(self, batch: list[Queued], meta: dict[str, Any],
                    reason: str) -> None:
        self._report_full(reason)
        with self._committed_cond:  # strict-mode callers stop waiting for this commit
            self._committed_cond.notify_all()
        self._requeue(batch, {})
        self._write_meta_only(meta)
        self._retry.wait(DISK_RETRY_INTERVAL)

    def _write_meta_only(self, meta: dict[str, Any]) -> None:
        """While events cannot be stored, still record state and the drop count: a meta
        row is tiny (the cap does not apply to it; on a full disk it may still fit)."""
        try:
            self._write([], meta)
        except (sqlite3.Error, OSError):
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            self._requeue([], meta)

    def _requeue(self, batch: list[Queued], meta: dict[str, Any]) -> None:
        with self._lock:
            if self._closing and self.status.full is not None:
                self.status.dropped += len(batch)  # close() gave up on them
                batch = []
            self._queue.extendleft(reversed(batch))
            for key, value in meta.items():
                self._meta_pending.setdefault(key, value)
            self._limit = self._bytes_limit()
            overflow = len(self._queue) - self._limit
            for _ in range(max(0, overflow)):
                self._queue.pop()
                self.status.dropped += 1

    def _bytes_limit(self) -> int:
        """How many events fit in ``max_buffered_bytes``, from the oldest and newest queued
        events (a deque is O(1) at its ends; this runs under the append lock)."""
        queue = self._queue
        if not queue:
            return self.max_buffered
        ends = min(32, len(queue))
        sample = ([event_bytes(queue[i]) for i in range(ends)]
                  + [event_bytes(queue[-1 - i]) for i in range(ends)])
        average = max(1, sum(sample) // len(sample))
        return max(1, min(self.max_buffered, self.max_buffered_bytes // average))

    def _over_cap(self) -> bool:
        if self.max_bytes is None:
            return False
        size = sum(p.stat().st_size for p in self.run_dir.glob(SPOOL_FILE + "*"))
        return size >= self.max_bytes

    def _report_full(self, reason: str) -> None:
        self.status.full = reason
        if not self._full_reported:
            self._full_reported = True
            log.error("trackmux: spool %s cannot take more events: %s. Training continues; "
                      "up to %d events (%d MB) wait in memory and are retried, then new "
                      "events are dropped and counted.", self.path, reason, self.max_buffered,
                      self.max_buffered_bytes // 2**20)


def append_events(run_dir: Path, events: list[Event],
                  meta: dict[str, Any] | None = None) -> int:
    """Append ``events`` to a run's spool from a process that is not the run's writer (the
    delivery process appending the doctor's findings, ``trackmux import``). One transaction
    under SQLite's write lock, seq read inside it, so the run's own writer (which does the
    same) and this never collide. ``meta`` keys are written in the same transaction: an
    importer's cursors commit with the events past them or not at all. Returns the last seq
    (0 if nothing was written). Raises ``sqlite3.Error`` or ``OSError`` when the spool cannot
    be written; the caller reports it."""
    if not events and not meta:
        return 0
    encoded = [codec.encode(event) for event in events]
    conn = connect(run_dir / SPOOL_FILE)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            seq = int(conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])
            rows = []
            for (kind, step, ts, body), blob in encoded:
                if blob is not None:
                    conn.execute("INSERT OR IGNORE INTO blobs(hash, data) VALUES (?, ?)", blob)
                seq += 1
                rows.append((seq, kind, step, ts, body, codec.row_crc(seq, kind, step, ts, body)))
            conn.executemany("INSERT INTO events(seq, kind, step, time, body, crc) "
                             "VALUES (?, ?, ?, ?, ?, ?)", rows)
            if meta:
                conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                                 [(key, orjson.dumps(value)) for key, value in meta.items()])
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        return seq
    finally:
        conn.close()
