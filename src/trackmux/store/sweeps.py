"""The sweeps kept in the team store's database, and read access to them.

``trackmux sweep create --storage postgresql://...`` keeps a sweep in Optuna's own tables,
in the schema the creating role's search path names first: ``public`` usually, but a
schema named like that role when one exists (an owner role called ``trackmux`` puts them
in the store's own ``trackmux`` schema). So readers look for them by name in every
schema, not through their own search path. ``trackmux store init --reader ROLE`` grants
the reader roles SELECT on them, so ``trackmux ui postgresql://...`` lists the sweeps with
the same read-only role. The tables exist once the first sweep is created: run ``store
init`` again then (it changes nothing else)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Optuna's RDB storage (optuna/storages/_rdb/models.py, and alembic's version table)
OPTUNA_TABLES = (
    "studies", "study_directions", "study_user_attributes", "study_system_attributes",
    "trials", "trial_user_attributes", "trial_system_attributes", "trial_params",
    "trial_values", "trial_intermediate_values", "trial_heartbeats", "version_info",
    "alembic_version")
# what makes a schema a sweep storage Optuna opens without writing (its version rows
# are written into these on first open)
MARKERS = ("studies", "version_info", "alembic_version")


def sweep_schemas(conn: Any) -> list[str]:
    """Schemas holding Optuna's tables: those on the role's search path first (where
    Optuna itself would look), then by name. The catalog needs no grant to be read."""
    with conn.cursor() as cur:
        cur.execute("SELECT n.nspname FROM pg_class c JOIN pg_namespace n "
                    "ON n.oid = c.relnamespace WHERE c.relname = ANY(%s) "
                    "AND c.relkind IN ('r', 'p') GROUP BY n.nspname "
                    "HAVING count(DISTINCT c.relname) = %s "
                    "ORDER BY n.nspname <> ALL(current_schemas(false)), n.nspname",
                    (list(MARKERS), len(MARKERS)))
        return [str(r[0]) for r in cur.fetchall()]


def sweep_tables(conn: Any) -> list[tuple[str, str]]:
    """Optuna's tables in every sweep schema: (schema, table)."""
    schemas = sweep_schemas(conn)
    if not schemas:
        return []
    with conn.cursor() as cur:
        cur.execute("SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n "
                    "ON n.oid = c.relnamespace WHERE n.nspname = ANY(%s) "
                    "AND c.relname = ANY(%s) AND c.relkind IN ('r', 'p') "
                    "ORDER BY n.nspname, c.relname", (schemas, list(OPTUNA_TABLES)))
        return [(str(schema), str(table)) for schema, table in cur.fetchall()]


def grant_read(conn: Any, roles: Iterable[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """SELECT on Optuna's tables (and USAGE on their schema) for ``roles``. Returns the
    tables, and what could not be granted: a sweep created by another role can only be
    granted by that role or a superuser (PostgreSQL refuses, or only warns when the
    granting role has some rights but no grant option, so each right is checked)."""
    from trackmux.store.connect import psycopg

    pg = psycopg()
    sql = pg.sql
    tables = sweep_tables(conn)
    roles = list(roles)
    missing: list[str] = []
    for role in roles:
        ident = sql.Identifier(role)
        for schema, table in tables:
            name = sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(table))
            try:
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                        sql.Identifier(schema), ident))
                    cur.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(name, ident))
            except pg.errors.InsufficientPrivilege:
                pass  # named below, with the owner who can grant it
            with conn.cursor() as cur:
                cur.execute("SELECT has_table_privilege(%s, c.oid, 'SELECT'), "
                            "pg_get_userbyid(c.relowner) FROM pg_class c JOIN pg_namespace n "
                            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
                            (role, schema, table))
                row = cur.fetchone()
            if row is not None and not row[0]:
                missing.append(f"{role} may not read {schema}.{table} (owned by {row[1]}: "
                               f"run store init as {row[1]} or a superuser)")
    return tables, missing


def has_version_rows(conn: Any, schema: str) -> bool:
    """Whether Optuna has stamped this storage (else it would write on open)."""
    from trackmux.store.connect import psycopg

    sql = psycopg().sql
    with conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {}.version_info) AND "
                            "EXISTS (SELECT 1 FROM {}.alembic_version)").format(
                                sql.Identifier(schema), sql.Identifier(schema)))
        row = cur.fetchone()
        return bool(row and row[0])
