"""``trackmux store init DSN``: create or upgrade the team store's tables and grant the
writer and reader roles; also the run list over any source (``runs --store/--json``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
import orjson


class StoreUnreachableError(click.ClickException):
    """The store named cannot be reached or used: one line, exit status 3 (the same for a
    malformed DSN, a wrong database or password, a refused or silent server)."""

    exit_code = 3  # trackmux.store.connect.EXIT_UNREACHABLE (not imported: psycopg-free)


def check_store(uri: str | Path | None) -> None:
    """Fails with one line when ``uri`` is a mistyped store URL (``postgresql//u@h/db``)
    or a folder that does not exist, before anything is read from it."""
    from trackmux.readers import is_store_uri
    from trackmux.store.connect import malformed

    if uri is None or is_store_uri(uri):
        return
    bad = malformed(str(uri))
    if bad:
        raise StoreUnreachableError(bad)
    if not Path(uri).expanduser().is_dir():
        raise StoreUnreachableError(f"no store at {uri}: neither a folder nor a "
                                    "postgresql:// URL")


def reach_or_fail(dsn: str, **kwargs: Any) -> Any:
    """A connection to the store ``dsn`` for a command, or StoreUnreachableError."""
    from trackmux.store.connect import StoreUnreachable, reach

    try:
        return reach(dsn, **kwargs)
    except StoreUnreachable as exc:
        raise StoreUnreachableError(str(exc)) from None


def open_or_fail(uri: str | Path | None) -> Any:
    from trackmux.readers import open_source
    from trackmux.store.connect import StoreUnreachable, hide_password, one_line

    check_store(uri)
    try:
        return open_source(uri)
    except StoreUnreachable as exc:
        raise StoreUnreachableError(str(exc)) from None
    except Exception as exc:  # config errors say where; the rest: down or unreachable
        text = one_line(str(exc))
        where = hide_password(str(uri))
        raise StoreUnreachableError(text if where in text else
                                    f"cannot reach the store at {where}: {text}") from None


def list_runs(uri: str | Path | None, as_json: bool) -> None:
    source = open_or_fail(uri)
    try:
        entries = source.runs()
    finally:
        source.close()
    if as_json:
        click.echo(orjson.dumps([e.as_dict() for e in entries]).decode())
        return
    if not entries:
        click.echo(f"no runs in {source.uri}")
        return
    for entry in entries:
        started = (time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.started_at))
                   if entry.started_at else "?")
        step = "" if entry.last_step is None else f", last step {entry.last_step}"
        click.echo(f"{entry.project}/{entry.run_id}  {entry.state}  {entry.events} events"
                   f"{step}  name={entry.name}  {entry.user}@{entry.host}  started {started}")


@click.group()
def store() -> None:
    """The team store (a PostgreSQL database): set it up."""


@store.command("init")
@click.argument("dsn")
@click.option("--writer", "writers", multiple=True, metavar="ROLE",
              help="A role the postgres backend delivers as: may add rows, never change "
                   "or delete them.")
@click.option("--reader", "readers", multiple=True, metavar="ROLE",
              help="A role for the UI and the CLIs: may only read.")
@click.option("--goals", "goal_setters", multiple=True, metavar="ROLE",
              help="A role that may set the team's goals (trackmux goals set).")
def init(dsn: str, writers: tuple[str, ...], readers: tuple[str, ...],
         goal_setters: tuple[str, ...]) -> None:
    """Create or upgrade the store's tables in DSN (as the database owner) and grant ROLEs
    (readers may also read the sweeps kept in DSN's database: run it again after the
    first `sweep create --storage DSN`). Exit status 3: the store cannot be reached."""
    from trackmux.store import schema, sweeps
    from trackmux.store.connect import StoreConfigError

    conn = reach_or_fail(dsn, autocommit=True)
    try:
        before, after = schema.migrate(conn)
        schema.grant(conn, writers=writers, readers=readers, goal_setters=goal_setters)
        sweep_tables, not_granted = sweeps.grant_read(conn, (*readers, *goal_setters))
    except StoreConfigError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        conn.close()
    click.echo(f"store schema: version {before} -> {after}" if after != before
               else f"store schema: version {after} (up to date)")
    for kind, roles in (("writer", writers), ("reader", readers), ("goals", goal_setters)):
        for role in roles:
            click.echo(f"  {role}: {kind}")
    if sweep_tables and (readers or goal_setters):
        click.echo(f"  sweeps: {len(sweep_tables)} Optuna tables readable by the readers"
                   if not not_granted else "  sweeps: some Optuna tables are not readable:")
    for line in not_granted[:5]:
        click.echo(f"    {line}", err=True)
    if len(not_granted) > 5:
        click.echo(f"    ... and {len(not_granted) - 5} more", err=True)
