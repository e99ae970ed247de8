"""Reading a spool: events in order, meta, per-backend cursors, and damage reported
instead of crashing. Also the one place acknowledgements (cursor rows) and quarantine rows
are written: into the run's ``delivery.db`` (core/spool/acks.py), never into ``spool.db``,
whose one writer while the trainer lives is the trainer.

Every row carries a CRC over its seq, kind, step, time and body; images are checked
against their content hash. A damaged page falls back to row-by-row reads, so a reader
always moves past damage and records it in :attr:`SpoolReader.damage`.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from trackmux.core.errors import SpoolUnsafeError
from trackmux.core.events import Event
from trackmux.core.spool import attempts as attempts_mod
from trackmux.core.spool import codec
from trackmux.core.spool.acks import DeliveryFile, QuarantineRow
from trackmux.core.spool.attempts import Attempt
from trackmux.core.spool.writer import SCHEMA, SPOOL_FILE, connect

# A damaged file can also fail with a UnicodeDecodeError (of SQLite's error message).
_READ_ERRORS = (sqlite3.DatabaseError, UnicodeDecodeError)
NOT_A_SPOOL = "no spool tables: empty, half-written or not a trackmux spool"

@dataclass(frozen=True)
class Cursor:
    backend: str
    acked_seq: int
    remote_id: str | None
    state: dict[str, Any]
    updated: float


@dataclass(frozen=True)
class Quarantined:
    """An event (or some of its keys: ``keys``) that ``backend`` refused for good."""

    backend: str
    seq: int
    kind: str
    keys: tuple[str, ...]
    reason: str
    time: float


@dataclass(frozen=True)
class Batch:
    """Events read from the spool; ``upto`` is the highest seq examined (damaged rows
    included), so a reader moves past damage instead of stalling on it."""

    events: list[Event]
    upto: int
    #: rows of the kinds asked ``raw``, CRC-checked but not decoded: (seq, step, time,
    #: body), in seq order (the UI decodes metrics bodies in bulk, runcache.py)
    raw: list[tuple[int, int, float, bytes]] = field(default_factory=list)


@dataclass
class Damage:
    """What a reader could not recover, reported instead of crashing."""

    bad_rows: list[int]
    errors: list[str]

    def __bool__(self) -> bool:
        return bool(self.bad_rows or self.errors)


def _has_events_table(path: Path) -> bool:
    """Whether ``path`` already holds a spool's tables (asked read-only: opening a file
    read-write in WAL mode writes a header into it). A damaged header answers True, so
    the reader opens it the usual way and reports what it can read."""
    if os.path.getsize(path) == 0:
        return False
    try:
        probe = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            return bool(probe.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                                      "AND name = 'events'").fetchone())
        finally:
            probe.close()
    except _READ_ERRORS:
        return True


class SpoolReader:
    """Reads events, meta and cursors; writes cursors (acknowledgements) and quarantine
    rows into ``delivery.db`` only (``mark_crashed`` and ``mark_pruned`` change the meta of
    a run whose trainer is gone)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / SPOOL_FILE
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            raise FileNotFoundError(f"no spool at {self.path}") from None
        if not stat.S_ISREG(info.st_mode):
            kind = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file"
            raise SpoolUnsafeError(f"{self.path} is {kind}; refusing to read or acknowledge "
                                   "into it (a spool is a regular file inside its run folder)")
        self.damage = Damage([], [])
        self._delivery = DeliveryFile(run_dir)
        self._tables = True  # False: no spool tables, so every "no such table" is implied
        if not _has_events_table(self.path):
            # empty, half-created or not a spool: read it as it is, never write tables into it
            self.damage.errors.append(NOT_A_SPOOL)
            self._tables = False
            self._conn = connect(self.path, readonly=True)
            self._conn.text_factory = lambda data: data.decode("utf-8", "replace")
            return
        try:
            self._conn = connect(self.path)
        except _READ_ERRORS as exc:  # a damaged header: read what can be read
            self.damage.errors.append(f"open: {exc}")
            self._conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False,
                                         isolation_level=None)
        # a flipped byte in a TEXT column must not raise UnicodeDecodeError mid-read
        self._conn.text_factory = lambda data: data.decode("utf-8", "replace")
        try:
            self._conn.executescript(SCHEMA)
        except _READ_ERRORS as exc:
            self.damage.errors.append(f"schema: {exc}")

    def close(self) -> None:
        self._conn.close()
        self._delivery.close()

    def meta(self) -> dict[str, Any]:
        try:
            rows = self._conn.execute("SELECT key, value FROM meta").fetchall()
        except _READ_ERRORS as exc:
            self._note(f"meta: {exc}")
            return {}
        out = {}
        for key, value in rows:
            try:
                out[key] = orjson.loads(value)
            except orjson.JSONDecodeError:
                self._note(f"meta {key!r} is unreadable")
        return out

    def mark_crashed(self) -> bool:
        """Record that the process that wrote this run is gone without finishing (used by
        the delivery process when its trainer dies). Only a "running" run changes."""
        now = orjson.dumps(time.time())
        with self._conn:
            cursor = self._conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'state' AND value = ?",
                (orjson.dumps("crashed"), orjson.dumps("running")))
            changed = cursor.rowcount > 0
            if changed:
                self._conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES "
                                   "('crashed_at', ?)", (now,))
        return changed

    def mark_pruned(self, reason: str, by: str) -> str | None:
        """Record that ``by`` (a sweep agent) stopped this run on purpose, for ``reason``
        (the doctor's finding, a pruner's verdict): state "pruned", whatever the stopped
        trainer wrote last ("failed" from its SIGTERM handler, "running" when it was
        killed, "crashed" once its delivery process noticed). Called after the trainer
        exited; the delivery process only ever changes "running". Returns the state the
        run had before."""
        now = orjson.dumps(time.time())
        with self._conn:
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'state'").fetchone()
            before = orjson.loads(row[0]) if row else None
            self._conn.executemany(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                [("state", orjson.dumps("pruned")), ("pruned_at", now),
                 ("pruned_reason", orjson.dumps(reason)), ("pruned_by", orjson.dumps(by)),
                 ("state_before_pruned", orjson.dumps(before))])
        return before if isinstance(before, str) else None

    def last_seq(self) -> int:
        try:
            return int(self._conn.execute("SELECT coalesce(max(seq), 0) FROM events"
                                          ).fetchone()[0])
        except _READ_ERRORS as exc:
            self._note(f"events index: {exc}")
            return self._probe_last_seq()

    def count(self, after: int = 0) -> int:
        try:
            # the table itself, not the kind index: the run list's count reads every page
            # of the events, and so notices a damaged one (tests/reliability)
            return int(self._conn.execute("SELECT count(*) FROM events WHERE seq > ?",
                                          (after,)).fetchone()[0])
        except _READ_ERRORS as exc:
            self._note(f"count: {exc}")
            return max(0, self.last_seq() - after)

    def kind_counts(self) -> dict[str, int]:
        try:
            return dict(self._conn.execute("SELECT kind, count(*) FROM events GROUP BY kind"))
        except _READ_ERRORS as exc:
            self._note(f"kind counts: {exc}")
            return {}

    def read(self, after: int, limit: int = 1000, skip: frozenset[str] = frozenset(),
             raw: frozenset[str] = frozenset()) -> Batch:
        """Up to ``limit`` intact events with seq > ``after``, in order, and the highest seq
        examined. Damaged rows are skipped and recorded in ``damage``; a damaged page falls
        back to row-by-row reads. Kinds in ``skip`` are passed over undecoded (a report
        that reads samples per step does not decode every step's payload); rows of the
        kinds in ``raw`` are checked but returned undecoded in ``Batch.raw``."""
        try:
            rows = self._conn.execute(
                "SELECT e.seq, e.kind, e.step, e.time, e.body, e.crc, s.seq FROM events e "
                "LEFT JOIN superseded s ON s.seq = e.seq WHERE e.seq > ? "
                "ORDER BY e.seq LIMIT ?", (after, limit)).fetchall()
        except _READ_ERRORS as exc:
            self._note(f"events after {after}: {exc}")
            return self._salvage(after, limit)
        upto = rows[-1][0] if rows else after
        # superseded events (core/spool/attempts.py) are passed over, live and offline alike
        live = [r[:6] for r in self._in_key_range(rows, after, upto)
                if r[6] is None and r[1] not in skip]
        if not raw:
            return Batch(self._decode_rows(live), upto)
        undecoded = []
        for seq, kind, step, ts, body, crc in live:
            if kind not in raw:
                continue
            if isinstance(body, bytes) and codec.crc_ok(seq, kind, step, ts, body, crc):
                undecoded.append((seq, step, ts, body))
            else:
                self._bad(seq, "checksum mismatch")
        return Batch(self._decode_rows([r for r in live if r[1] not in raw]), upto,
                     undecoded)

    def _in_key_range(self, rows: list[tuple[Any, ...]], after: int,
                      upto: int) -> list[tuple[Any, ...]]:
        """The rows a sound b-tree walk would give: each seq once, in (after, upto].

        A damaged interior page can link one leaf page twice or out of place; SQLite then
        walks it twice and returns rows again (CRC-intact, so nothing else catches them).
        Rows outside the range come again in the read that reaches their key, if any can."""
        seen: set[int] = set()
        out, stray = [], []
        for row in rows:
            seq = row[0]
            if not isinstance(seq, int) or seq in seen or not after < seq <= upto:
                stray.append(seq)
                continue
            seen.add(seq)
            out.append(row)
        if stray:
            self._note(f"{len(stray)} rows after seq {after} read again or out of place "
                       f"(damaged page links), first {stray[0]}")
        return out

    def attempts(self) -> list[Attempt]:
        """The run's attempts, oldest first ([] for a spool from before attempts)."""
        try:
            return attempts_mod.read(self._conn)
        except (*_READ_ERRORS, ValueError, TypeError) as exc:  # a damaged attempts page
            self._note(f"attempts: {type(exc).__name__}: {exc}")
            return []

    def superseded_count(self) -> int:
        try:
            return int(self._conn.execute("SELECT count(*) FROM superseded").fetchone()[0])
        except _READ_ERRORS as exc:
            self._note(f"superseded: {exc}")
            return 0

    def superseded_marks(self) -> list[tuple[int, int]]:
        """(seq, attempt) of every superseded event: what a store copies to mark them."""
        try:
            return [(int(seq), int(attempt)) for seq, attempt in self._conn.execute(
                "SELECT seq, attempt FROM superseded ORDER BY seq")]
        except _READ_ERRORS as exc:
            self._note(f"superseded: {exc}")
            return []

    def iter_events(self, after: int = 0, page: int = 2000,
                    skip: frozenset[str] = frozenset()) -> Iterator[Event]:
        """Every intact event after ``after`` (for show, report and export), except the
        kinds in ``skip``."""
        while True:
            batch = self.read(after, page, skip)
            yield from batch.events
            if batch.upto <= after:
                return
            after = batch.upto

    def _decode_rows(self, rows: list[tuple[Any, ...]]) -> list[Event]:
        events: list[Event] = []
        for seq, kind, step, ts, body, crc in rows:
            if not isinstance(body, bytes) or not codec.crc_ok(seq, kind, step, ts, body, crc):
                self._bad(seq, "checksum mismatch")
                continue
            try:
                blob = None
                ref = codec.blob_ref(kind, body)
                if ref is not None:
                    found = self._conn.execute("SELECT data FROM blobs WHERE hash = ?",
                                               (ref,)).fetchone()
                    blob = found[0] if found else None
                    if blob is not None and not codec.blob_ok(ref, blob):
                        self._bad(seq, f"image data {ref[:12]} fails its hash check")
                        continue
                events.append(codec.decode(seq, kind, step, ts, body, blob))
            except Exception as exc:
                self._bad(seq, f"{type(exc).__name__}: {exc}")
        return events

    def config_events(self, before: int) -> list[Event]:
        """The config events with seq < ``before``, in order (to rebuild the merged config)."""
        try:
            rows = self._conn.execute(
                "SELECT seq, kind, step, time, body, crc FROM events WHERE kind = 'config' "
                "AND seq < ? ORDER BY seq", (before,)).fetchall()
        except _READ_ERRORS as exc:
            self._note(f"config events: {exc}")
            return []
        return self._decode_rows(rows)

    def events_of_kind(self, kind: str) -> list[Event]:
        """Every intact, not superseded event of one ``kind``, in order (added for the
        doctor: the findings a run already has, without decoding the whole spool)."""
        try:
            rows = self._conn.execute(
                "SELECT e.seq, e.kind, e.step, e.time, e.body, e.crc FROM events e "
                "LEFT JOIN superseded s ON s.seq = e.seq WHERE e.kind = ? AND s.seq IS NULL "
                "ORDER BY e.seq", (kind,)).fetchall()
        except _READ_ERRORS as exc:
            self._note(f"{kind} events: {exc}")
            return []
        return self._decode_rows(rows)

    def _salvage(self, seq: int, limit: int) -> Batch:
        """Read row by row past a damaged page; give up at the last readable seq."""
        last = self._probe_last_seq()
        out: list[Event] = []
        current = seq
        while current - seq < limit and current < last:
            current += 1
            try:
                rows = self._conn.execute(
                    "SELECT seq, kind, step, time, body, crc FROM events WHERE seq = ?",
                    (current,)).fetchall()
            except _READ_ERRORS:
                self._bad(current, "unreadable page")
                continue
            if rows and self._is_superseded(current):
                continue
            out.extend(self._decode_rows(rows))
        return Batch(out, current)

    def _is_superseded(self, seq: int) -> bool:
        try:
            return self._conn.execute("SELECT 1 FROM superseded WHERE seq = ?",
                                      (seq,)).fetchone() is not None
        except _READ_ERRORS:
            return False

    def _probe_last_seq(self) -> int:
        for sql in ("SELECT max(seq) FROM events",
                    "SELECT seq FROM events ORDER BY rowid DESC LIMIT 1"):
            try:
                found = self._conn.execute(sql).fetchone()
                if found and found[0] is not None:
                    return int(found[0])
            except _READ_ERRORS:
                continue
        return 0

    def mark_bad(self, seq: int, why: str) -> None:
        """Record a row the caller could not decode (a ``raw`` row of :meth:`read`)."""
        self._bad(seq, why)

    def _bad(self, seq: int, why: str) -> None:
        if seq not in self.damage.bad_rows:
            self.damage.bad_rows.append(seq)
            self.damage.errors.append(f"event {seq}: {why}")

    def _note(self, error: str) -> None:
        if not self._tables and "no such table" in error:
            return  # said once, as NOT_A_SPOOL
        if error not in self.damage.errors:
            self.damage.errors.append(error)

    # -- cursors ---------------------------------------------------------------------
    def cursors(self) -> dict[str, Cursor]:
        """Each backend's cursor: from ``delivery.db``, or from ``spool.db`` for a spool
        written before it (where both hold one, the newer row)."""
        rows = self._legacy_rows("cursors", "SELECT backend, acked_seq, remote_id, state, "
                                 "updated FROM cursors")
        rows += self._delivery_rows("cursors", self._delivery.cursor_rows)
        out: dict[str, Cursor] = {}
        for backend, acked, remote_id, state, updated in rows:
            try:
                found = Cursor(backend, int(acked), remote_id, orjson.loads(state),
                               float(updated))
            except (TypeError, ValueError) as exc:  # orjson.JSONDecodeError is a ValueError
                self._note(f"cursor {backend!r} is unreadable: {exc}")
                continue
            if backend not in out or found.updated >= out[backend].updated:
                out[backend] = found
        return out

    def cursor(self, backend: str) -> Cursor:
        found = self.cursors().get(backend)
        return found or Cursor(backend, 0, None, {}, 0.0)

    def ack(self, backend: str, seq: int, remote_id: str | None, state: dict[str, Any]) -> None:
        """Record that ``backend`` has every event up to ``seq`` (one atomic row update, in
        ``delivery.db``: recording it never takes ``spool.db``'s write lock).

        On a damaged spool the cursor may not be writable: that is noted in ``damage`` and
        delivery goes on (a later sync redelivers, which backends make harmless)."""
        try:
            self._delivery.ack(backend, seq, remote_id, state)
        except _READ_ERRORS as exc:
            if not self.damage:
                raise  # a healthy spool that cannot take an ack: let the worker retry
            self._note(f"cursor of {backend!r} not saved: {exc}")

    def _legacy_rows(self, table: str, sql: str) -> list[tuple[Any, ...]]:
        """Rows of ``table`` in ``spool.db`` itself (spools from before ``delivery.db``)."""
        if table == "quarantine" and not self._has_quarantine():
            return []
        try:
            return self._conn.execute(sql).fetchall()
        except _READ_ERRORS as exc:
            self._note(f"{table}: {exc}")
            return []

    def _delivery_rows(self, table: str, read: Callable[[], list[tuple[Any, ...]]]
                       ) -> list[tuple[Any, ...]]:
        try:
            rows = read()
        except (*_READ_ERRORS, SpoolUnsafeError) as exc:
            self._note(f"{table} ({self._delivery.path.name}): {exc}")
            return []
        return rows

    # -- quarantine ------------------------------------------------------------------
    def quarantine(self, backend: str, seq: int, kind: str, keys: tuple[str, ...],
                   reason: str) -> None:
        """Record that ``backend`` refused event ``seq`` (or only ``keys`` of it) for good."""
        try:
            self._delivery.quarantine(backend, seq, kind, keys, reason)
        except _READ_ERRORS as exc:
            if not self.damage:
                raise
            self._note(f"quarantine of event {seq} for {backend!r} not saved: {exc}")

    def unquarantine(self, backend: str, seqs: list[int]) -> None:
        """Forget quarantine rows (a skip that turned out to be the backend's fault; always
        one this process just made, so in ``delivery.db``)."""
        try:
            self._delivery.unquarantine(backend, seqs)
        except _READ_ERRORS as exc:
            self._note(f"quarantine of {backend!r} not undone: {exc}")

    def quarantined(self, backend: str | None = None) -> list[Quarantined]:
        """Quarantined events, of one backend or of all, in seq order (``delivery.db``'s
        rows and those an older spool keeps in ``spool.db``)."""
        sql = "SELECT backend, seq, kind, keys, reason, time FROM quarantine"
        rows: list[QuarantineRow] = [
            r for r in self._legacy_rows("quarantine", sql)
            if backend is None or r[0] == backend]
        rows += self._delivery_rows(
            "quarantine", lambda: self._delivery.quarantine_rows(backend))
        found: dict[tuple[str, int], Quarantined] = {}
        for name, seq, kind, keys, reason, ts in rows:
            try:
                entry = Quarantined(name, int(seq), kind, tuple(orjson.loads(keys)),
                                    reason, float(ts))
            except (TypeError, ValueError):
                self._note(f"quarantine row of event {seq} is unreadable")
                continue
            found[(entry.backend, entry.seq)] = entry  # delivery.db's row, read last, wins
        return sorted(found.values(), key=lambda q: (q.seq, q.backend))

    def _has_quarantine(self) -> bool:
        try:
            return self._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                      "name = 'quarantine'").fetchone() is not None
        except _READ_ERRORS as exc:
            self._note(f"quarantine: {exc}")
            return False
