"""Events into the store: one transaction per batch, each (run, seq) stored once.

Metric values go to ``metrics`` (one row per ``log()`` call, keys and values as arrays,
binary COPY: the bulk of any run); every event also gets a row in ``events`` (kind, step,
time and, except for metrics, the spool's JSON body), and images and sample payloads go
to ``blobs`` under their hash.

Exactly once: the writer knows the highest seq the store has for the run (its watermark)
and sends only what is above it; a batch is one transaction, so the watermark is exact
after a crash, a reconnect or a lost acknowledgement. Should another writer have stored
some of the same seqs meanwhile (two syncs of one run), the batch is written again row
by row with ``ON CONFLICT DO NOTHING``.
"""

from __future__ import annotations

import getpass
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from trackmux.core.events import Event, MetricsEvent
from trackmux.core.spool import codec
from trackmux.store.connect import psycopg

EVENT_COLUMNS = "run, seq, kind, step, time, body, blob"
METRIC_COLUMNS = "run, seq, step, time, keys, vals"
METRIC_TYPES = ["int8", "int8", "int8", "float8", "text[]", "float8[]"]


def current_user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):
        return ""


def _numbers(data: Mapping[str, Any]) -> tuple[list[str], list[float]]:
    """A metrics event's keys and values as floats (ints and bools too; anything else,
    which the door never lets through, is left out)."""
    values = list(data.values())
    if all(type(v) is float for v in values):  # the common case, without a loop per key
        return list(data), values
    keys, out = [], []
    for key, value in data.items():
        if isinstance(value, (int, float)):
            keys.append(str(key))
            out.append(float(value))
    return keys, out


def rows_of(run: int, events: Sequence[Event]) -> tuple[
        list[tuple[Any, ...]], list[tuple[Any, ...]], dict[str, bytes], set[str]]:
    """(event rows, metric rows, blobs by hash, metric keys) of one batch."""
    event_rows: list[tuple[Any, ...]] = []
    metric_rows: list[tuple[Any, ...]] = []
    blobs: dict[str, bytes] = {}
    keys: set[str] = set()
    for event in events:
        if isinstance(event, MetricsEvent):
            event_rows.append((run, event.seq, "metrics", event.step, event.time, None, None))
            names, values = _numbers(event.data)
            metric_rows.append((run, event.seq, event.step, event.time, names, values))
            keys.update(names)
            continue
        (kind, step, ts, body), blob = codec.encode(event)
        ref = None
        if blob is not None:
            ref, data = blob
            blobs[ref] = data
        event_rows.append((run, event.seq, kind, step, ts, body.decode(), ref))
    return event_rows, metric_rows, blobs, keys


