"""The store side of the reader interface (trackmux/readers/): runs, keys, series,
events, samples, findings, config and provenance of the runs in a PostgreSQL store.

Everything here only reads (``SELECT``), so the UI and the CLIs run with a read-only
role. ``replica`` keeps a local spool copy of a store run up to date, seq by seq (only
what is new since the last call), so the wings written over spools (the UI's caches, the
report, the doctor, show, samples) serve store runs with the same code.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from trackmux.core.configmerge import merged
from trackmux.core.events import ConfigEvent, Event, MetricsEvent, ProvenanceEvent, SamplesEvent
from trackmux.core.spool import codec
from trackmux.core.spool.writer import SCHEMA as SPOOL_SCHEMA
from trackmux.core.spool.writer import SPOOL_FILE, index_if_new, make_private_dir, touch_private
from trackmux.readers.base import RunEntry, Series, best_effort_findings
from trackmux.store import schema
from trackmux.store.connect import connect, hide_password

PAGE = 20000  # events per replica read
REPLICA_MARK = "store"  # meta key naming the store a replica copies

_RUNS_SQL = """
SELECT r.id, r.run_id, r.host, r.user_name, r.project, r.name, r.started_at,
       s.state, s.meta::text,
       (SELECT max(e.seq) FROM trackmux.events e WHERE e.run = r.id),
       (SELECT count(*) FROM trackmux.events e WHERE e.run = r.id),
       (SELECT max(e.step) FROM trackmux.events e WHERE e.run = r.id AND e.kind <> 'config'
         AND NOT EXISTS (SELECT 1 FROM trackmux.superseded x WHERE x.run = e.run
                         AND x.seq = e.seq))
FROM trackmux.runs r
LEFT JOIN LATERAL (SELECT state, meta FROM trackmux.run_status st WHERE st.run = r.id
                   ORDER BY st.id DESC LIMIT 1) s ON true
"""
#: the run list without the per-run event count and last step (each a pass over the
#: run's events: 0.5 s over 1M rows); what a replica needs, read before any event
_RUNS_LIGHT_SQL = """
SELECT r.id, r.run_id, r.host, r.user_name, r.project, r.name, r.started_at,
       s.state, s.meta::text,
       (SELECT max(e.seq) FROM trackmux.events e WHERE e.run = r.id), NULL, NULL
FROM trackmux.runs r
LEFT JOIN LATERAL (SELECT state, meta FROM trackmux.run_status st WHERE st.run = r.id
                   ORDER BY st.id DESC LIMIT 1) s ON true
