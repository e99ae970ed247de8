"""``trackmux runs [DIR]``: every run with its state, events, and per-backend delivery."""

from __future__ import annotations

from pathlib import Path

import click

from trackmux.core import settings
from trackmux.core.spool.runs import describe_attempt, find_runs, summarize


@click.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
def runs(directory: Path | None) -> None:
    """List runs under DIRECTORY (default: $TRACKMUX_DIR or ./trackmux)."""
    root = settings.spool_root(directory)
    if directory is not None and not root.is_dir():
        raise click.UsageError(f"no directory {root}")
    found = find_runs(root)
    if not found:
        click.echo(f"no runs under {root}")
        return
    for run_dir in found:
        try:
            summary = summarize(run_dir)
        except Exception as exc:  # one unreadable spool must not hide the others
            click.echo(f"{run_dir}: unreadable spool: {type(exc).__name__}: {exc}")
            continue
        meta = summary.meta
        dropped = meta.get("dropped_events")
        extra = f", {dropped} events dropped (spool full)" if dropped else ""
        click.echo(f"{meta.get('project', run_dir.parent.name)}/{run_dir.name}  "
                   f"{summary.state}  {summary.events} events{extra}  name={meta.get('name')}")
        for name in summary.backends:
            acked = summary.delivered.get(name, 0)
            pending = max(0, summary.last_seq - acked)
            status = "delivered" if pending == 0 else f"{pending} pending"
            if summary.quarantined.get(name):
                status += f", {summary.quarantined[name]} quarantined"
            click.echo(f"    {name}: {status} (acknowledged up to event {acked} of "
                       f"{summary.last_seq})")
        for attempt in summary.attempts if len(summary.attempts) > 1 else ():
            click.echo(f"    {describe_attempt(attempt)}")
        if summary.damage:
            click.echo(f"    damage: {len(summary.damage)} problem(s): {summary.damage[0]}")
        click.echo(f"    {run_dir}")
