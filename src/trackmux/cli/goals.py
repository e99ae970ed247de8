"""``trackmux goals PROJECT --store DSN [--json]`` and ``trackmux goals set PROJECT
'KEY >= VALUE' --store DSN``: the team's targets, kept in the store, and the best run so
far for each (trackmux/store/goals.py)."""

from __future__ import annotations

import time

import click
import orjson


@click.command()
@click.argument("args", nargs=-1, required=True)
@click.option("--store", envvar="TRACKMUX_STORE", metavar="DSN",
              help="The team store (postgresql://...; default: TRACKMUX_STORE).")
@click.option("--json", "as_json", is_flag=True, help="The board as JSON.")
@click.option("--last", "last", type=click.IntRange(min=1), default=1, show_default=True,
              metavar="N", help="Judge each run on the mean of its last N points (1: its "
                                "latest value).")
def goals(args: tuple[str, ...], store: str | None, as_json: bool, last: int) -> None:
    """Show PROJECT's goals, each judged on where runs are now (their latest value, or
    the mean of their last N points with --last N), with the run nearest the target;
    `goals set PROJECT 'KEY >= VALUE'` adds a goal or changes its target (also <=, >, <);
    `goals unset PROJECT KEY` removes KEY's goals. Exit status 3: the store cannot be
    reached."""
    from trackmux.cli.store import check_store, open_or_fail
    from trackmux.readers import is_store_uri
    from trackmux.store import goals as goals_mod

    if store and not is_store_uri(store):
        check_store(store)  # a mistyped DSN is named as such
    if not is_store_uri(store):
        raise click.BadParameter("goals live in the team store: pass a postgresql:// DSN",
                                 param_hint="--store")
    assert store is not None
    if args[0] in ("set", "unset"):
        if len(args) != 3:
            raise click.UsageError(f"usage: trackmux goals {args[0]} PROJECT "
                                   + ("'KEY >= VALUE'" if args[0] == "set" else "KEY"))
        _change(store, args[0], args[1], args[2])
        return
    if len(args) != 1:
        raise click.UsageError("usage: trackmux goals PROJECT (or goals set PROJECT 'KEY >= V')")
    source = open_or_fail(store)
    try:
        board = goals_mod.board(source, args[0], last)
    finally:
        source.close()
    if as_json:
        click.echo(orjson.dumps(board).decode())
        return
    if not board:
        click.echo(f"no goals for project {args[0]!r} (trackmux goals set {args[0]} "
                   "'KEY >= VALUE')")
        return
    for row in board:
        best = row["best"]
        mark = "met" if row["met"] else "not met"
        if best is None:
            click.echo(f"{row['goal']}: no run has logged {row['key']} yet"
                       if not row["runs"] else
                       f"{row['goal']}: not met; every run that logged {row['key']} "
                       "stands at NaN or infinity now")
            continue
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(best["time"]))
        click.echo(f"{row['goal']}: {mark} ({row['meeting']} of {row['runs']} runs now, "
                   f"by {row['judged']}); nearest: {best['name']} at {best['value']:g}, "
                   f"step {best['step']}, {when} ({best['run_id']}, "
                   f"{best['user']}@{best['host']})")


def _change(store: str, action: str, project: str, text: str) -> None:
    from trackmux.cli.store import reach_or_fail
    from trackmux.store import goals as goals_mod
    from trackmux.store.connect import StoreConfigError

    conn = reach_or_fail(store, autocommit=True)
    try:
        if action == "set":
            try:
                goal = goals_mod.parse(text)
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="GOAL") from None
            goals_mod.set_goal(conn, project, goal)
            click.echo(f"goal for {project}: {goal}")
        else:
            removed = goals_mod.remove_goal(conn, project, text)
            click.echo(f"removed {removed} goal(s) on {text} from {project}")
    except StoreConfigError as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:
        if type(exc).__name__ == "InsufficientPrivilege":
            raise click.ClickException(f"this role may not change goals: {exc}") from None
        raise
    finally:
        conn.close()