"""
_LIVE = ("NOT EXISTS (SELECT 1 FROM trackmux.superseded x WHERE x.run = {t}.run "
         "AND x.seq = {t}.seq)")


class StoreSource:
    """Runs in a PostgreSQL store; one connection, used by one thread at a time."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.uri = hide_password(dsn)
        self._conn = connect(dsn, autocommit=True, application="trackmux-reader")
        self._lock = threading.RLock()
        self.version = schema.version(self._conn)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.close()

    def _rows(self, sql: str, args: tuple[Any, ...] = (), *,
              binary: bool = False) -> list[tuple[Any, ...]]:
        """``binary``: results in PostgreSQL's binary format (arrays and floats are
        decoded in C, several times faster than their text)."""
        with self._lock, self._conn.cursor() as cur:
            cur.execute(sql, args, binary=binary)
            return list(cur.fetchall())

    # -- runs ----------------------------------------------------------------------
    def runs(self, project: str | None = None, ids: list[int] | None = None,
             counts: bool = True) -> list[RunEntry]:
        """Every run (of ``project``; or those with the store ids ``ids``), newest first.
        ``counts=False``: leave out the event count and last step (0 and None), which
        cost a pass over each run's events."""
        if self._refresh_version() == 0:
            return []
        sql: str = _RUNS_SQL if counts else _RUNS_LIGHT_SQL
        args: tuple[Any, ...] = ()
        if project is not None:
            sql, args = sql + " WHERE r.project = %s", (project,)
        elif ids is not None:
            sql, args = sql + " WHERE r.id = ANY(%s)", (ids,)
        out = []
        for (pk, run_id, host, user, proj, name, started, state, meta, last_seq, events,
             last_step) in self._rows(sql + " ORDER BY r.started_at DESC NULLS LAST, r.id",
                                      args):
            parsed = orjson.loads(meta) if meta else {}
            out.append(RunEntry(
                ref=str(pk), run_id=run_id, project=proj, name=name, host=host, user=user,
                state=str(state or parsed.get("state") or "running"), started_at=started,
                finished_at=parsed.get("finished_at"), events=int(events or 0),
                last_seq=int(last_seq or 0),
                last_step=None if last_step is None else int(last_step), meta=parsed))
        return out

    def _refresh_version(self) -> int:
        if self.version < schema.LATEST:  # a store created or upgraded since we looked
            with self._lock:
                self.version = schema.version(self._conn)
        return self.version

    def marks(self) -> dict[str, tuple[int, str]]:
        """Per run (store id): its highest seq and latest state. One cheap query (an index
        lookup per run), for pollers that then read only the runs that moved."""
        if self._refresh_version() == 0:
            return {}
        return {str(pk): (int(seq or 0), str(state or "")) for pk, seq, state in self._rows(
            "SELECT r.id, (SELECT max(e.seq) FROM trackmux.events e WHERE e.run = r.id), "
            "(SELECT st.state FROM trackmux.run_status st WHERE st.run = r.id "
            " ORDER BY st.id DESC LIMIT 1) FROM trackmux.runs r")}

    def find(self, arg: str) -> RunEntry:
        """A run by run id (or a unique prefix), ``HOST/RUN_ID``, ``PROJECT/RUN_ID``, name,
        or the store's numeric id."""
        runs = self.runs()
        for test in (lambda r: r.ref == arg or r.run_id == arg,
                     lambda r: f"{r.host}/{r.run_id}" == arg or f"{r.project}/{r.run_id}" == arg,
                     lambda r: r.run_id.startswith(arg),
                     lambda r: r.name == arg):
            found = [r for r in runs if test(r)]
            if len(found) == 1:
                return found[0]
            if len(found) > 1:
                raise FileNotFoundError(
                    f"run {arg!r} is ambiguous in the store {self.uri}: "
                    + ", ".join(f"{r.host}/{r.run_id}" for r in found)
                    + " (pass HOST/RUN_ID)")
        raise FileNotFoundError(f"no run {arg!r} in the store {self.uri}")

    # -- a run's data --------------------------------------------------------------
    def keys(self, run: RunEntry) -> list[str]:
        return [r[0] for r in self._rows(
            "SELECT key FROM trackmux.run_keys WHERE run = %s ORDER BY key",
            (int(run.ref),))]

    def series(self, run: RunEntry, key: str, after: int = 0) -> Series:
        rows = self._rows(
            "SELECT m.seq, m.step, m.time, m.vals[array_position(m.keys, %s)] "
            "FROM trackmux.metrics m WHERE m.run = %s AND m.seq > %s "
            f"AND %s = ANY(m.keys) AND {_LIVE.format(t='m')} ORDER BY m.seq",
            (key, int(run.ref), after, key))
        return Series.of(rows, after)

    def events(self, run: RunEntry, kind: str, after: int = 0) -> list[Event]:
        return list(self._events(int(run.ref), after, kind=kind))

    def samples(self, run: RunEntry, key: str, step: int) -> list[SamplesEvent]:
        return [e for e in self._events(int(run.ref), 0, kind="samples", step=step)
                if isinstance(e, SamplesEvent) and e.key == key]

    def findings(self, run: RunEntry) -> list[dict[str, Any]]:
        return best_effort_findings(self.events(run, "finding"))

    def config(self, run: RunEntry) -> dict[str, Any]:
        return merged(e.config for e in self.events(run, "config")
                      if isinstance(e, ConfigEvent))

    def provenance(self, run: RunEntry) -> dict[str, Any] | None:
        found = [e for e in self.events(run, "provenance") if isinstance(e, ProvenanceEvent)]
        return {"data": found[-1].data, "diff": found[-1].diff} if found else None

    def _events(self, run: int, after: int, *, kind: str | None = None,
                step: int | None = None, upto: int | None = None,
                live_only: bool = True, limit: int | None = None) -> Iterator[Event]:
        """Events after seq ``after`` in order, rebuilt as the spool's reader gives them
        (at most ``limit`` of them)."""
        while limit is None or limit > 0:
            page = PAGE if limit is None else min(PAGE, limit)
            where = ["e.run = %s", "e.seq > %s"]
            args: list[Any] = [run, after]
            if kind is not None:
                where.append("e.kind = %s")
                args.append(kind)
            if step is not None:
                where.append("e.step = %s")
                args.append(step)
            if upto is not None:
                where.append("e.seq <= %s")
                args.append(upto)
            if live_only:
                where.append(_LIVE.format(t="e"))
            rows = self._rows(
                "SELECT e.seq, e.kind, e.step, e.time, e.body::text, e.blob, b.data "
                "FROM trackmux.events e LEFT JOIN trackmux.blobs b ON b.hash = e.blob "
                f"WHERE {' AND '.join(where)} ORDER BY e.seq LIMIT {page}", tuple(args))
            if not rows:
                return
            points = self._points(run, rows[0][0], rows[-1][0]) if any(
                r[1] == "metrics" for r in rows) else {}
            for seq, kind_, step_, ts, body, _ref, blob in rows:
                if kind_ == "metrics":
                    yield MetricsEvent(points.get(seq, {}), step_, ts, seq)
                else:
                    yield codec.decode(seq, kind_, step_, ts, body.encode(),
                                       None if blob is None else bytes(blob))
            if len(rows) < page:
                return
            after = rows[-1][0]
            if limit is not None:
                limit -= len(rows)

    def first_events(self, ids: list[int], count: int) -> dict[str, list[Event]]:
        """Per run (store id): its first ``count`` events, superseded ones included (as
        :meth:`copy_forward` copies them), for many runs in two queries: a cold start
        gives every replica a beginning before the UI's first answer."""
        out: dict[str, list[Event]] = {str(pk): [] for pk in ids}
        if not ids or count <= 0:
            return out
        rows = self._rows(
            "SELECT r.id, e.seq, e.kind, e.step, e.time, e.body::text, b.data "
            "FROM unnest(%s::bigint[]) AS r(id) CROSS JOIN LATERAL ("
            " SELECT * FROM trackmux.events x WHERE x.run = r.id ORDER BY x.seq LIMIT %s) e "
            "LEFT JOIN trackmux.blobs b ON b.hash = e.blob ORDER BY r.id, e.seq",
            (ids, count))
        points: dict[tuple[int, int], dict[str, float]] = {}
        for pk, seq, keys, values in self._rows(  # a run's metrics rows are among its events
                "SELECT r.id, m.seq, m.keys, m.vals FROM unnest(%s::bigint[]) AS r(id) "
                "CROSS JOIN LATERAL (SELECT * FROM trackmux.metrics x WHERE x.run = r.id "
                "ORDER BY x.seq LIMIT %s) m", (ids, count), binary=True):
            points[(pk, seq)] = dict(zip(keys, values, strict=True))
        for pk, seq, kind, step, ts, body, blob in rows:
            out[str(pk)].append(
                MetricsEvent(points.get((pk, seq), {}), step, ts, seq) if kind == "metrics"
                else codec.decode(seq, kind, step, ts, body.encode(),
                                  None if blob is None else bytes(blob)))
        return out

    def _points(self, run: int, first: int, last: int) -> dict[int, dict[str, float]]:
        out: dict[int, dict[str, float]] = {}
        for seq, keys, values in self._rows(
                "SELECT seq, keys, vals FROM trackmux.metrics WHERE run = %s AND seq BETWEEN "
                "%s AND %s ORDER BY seq", (run, first, last), binary=True):
            out[seq] = dict(zip(keys, values, strict=True))
        return out

    # -- a local spool copy --------------------------------------------------------
    def replica(self, run: RunEntry, root: Path) -> Path:
        """A spool under ``root`` with the run's events (superseded ones marked), its meta
        and attempts, brought up to date; returns its folder."""
        folder = replica_folder(run, root)
        self.copy_forward(run, folder)
        return folder

    def history(self, ids: list[int]) -> dict[str, tuple[list[tuple[Any, ...]],
                                                        list[tuple[Any, ...]]]]:
        """Per run (store id): its superseded marks and attempts, for many runs in two
        queries (a cold start makes a replica of every run at once)."""
        out: dict[str, tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]] = {
            str(pk): ([], []) for pk in ids}
        for pk, *row in self._rows("SELECT run, seq, attempt FROM trackmux.superseded "
                                   "WHERE run = ANY(%s)", (ids,)):
            out[str(pk)][0].append(tuple(row))
        for pk, *row in self._rows("SELECT run, number, started_at, pid, host, first_seq, "
                                   "rewind_to FROM trackmux.attempts WHERE run = ANY(%s)",
                                   (ids,)):
            out[str(pk)][1].append(tuple(row))
        return out

    def copy_forward(self, run: RunEntry, folder: Path, limit: int | None = None,
                     history: tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]
                     | None = None, events: list[Event] | None = None) -> int:
        """Bring the replica in ``folder`` forward by at most ``limit`` events (None: all;
        0: only its meta, attempts and superseded marks, so a list shows the run before
        any of its events is copied); returns the highest seq the replica now holds.
        ``history``: the run's superseded marks and attempts, read after its events
        (:meth:`history`), else read here. ``events``: the run's first events, already
        read (:meth:`first_events`), copied instead of reading (those it lacks)."""
        make_private_dir(folder)
        path = folder / SPOOL_FILE
        touch_private(path)
        conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        try:
            # a cache that is copied again when lost: no fsync (100 new replicas at a
            # cold start cost seconds of fsyncs on a busy disk otherwise)
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(SPOOL_SCHEMA)
            index_if_new(conn)
            have = int(conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])
            pk = int(run.ref)
            new = ([e for e in events if e.seq > have] if events is not None
                   else list(self._events(pk, have, live_only=False, limit=limit)))
            rows, blobs = [], {}
            for event in new:
                (kind, step, ts, body), blob = codec.encode(event)
                rows.append((event.seq, kind, step, ts, body,
                             codec.row_crc(event.seq, kind, step, ts, body)))
                if blob is not None:
                    blobs[blob[0]] = blob[1]
            if history is None:  # after the events: every mark of a copied event is in
                history = self.history([pk])[run.ref]
            superseded, attempts = history
            # what the run's own spool says about its other backends is not known here:
            # the replica shows one delivery, to the store, of everything it holds
            meta = {**run.meta, "run_id": run.run_id, "project": run.project,
                    "name": run.name, "host": run.host, "user": run.user,
                    "state": run.state, "backends": ["postgres"], REPLICA_MARK: self.uri}
            upto = max([have, *(r[0] for r in rows)])
            conn.execute("BEGIN")
            conn.executemany("INSERT OR IGNORE INTO blobs(hash, data) VALUES (?, ?)",
                             list(blobs.items()))
            conn.executemany("INSERT OR IGNORE INTO events(seq, kind, step, time, body, crc) "
                             "VALUES (?, ?, ?, ?, ?, ?)", rows)
            conn.executemany("INSERT OR IGNORE INTO superseded(seq, attempt) VALUES (?, ?)",
                             superseded)
            conn.executemany("INSERT OR IGNORE INTO attempts(number, started_at, pid, host, "
                             "first_seq, rewind_to) VALUES (?, ?, ?, ?, ?, ?)", attempts)
            conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                             [(k, orjson.dumps(v, default=str)) for k, v in meta.items()])
            conn.execute("INSERT OR REPLACE INTO cursors(backend, acked_seq, remote_id, state, "
                         "updated) VALUES ('postgres', ?, ?, '{}', ?)", (upto, run.ref,
                                                                        time.time()))
            conn.execute("COMMIT")
        finally:
            conn.close()
        return upto

    # -- goals (schema 2) ------------------------------------------------------------
    def goals(self, project: str) -> list[tuple[str, str, float]]:
        if self.version < 2:
            return []
        return [(k, op, float(v)) for k, op, v in self._rows(
            "SELECT key, op, value FROM trackmux.goals WHERE project = %s ORDER BY id",
            (project,))]

    def standings(self, project: str, key: str, last: int = 1) -> list[dict[str, Any]]:
        """Where each run of ``project`` is now on ``key``: the mean of its last ``last``
        logged points (1: its latest value; superseded points never count), with the
        step and time of its latest point. A run whose window holds a NaN or an
        infinity stands at NaN (a diverged run is nowhere near any target)."""
        if self.version == 0:
            return []
        out = []
        for pk, run_id, name, host, user, value, finite, step, ts, points in self._rows(
                "SELECT r.id, r.run_id, r.name, r.host, r.user_name, "
                "avg(w.v) FILTER (WHERE w.v NOT IN ('NaN', 'Infinity', '-Infinity')), "
                "bool_and(w.v NOT IN ('NaN', 'Infinity', '-Infinity')), "
                "(array_agg(w.step ORDER BY w.seq DESC))[1], max(w.time), count(*) "
                "FROM trackmux.runs r CROSS JOIN LATERAL ("
                " SELECT m.seq, m.step, m.time, m.vals[array_position(m.keys, %s)] AS v "
                " FROM trackmux.metrics m WHERE m.run = r.id AND %s = ANY(m.keys) "
                f" AND {_LIVE.format(t='m')} ORDER BY m.seq DESC LIMIT %s) w "
                "WHERE r.project = %s GROUP BY r.id, r.run_id, r.name, r.host, r.user_name",
                (key, key, last, project)):
            out.append({"ref": str(pk), "run_id": run_id, "name": name, "host": host,
                        "user": user, "step": int(step), "time": float(ts),
                        "points": int(points),
                        "value": float(value) if finite and value is not None
                        else float("nan")})
        return out

    def best(self, project: str, key: str, maximize: bool) -> dict[str, Any] | None:
        """The run with the best value of ``key`` in ``project`` (NaN and infinities never
        count, nor superseded points)."""
        if self.version == 0:
            return None
        order = "DESC" if maximize else "ASC"
        rows = self._rows(
            "SELECT r.id, r.run_id, r.name, r.host, r.user_name, b.value, b.step FROM "
            "(SELECT m.run, m.seq, m.step, m.vals[array_position(m.keys, %s)] AS value "
            " FROM trackmux.metrics m JOIN trackmux.runs r ON r.id = m.run "
            f" WHERE r.project = %s AND %s = ANY(m.keys) AND {_LIVE.format(t='m')}) b "
            "JOIN trackmux.runs r ON r.id = b.run "
            "WHERE b.value NOT IN ('NaN', 'Infinity', '-Infinity') "
            f"ORDER BY b.value {order}, b.seq LIMIT 1", (key, project, key))
        if not rows:
            return None
        pk, run_id, name, host, user, value, step = rows[0]
        return {"ref": str(pk), "run_id": run_id, "name": name, "host": host, "user": user,
                "value": float(value), "step": int(step)}

    def projects(self) -> list[str]:
        if self.version == 0:
            return []
        return [r[0] for r in self._rows("SELECT DISTINCT project FROM trackmux.runs "
                                         "ORDER BY project")]


def replica_folder(run: RunEntry, root: Path) -> Path:
    """Where the replica of ``run`` lives under ``root``."""
    return root / _safe(run.project) / _safe(f"{run.host}--{run.run_id}")


def _safe(text: str) -> str:
    from trackmux.core.settings import safe_dirname

    clean = safe_dirname(text)
    if clean != text:  # keep distinct names distinct
        clean = f"{clean}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"
    return clean


def replica_root(dsn: str) -> Path:
    """Where replicas of one store live: a private folder per store (user and host of
    the DSN, never its password)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    tag = hashlib.sha1(hide_password(dsn).encode()).hexdigest()[:12]
    root = base / "trackmux" / "store" / tag
    make_private_dir(root)
    return root

