"""PostgreSQL backend: the team store (issue 35; tables in trackmux/store/schema.py).

Every event kind is stored: metric values one row per log() call, the other kinds as rows with the
spool's JSON body (config, provenance, findings, tables, text, histograms, artifact
references), images and sample payloads as blobs under their hash. Readers
(``trackmux ui postgresql://...``, ``--store DSN``) rebuild the events from them.

Where: option ``dsn``, else ``TRACKMUX_POSTGRES_DSN``, else libpq's ``PG*`` variables.
A run is (run id, host): two trainers with the same run name on two machines stay two
runs; host and user come from the run's spool, not from whoever delivers it.

Exactly once by (run, seq): see trackmux/store/ingest.py. Superseded events (a resumed
attempt that rewound) are marked in ``trackmux.superseded`` exactly as the spool marks
them. Bad credentials, a missing database or role: one permanent problem at ``open``;
a server that is down or restarting is retried while the spool keeps everything.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any

from trackmux.core import settings
from trackmux.core.backends.contract import Backend, ResumeState, RunInfo, check_option_types
from trackmux.core.errors import PermanentBackendError
from trackmux.core.events import Event
from trackmux.hookspecs import RegisterBackend, hookimpl

log = logging.getLogger("trackmux")
OPTIONS = ("dsn",)


class PostgresBackend(Backend):
    name = "postgres"
    capabilities = frozenset({"metrics", "config", "table", "image", "text", "histogram",
                              "artifact", "provenance", "finding", "samples"})
    destination_options = ("dsn",)
    max_sample_rows = None  # the store keeps every sample, as the spool does

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        check_option_types("postgres", self.options, OPTIONS, strings=("dsn",))
        self.dsn = settings.postgres_dsn(self.options.get("dsn"))
        self._conn: Any = None
        self._run: int | None = None
        self._watermark = 0
        self._info: RunInfo | None = None
        self._host = ""

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        from trackmux.store import schema
        from trackmux.store.connect import (
            NO_DSN,
            StoreConfigError,
            StoreUnavailable,
            StoreUnreachable,
            connect,
            hide_password,
            one_line,
        )
        from trackmux.store.ingest import StoreWriter, current_user

        self._info = run
        try:
            self._conn = connect(self.dsn, autocommit=True, application="trackmux-delivery")
            schema.ensure(self._conn, schema.WRITER_NEEDS)
        except (StoreConfigError, StoreUnavailable) as exc:
            self._drop()
            raise PermanentBackendError(str(exc)) from None
        except Exception as exc:
            if self._conn is not None:
                self._drop()
                raise
            # retried; said in one line (runs and show quote it from delivery.log)
            where = hide_password(self.dsn) or NO_DSN
            raise StoreUnreachable(f"cannot reach the store at {where}: "
                                   f"{one_line(str(exc))}") from exc
        meta, attempts = _spool_view(run)
        self._host = str(meta.get("host") or "unknown")
        user = str(meta.get("user") or current_user())
        meta.setdefault("run_id", run.run_id)
        meta.setdefault("project", run.project)
        meta.setdefault("name", run.name)
        writer = StoreWriter(self._conn)
        self._writer = writer
        self._run = writer.register(meta, host=self._host, user=user)
        self._watermark = writer.watermark(self._run)
        writer.attempts(self._run, attempts)
        writer.status(self._run, str(meta.get("state") or "running"), time.time(), meta)

    def write(self, events: Sequence[Event]) -> None:
        assert self._run is not None, "write before open"
        fresh = [e for e in events if e.seq > self._watermark]
        if not fresh:
            return
        self._writer.write(self._run, fresh)
        self._watermark = max(e.seq for e in fresh)

    def rewind(self, step: int) -> None:
        """Marks what the spool marked superseded (its table is the one truth)."""
        if self._run is None or self._info is None:
            return
        from trackmux.core.spool.reader import SpoolReader

        reader = SpoolReader(self._info.run_dir)
        try:
            marks = reader.superseded_marks()
            attempts = reader.attempts()
        finally:
            reader.close()
        self._writer.attempts(self._run, attempts)
        self._writer.supersede(self._run, marks)

    def close(self, status: str) -> None:
        try:
            if status != "retrying" and self._run is not None and self._info is not None:
                meta, _ = _spool_view(self._info)
                self._writer.status(self._run, status, time.time(), meta)
        finally:
            self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None

    @property
    def remote_id(self) -> str | None:
        return None if self._run is None else str(self._run)

    def state(self) -> dict[str, Any]:
        return {"run": self._run, "stored_upto": self._watermark}

    def probe(self) -> None:
        """``trackmux sync`` calls this once before delivering: one connection (5 s
        timeout), so a store that refuses, never answers or rejects the role is one line
        now (``StoreUnreachable``), not an ``open`` retried with backoff in silence."""
        from trackmux.store.connect import reach

        reach(self.dsn, autocommit=True, application="trackmux-sync").close()

    def where(self) -> str | None:
        from trackmux.store.connect import hide_password

        return hide_password(self.dsn) or "postgresql (libpq PG* variables)"


def _spool_view(run: RunInfo) -> tuple[dict[str, Any], list[Any]]:
    """The run's meta and attempts, from its spool (host and user of the trainer)."""
    from trackmux.core.spool.reader import SpoolReader

    try:
        reader = SpoolReader(run.run_dir)
    except (FileNotFoundError, ValueError):
        return {"run_id": run.run_id, "project": run.project, "name": run.name,
                "started_at": run.started_at, "tags": list(run.tags)}, []
    try:
        return reader.meta(), reader.attempts()
    finally:
        reader.close()


@hookimpl
def trackmux_register_backends(register: RegisterBackend) -> None:
    register("postgres", PostgresBackend, requires=("psycopg",), extra="postgres",
             description="the team store: runs of many machines in one PostgreSQL database")