class StoreWriter:
    """Writes one run's events; the connection is the caller's (one per backend), in
    autocommit mode so each ``transaction()`` block is a real transaction."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._keys: set[str] = set()  # metric keys already in run_keys

    # -- the run -------------------------------------------------------------------
    def register(self, meta: Mapping[str, Any], *, host: str, user: str) -> int:
        """The store's id of the run (run id, host): created on first sight."""
        run_id = str(meta.get("run_id") or "")
        if not run_id:
            raise ValueError("the run has no run_id in its spool meta")
        tags = [str(t) for t in meta.get("tags") or []]
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.execute(
                "INSERT INTO trackmux.runs (run_id, host, user_name, project, name, "
                "started_at, tags) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (run_id, host) DO NOTHING RETURNING id",
                (run_id, host, user, str(meta.get("project") or "default"),
                 str(meta.get("name") or run_id), meta.get("started_at"), tags))
            row = cur.fetchone()
            if row is None:
                cur.execute("SELECT id FROM trackmux.runs WHERE run_id = %s AND host = %s",
                            (run_id, host))
                row = cur.fetchone()
        return int(row[0])

    def watermark(self, run: int) -> int:
        with self.conn.cursor() as cur:
            cur.execute("SELECT coalesce(max(seq), 0) FROM trackmux.events WHERE run = %s",
                        (run,))
            row = cur.fetchone()
        return int(row[0]) if row else 0

    def status(self, run: int, state: str, at: float, meta: Mapping[str, Any]) -> None:
        """Appends the run's state and meta (the latest row wins)."""
        body = orjson.dumps(meta, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.execute("INSERT INTO trackmux.run_status (run, at, state, meta) "
                        "VALUES (%s, %s, %s, %s)", (run, at, state, body))

    def attempts(self, run: int, attempts: Iterable[Any]) -> None:
        rows = [(run, a.number, a.started_at, a.pid, a.host, a.first_seq, a.rewind_to)
                for a in attempts]
        if not rows:
            return
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany("INSERT INTO trackmux.attempts (run, number, started_at, pid, "
                            "host, first_seq, rewind_to) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                            "ON CONFLICT DO NOTHING", rows)

    def supersede(self, run: int, seqs: Iterable[tuple[int, int]]) -> int:
        """Marks (seq, attempt) pairs superseded, as the spool marks them."""
        rows = [(run, seq, attempt) for seq, attempt in seqs]
        if not rows:
            return 0
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany("INSERT INTO trackmux.superseded (run, seq, attempt) "
                            "VALUES (%s, %s, %s) ON CONFLICT DO NOTHING", rows)
        return len(rows)

    # -- events --------------------------------------------------------------------
    def write(self, run: int, events: Sequence[Event]) -> None:
        """One transaction for the whole batch."""
        if not events:
            return
        event_rows, metric_rows, blobs, keys = rows_of(run, events)
        new_keys = [(run, k) for k in keys - self._keys]
        pg = psycopg()
        try:
            with self.conn.transaction():
                self._copy(event_rows, metric_rows, blobs, new_keys)
        except pg.errors.UniqueViolation:  # another writer stored some of these seqs
            with self.conn.transaction():
                self._merge(event_rows, metric_rows, blobs, new_keys)
        self._keys |= keys

    def _side_rows(self, cur: Any, blobs: dict[str, bytes],
                   new_keys: list[tuple[int, str]]) -> None:
        if blobs:
            cur.executemany("INSERT INTO trackmux.blobs (hash, data) VALUES (%s, %s) "
                            "ON CONFLICT DO NOTHING", list(blobs.items()))
        if new_keys:
            cur.executemany("INSERT INTO trackmux.run_keys (run, key) VALUES (%s, %s) "
                            "ON CONFLICT DO NOTHING", new_keys)

    def _copy(self, event_rows: list[tuple[Any, ...]], metric_rows: list[tuple[Any, ...]],
              blobs: dict[str, bytes], new_keys: list[tuple[int, str]]) -> None:
        with self.conn.cursor() as cur:
            self._side_rows(cur, blobs, new_keys)
            with cur.copy(f"COPY trackmux.events ({EVENT_COLUMNS}) FROM STDIN") as copy:
                for row in event_rows:
                    copy.write_row(row)
            if metric_rows:
                with cur.copy(f"COPY trackmux.metrics ({METRIC_COLUMNS}) FROM STDIN "
                              "(FORMAT BINARY)") as copy:
                    copy.set_types(METRIC_TYPES)
                    for row in metric_rows:
                        copy.write_row(row)

    def _merge(self, event_rows: list[tuple[Any, ...]], metric_rows: list[tuple[Any, ...]],
               blobs: dict[str, bytes], new_keys: list[tuple[int, str]]) -> None:
        with self.conn.cursor() as cur:
            self._side_rows(cur, blobs, new_keys)
            cur.executemany(f"INSERT INTO trackmux.events ({EVENT_COLUMNS}) VALUES "
                            "(%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING", event_rows)
            cur.executemany(f"INSERT INTO trackmux.metrics ({METRIC_COLUMNS}) VALUES "
                            "(%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING", metric_rows)
