"""What delivery writes about a run, in a file of its own: ``delivery.db`` beside ``spool.db``.

Why a second file: the trainer's spool writer and the run's delivery process used to share
``spool.db``'s one write lock, the delivery process to record its cursors. It runs in the
idle scheduling class, so when the OS took the CPU from it while it held that lock (on a
busy machine it is the first to lose it), the trainer's writer waited for as long as it
was off the CPU, and backpressure held the trainer's ``log()``: a priority inversion
(docs/performance.md, B12 round 4: one hold of 71.9 ms). With the cursors and quarantine
rows here, ``spool.db`` has one writer while the trainer lives (in WAL mode a reader never
waits for a writer, nor a writer for a reader), and delivery contends only with delivery.

A cursor (acknowledged seq, remote id, backend state) is still one row written in one
transaction, so delivery stays exactly once. Spools written before this file existed keep
their cursors and quarantine rows in ``spool.db``; they are read as a fallback (a backend's
cursor is the newer of its two rows), never moved or rewritten.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any

import orjson

from trackmux.core.errors import SpoolUnsafeError
from trackmux.core.spool.writer import connect, touch_private

DELIVERY_FILE = "delivery.db"

SCHEMA = """
CREATE TABLE IF NOT EXISTS cursors (
    backend TEXT PRIMARY KEY, acked_seq INTEGER NOT NULL, remote_id TEXT,
    state BLOB NOT NULL, updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS quarantine (
    backend TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, keys BLOB NOT NULL,
    reason TEXT NOT NULL, time REAL NOT NULL, PRIMARY KEY (backend, seq));
"""

#: a cursor row as stored: (backend, acked_seq, remote_id, state, updated)
CursorRow = tuple[Any, ...]
#: a quarantine row as stored: (backend, seq, kind, keys, reason, time)
QuarantineRow = tuple[Any, ...]


class DeliveryFile:
    """The run's ``delivery.db``: created by the first write (a run nobody delivered, or
    one read by ``trackmux runs``, gets none), read when present."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / DELIVERY_FILE
        self._conn: sqlite3.Connection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _open(self, create: bool) -> sqlite3.Connection | None:
        """The connection; None when the file does not exist and ``create`` is false."""
        if self._conn is not None:
            return self._conn
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            if not create:
                return None
        else:
            if not stat.S_ISREG(info.st_mode):
                raise SpoolUnsafeError(f"{self.path} is not a regular file; refusing to read "
                                       "or acknowledge into it")
        if create:
            touch_private(self.path)  # 0600, never through a symlink
        conn = connect(self.path)
        # a few rows rewritten after every batch: a short WAL, cut back after each
        # checkpoint, so the file stays a few pages (it shares a full disk with the spool)
        conn.execute("PRAGMA wal_autocheckpoint = 16")
        conn.execute("PRAGMA journal_size_limit = 65536")
        conn.text_factory = lambda data: data.decode("utf-8", "replace")
        conn.executescript(SCHEMA)
        self._conn = conn
        return conn

    # -- reads (nothing is created) -----------------------------------------------------
    def cursor_rows(self) -> list[CursorRow]:
        conn = self._open(create=False)
        if conn is None:
            return []
        return conn.execute("SELECT backend, acked_seq, remote_id, state, updated "
                            "FROM cursors").fetchall()

    def quarantine_rows(self, backend: str | None = None) -> list[QuarantineRow]:
        conn = self._open(create=False)
        if conn is None:
            return []
        sql = "SELECT backend, seq, kind, keys, reason, time FROM quarantine"
        if backend is None:
            return conn.execute(sql).fetchall()
        return conn.execute(sql + " WHERE backend = ?", (backend,)).fetchall()

    # -- writes ---------------------------------------------------------------------------
    def _writable(self) -> sqlite3.Connection:
        conn = self._open(create=True)
        if conn is None:  # _open creates the file, so this is not reached
            raise FileNotFoundError(self.path)
        return conn

    def ack(self, backend: str, seq: int, remote_id: str | None,
            state: dict[str, Any]) -> None:
        """``backend`` has every event up to ``seq``: one row, one transaction."""
        self._writable().execute(
            "INSERT OR REPLACE INTO cursors(backend, acked_seq, remote_id, state, updated) "
            "VALUES (?, ?, ?, ?, ?)", (backend, seq, remote_id, orjson.dumps(state), time.time()))

    def quarantine(self, backend: str, seq: int, kind: str, keys: tuple[str, ...],
                   reason: str) -> None:
        self._writable().execute(
            "INSERT OR REPLACE INTO quarantine(backend, seq, kind, keys, reason, time) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (backend, seq, kind, orjson.dumps(list(keys)), reason[:2000], time.time()))

    def unquarantine(self, backend: str, seqs: list[int]) -> None:
        conn = self._open(create=False)
        if conn is None:
            return
        conn.executemany("DELETE FROM quarantine WHERE backend = ? AND seq = ?",
                         [(backend, seq) for seq in seqs])
