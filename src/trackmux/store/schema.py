"""The store's tables, in versioned migrations.

Metric values are stored one row per ``log()`` call (``metrics``: its keys and values as
two arrays): a 100-float step is one row, not a hundred, which is what makes a bulk sync
fast (COPY of rows, one index entry per step). The view ``points`` gives one row per
value (run, key, seq, step, time, value) for SQL and dashboards; ``run_keys`` lists each
run's metric keys.

Every table lives in the PostgreSQL schema ``trackmux``; ``trackmux.schema_version`` has
one row per applied migration. Migrations only add (tables, columns, indexes), so a newer
trackmux reads an older schema: readers ask :func:`version` and leave out what an older
schema does not have (goals need version 2), and a writer needs only version 1.

The writer role only adds rows (INSERT and SELECT; never UPDATE or DELETE): the run's
status, attempts and superseded events are rows appended like events, the latest wins.
"""

from __future__ import annotations

from typing import Any

from trackmux.store.connect import StoreConfigError

SCHEMA = "trackmux"
LATEST = 2
#: the version a writer (the postgres backend) needs
WRITER_NEEDS = 1
_LOCK = 0x7472_6B6D  # advisory lock id: "trkm"

MIGRATIONS: dict[int, str] = {
    1: """
CREATE SCHEMA IF NOT EXISTS trackmux;
CREATE TABLE trackmux.runs (
    id bigserial PRIMARY KEY, run_id text NOT NULL, host text NOT NULL,
    user_name text NOT NULL DEFAULT '', project text NOT NULL, name text NOT NULL,
    started_at double precision, tags text[] NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(), UNIQUE (run_id, host));
CREATE INDEX runs_project ON trackmux.runs (project);
CREATE TABLE trackmux.run_status (
    id bigserial PRIMARY KEY, run bigint NOT NULL REFERENCES trackmux.runs (id),
    at double precision NOT NULL, state text NOT NULL, meta json NOT NULL);
CREATE INDEX run_status_run ON trackmux.run_status (run, id);
CREATE TABLE trackmux.events (
    run bigint NOT NULL, seq bigint NOT NULL, kind text NOT NULL, step bigint NOT NULL,
    time double precision NOT NULL, body json, blob text, PRIMARY KEY (run, seq));
CREATE INDEX events_kind ON trackmux.events (run, kind, seq);
CREATE TABLE trackmux.metrics (
    run bigint NOT NULL, seq bigint NOT NULL, step bigint NOT NULL,
    time double precision NOT NULL, keys text[] NOT NULL, vals double precision[] NOT NULL,
    PRIMARY KEY (run, seq));
CREATE TABLE trackmux.run_keys (run bigint NOT NULL, key text NOT NULL,
    PRIMARY KEY (run, key));
CREATE VIEW trackmux.points AS
    SELECT m.run, p.key, m.seq, m.step, m.time, p.value FROM trackmux.metrics m
    CROSS JOIN LATERAL unnest(m.keys, m.vals) AS p(key, value);
CREATE TABLE trackmux.blobs (hash text PRIMARY KEY, data bytea NOT NULL);
CREATE TABLE trackmux.attempts (
    run bigint NOT NULL, number integer NOT NULL, started_at double precision NOT NULL,
    pid integer NOT NULL, host text NOT NULL, first_seq bigint NOT NULL, rewind_to bigint,
    PRIMARY KEY (run, number));
CREATE TABLE trackmux.superseded (
    run bigint NOT NULL, seq bigint NOT NULL, attempt integer NOT NULL,
    PRIMARY KEY (run, seq));
""",
    2: """
CREATE TABLE trackmux.goals (
    id bigserial PRIMARY KEY, project text NOT NULL, key text NOT NULL,
    op text NOT NULL CHECK (op IN ('>=', '<=', '>', '<')), value double precision NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(), created_by text NOT NULL DEFAULT current_user,
    UNIQUE (project, key, op));
""",
}


def version(conn: Any) -> int:
    """The schema's version (0: no trackmux tables yet)."""
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass('trackmux.schema_version') IS NOT NULL")
        row = cur.fetchone()
        if not row or not row[0]:
            return 0
        cur.execute("SELECT coalesce(max(version), 0) FROM trackmux.schema_version")
        found = cur.fetchone()
        return int(found[0]) if found else 0


def migrate(conn: Any, upto: int = LATEST) -> tuple[int, int]:
    """Apply the missing migrations up to ``upto`` in one transaction (serialized across
    processes by an advisory lock); returns (version before, version after)."""
    pg = _pg()
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
            before = version(conn)
            if before == 0:
                cur.execute("CREATE SCHEMA IF NOT EXISTS trackmux")
                cur.execute("CREATE TABLE IF NOT EXISTS trackmux.schema_version ("
                            "version integer PRIMARY KEY, applied_at timestamptz NOT NULL "
                            "DEFAULT now())")
            for number in range(before + 1, upto + 1):
                cur.execute(MIGRATIONS[number].replace("CREATE SCHEMA IF NOT EXISTS "
                                                       "trackmux;", ""))
                cur.execute("INSERT INTO trackmux.schema_version (version) VALUES (%s)",
                            (number,))
            return before, max(before, upto)
    except pg.errors.InsufficientPrivilege as exc:
        raise StoreConfigError(
            f"the store's schema is older than this trackmux needs and this role may not "
            f"upgrade it ({exc.diag.message_primary}): run `trackmux store init DSN` as "
            "the database owner") from None


def ensure(conn: Any, need: int = LATEST) -> int:
    """Upgrade an older schema when this role may; returns the version now. A role that
    may not (the writer and reader roles) is fine while the schema has ``need``."""
    current = version(conn)
    if current < LATEST:
        try:
            return migrate(conn)[1]
        except StoreConfigError:
            if current >= need:
                return current
            raise
    return current


def _pg() -> Any:
    from trackmux.store.connect import psycopg

    return psycopg()


def grant(conn: Any, *, writers: Any = (), readers: Any = (), goal_setters: Any = ()) -> None:
    """Rights per role: writers add rows (INSERT and SELECT; no UPDATE, DELETE or
    TRUNCATE), readers only SELECT, goal setters also change goals."""
    sql = _pg().sql
    with conn.transaction(), conn.cursor() as cur:
        for role in (*writers, *readers, *goal_setters):
            ident = sql.Identifier(role)
            cur.execute(sql.SQL("GRANT USAGE ON SCHEMA trackmux TO {}").format(ident))
            cur.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA trackmux TO {}"
                                ).format(ident))
        for role in writers:
            ident = sql.Identifier(role)
            cur.execute(sql.SQL("GRANT INSERT ON ALL TABLES IN SCHEMA trackmux TO {}"
                                ).format(ident))
            cur.execute(sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA trackmux TO {}"
                                ).format(ident))
        for role in goal_setters:
            ident = sql.Identifier(role)
            cur.execute(sql.SQL("GRANT INSERT, UPDATE, DELETE ON trackmux.goals TO {}"
                                ).format(ident))
            cur.execute(sql.SQL("GRANT USAGE ON SEQUENCE trackmux.goals_id_seq TO {}"
                                ).format(ident))
