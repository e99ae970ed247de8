"""``trackmux runs [DIR]``: every run with its state, events, and per-backend delivery."""

from __future__ import annotations

from pathlib import Path

import click

from trackmux.cli.delivery_reason import last_problems
from trackmux.cli.output import echo
from trackmux.core import settings
from trackmux.core.spool.runs import (
    describe_attempt,
    find_runs,
    pruned_words,
    stop_words,
    summarize,
)


@click.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--store", "store", envvar="TRACKMUX_STORE", metavar="URI",
              help="List the runs of this store: a postgresql:// DSN (the team store) or a "
                   "spool folder (default: TRACKMUX_STORE).")
@click.option("--json", "as_json", is_flag=True, help="The run list as JSON.")
def runs(directory: Path | None, store: str | None, as_json: bool) -> None:
    """List runs under DIRECTORY (default: $TRACKMUX_DIR or ./trackmux), or in --store."""
    if store or as_json:
        from trackmux.cli.store import list_runs

        list_runs(store or directory, as_json)
        return
    root = settings.spool_root(directory)
    if directory is not None and not root.is_dir():
        raise click.UsageError(f"no directory {root}")
    found = find_runs(root)
    if not found:
        echo(f"no runs under {root}")
        return
    for run_dir in found:
        try:
            summary = summarize(run_dir)
        except Exception as exc:  # one unreadable spool must not hide the others
            echo(f"{run_dir}: unreadable spool: {type(exc).__name__}: {exc}")
            continue
        meta = summary.meta
        if not meta.get("run_id") and summary.events == 0:  # as every reading command says
            why = summary.damage[0] if summary.damage else "no run recorded in it"
            echo(f"{run_dir.parent.name}/{run_dir.name}  unreadable  the spool cannot "
                       f"be read ({why})\n    damage: {len(summary.damage)} problem(s)\n"
                       f"    {run_dir}")
            continue
        extra = dropped_words(meta)
        bad = sum(d.get("count", 0) for d in meta.get("input_dropped") or []
                  if isinstance(d, dict))
        extra += f", {bad} bad values dropped at the door (trackmux show)" if bad else ""
        echo(f"{meta.get('project', run_dir.parent.name)}/{run_dir.name}  "
             f"{summary.state}  {summary.events} events{extra}  name={meta.get('name')}")
        if pruned_words(meta):
            echo(f"    {pruned_words(meta)}")
        for line in stop_words(meta):
            echo(f"    {line}")
        for name in summary.backends:
            acked = summary.delivered.get(name, 0)
            pending = max(0, summary.last_seq - acked)
            status = "delivered" if pending == 0 else f"{pending} pending"
            if summary.quarantined.get(name):
                status += f", {summary.quarantined[name]} quarantined"
            echo(f"    {name}: {status} (acknowledged up to event {acked} of "
                 f"{summary.last_seq})")
            if pending and name in (problems := last_problems(run_dir)):
                echo(f"      why: {problems[name]}")
        for attempt in summary.attempts if len(summary.attempts) > 1 else ():
            echo(f"    {describe_attempt(attempt)}")
        if summary.damage:
            echo(f"    damage: {len(summary.damage)} problem(s): {summary.damage[0]}")
        echo(f"    {run_dir}")


def dropped_words(meta: dict[str, object]) -> str:
    """The run's dropped events by cause: a full spool, events that could not be stored
    (an oversized one, named in the trainer's log), attached workers' full buffers."""
    def count(key: str) -> int:
        value = meta.get(key)
        return value if isinstance(value, int) else 0

    dropped, unstorable, attached = (count("dropped_events"), count("dropped_unstorable"),
                                     count("dropped_attached"))
    full = dropped - unstorable - attached
    parts = ([f"{full} events dropped (spool full)"] if full > 0 else []) + (
        [f"{unstorable} events dropped (could not be stored)"] if unstorable else []) + (
        [f"{attached} events dropped (attached workers' buffers full)"] if attached else [])
    return "".join(f", {p}" for p in parts)
