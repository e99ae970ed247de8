"""``trackmux import [--format F] SOURCE... [--project P] [--name N] [--dir ROOT] [--follow]
[--json]``: runs from other trackers as ordinary trackmux runs (trackmux/importers/).

Each source (a TensorBoard folder, a wandb run folder, ``mlflow:RUN_ID_OR_EXPERIMENT``,
a trackio database, a ``trainer_state.json``, a console log, a JSONL or CSV file) becomes
one run per run it holds; importing it again adds only what is new. Text for a person,
or with ``--json`` one object per run per line: ``{"source", "format", "run", "dir",
"points", "steps", "new_points", "damage": [{"file", "offset", "count", "what"}]}``.

Exit status: 0 when every source was read whole; 1 when a source could not be read at all
or part of one was damaged (what could be read is imported, the damage is printed); 2 on
bad usage.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Any

import click
import orjson

from trackmux.cli.output import echo


@click.command("import")
@click.argument("sources", metavar="SOURCE...", nargs=-1, required=True)
@click.option("--format", "fmt", default=None, metavar="FORMAT",
              help="Read the sources as this format (default: detected): tensorboard, "
                   "wandb, mlflow, trackio, trainer_state, console, jsonl, csv.")
@click.option("--project", default=None,
              help="Project of the imported runs (default: the source's own, else "
                   "'imported').")
@click.option("--name", default=None,
              help="Name of the imported run (default: the source's own name).")
@click.option("--dir", "root", type=click.Path(file_okay=False), default=None,
              help="Spool root (default: $TRACKMUX_DIR or ./trackmux).")
@click.option("--follow", is_flag=True,
              help="Keep reading the sources as they grow (Ctrl-C ends), with the doctor.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run per line.")
@click.option("--tracking-uri", default=None, metavar="URI",
              help="MLflow tracking URI for mlflow: sources (default: MLFLOW_TRACKING_URI).")
@click.option("--doctor", "doctor", default=None, metavar="SETTING",
              help="With --follow: the live doctor ('off', or a rules file; default: "
                   "TRACKMUX_DOCTOR, on).")
@click.option("--interval", type=click.FloatRange(0.05, 60), default=0.5, show_default=True,
              help="With --follow: seconds between two reads of the sources.")
@click.option("--to", "to", default=None, metavar="NAME[,NAME]",
              help="With --follow: deliver each run live to these backends (webhook or "
                   "console for the doctor's alerts, a tracker to mirror it).")
@click.option("-o", "--option", "backend_options", multiple=True,
              help="With --to: backend option BACKEND.KEY=VALUE (repeatable).")
def import_(sources: tuple[str, ...], fmt: str | None, project: str | None,
            name: str | None, root: str | None, follow: bool, as_json: bool,
            tracking_uri: str | None, doctor: str | None, interval: float,
            to: str | None, backend_options: tuple[str, ...]) -> None:
    """Import runs from TensorBoard, wandb, MLflow, trackio, trainer_state.json, console
    logs, JSONL or CSV into trackmux runs (again: only what is new)."""
    from trackmux.core import settings
    from trackmux.importers import FORMATS, SourceError, find_runs
    from trackmux.importers.engine import RunImport

    if fmt is not None and fmt not in FORMATS:
        raise click.BadParameter(f"{fmt!r} is not one of {', '.join(sorted(FORMATS))}",
                                 param_hint="--format")
    for value, hint in ((project, "--project"), (name, "--name")):
        if value is not None and not value.strip():
            raise click.BadParameter("must not be empty", param_hint=hint)
    base = settings.spool_root(root)
    options: dict[str, Any] = {
        "tracking_uri": tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")}
    failed = False
    said: set[str] = set()

    def fail(message: str) -> None:
        nonlocal failed
        failed = True
        if message not in said:  # a followed source is looked at again and again
            said.add(message)
            echo(f"trackmux import: {message}", err=True)

    #: sources looked at again while following: folders where new runs may appear
    again: set[str] = set()
    looked = False

    def discover() -> list[RunImport]:
        nonlocal looked
        found: list[RunImport] = []
        for source in sources if not looked else [s for s in sources if s in again]:
            try:
                runs = find_runs(source, fmt, options)
            except SourceError as exc:
                fail(str(exc))
                continue
            except Exception as exc:  # a library's surprise (permissions, a dead server)
                fail(f"{source}: cannot be read: {type(exc).__name__}: {exc}")
                continue
            if not runs:
                fail(f"{source}: no run found in it")
            if any(run.format == "tensorboard" for run in runs) and os.path.isdir(source):
                again.add(source)
            many = len(runs) > 1
            for run in runs:
                named = f"{name}-{run.name}" if name and many else name
                try:
                    found.append(RunImport(run, base, project, named))
                except ValueError as exc:
                    raise click.UsageError(str(exc)) from None
        looked = True
        return found

    if to and not follow:
        raise click.UsageError("--to delivers a followed run live; for a one-off import, "
                               "run `trackmux sync RUN --to NAME` after it")
    deliver = _backends(to, backend_options) if to else {}
    if follow:
        failed = _follow(discover, fail, doctor, interval, as_json, deliver) or failed
    else:
        for item in discover():
            try:
                item.open()
            except SourceError as exc:
                fail(str(exc))
                continue
            try:
                item.pull(live=False)
            except SourceError as exc:
                fail(str(exc))
            except (OSError, sqlite3.Error) as exc:  # the spool side: disk full, locked
                fail(f"{item.source.where}: cannot write the run {item.dir}: "
                     f"{type(exc).__name__}: {exc}")
            finally:
                with contextlib.suppress(OSError, sqlite3.Error):
                    item.close("finished")
            report(item, as_json)
            failed = failed or bool(item.outcome.damage)
    if failed:
        raise SystemExit(1)


def report(item: Any, as_json: bool) -> None:
    outcome = item.outcome
    if as_json:
        echo(orjson.dumps(outcome.as_json()).decode())
        return
    echo(f"{outcome.source} ({outcome.format}) -> {item.project}/{outcome.run}: "
         f"{outcome.new_points} new points, {outcome.points} in all, {outcome.steps} steps"
         f"  name={item.name}")
    for damage in outcome.damage:
        echo(f"    damage: {damage.line()}")


def _backends(to: str, pairs: tuple[str, ...]) -> dict[str, Any]:
    """Factories of the ``--to`` backends, their options checked now (a usage error)."""
    import functools

    from trackmux.cli.sync import check_options, parse_options
    from trackmux.core.backends.registry import get_registry

    names = [n.strip() for n in to.split(",") if n.strip()]
    options = parse_options(pairs)
    check_options(names, options)
    registry = get_registry()
    return {name: functools.partial(registry.backend(name, options.get(name)).factory,
                                    dict(options.get(name, {}))) for name in names}


def _follow(discover: Any, fail: Any, doctor: str | None, interval: float,
            as_json: bool, deliver: dict[str, Any]) -> bool:
    """Follow the sources until Ctrl-C or their end; True when any run had damage."""
    from trackmux.importers import SourceError
    from trackmux.importers.engine import RunImport
    from trackmux.importers.follow import Follower

    watchers = []
    if doctor != "off":
        try:
            from trackmux.doctor.setup import watchers_for

            watchers = watchers_for(doctor)
        except ModuleNotFoundError as exc:
            echo(f"trackmux import: the live doctor is off ({exc.name} is not installed: "
                 "pip install 'trackmux[doctor]')", err=True)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--doctor") from None
    opened: set[Path] = set()

    def adopt() -> list[RunImport]:
        ready = []
        for item in discover():
            if item.dir in opened:
                ready.append(item)  # the follower keeps its own, already open
                continue
            try:
                item.open()
            except SourceError as exc:
                fail(str(exc))
                continue
            opened.add(item.dir)
            if not as_json:
                echo(f"following {item.source.where} -> {item.project}/{item.run_id} "
                     "(Ctrl-C ends)", err=True)
            ready.append(item)
        return ready

    def say(line: str) -> None:
        echo(line, err=True)

    follower = Follower(adopt, watchers=watchers, interval=interval, say=say,
                        deliver=deliver)
    damaged = False
    for item in follower.run():
        item.close("finished")
        report(item, as_json)
        damaged = damaged or bool(item.outcome.damage)
    return damaged
