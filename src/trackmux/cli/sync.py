"""``trackmux sync RUN... [--to NAME[,NAME]]``: deliver what each backend has not acknowledged.

The same delivery worker as a live run; a backend the run never used gets everything,
and its remote identity is kept so a later sync continues the same remote run. Exit
status: 0 when everything is delivered, 1 while anything is left, when a backend failed
permanently (its cause is printed) or when part of the spool was damaged (what was intact
is delivered; the damage is printed), 2 for a usage error (a bad ``-o`` option included)
or a sync of the same run and backend already in progress.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import click
import orjson

from trackmux.core.errors import SpoolLockedError, UnknownBackendError
from trackmux.core.redact import REDACTED
from trackmux.core.registry import get_registry
from trackmux.core.runs import resolve_run, summarize
from trackmux.core.sync import deliver_by_name


def option_value(text: str) -> Any:
    """A number, true/false or null given on the command line as the typed value (so
    ``-o mlflow.http_timeout=5`` passes 5, as ``backend_options`` would); anything else
    stays a string."""
    if _SCALAR.fullmatch(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:  # "007": not a JSON number, keep the text
            return text
    return text


_SCALAR = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?|true|false|null")


def parse_options(pairs: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """``-o mlflow.tracking_uri=sqlite:///x.db`` -> {"mlflow": {"tracking_uri": ...}}."""
    out: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        name, dot, rest = pair.partition(".")
        key, eq, value = rest.partition("=")
        if not (dot and eq and name and key):
            raise click.BadParameter(f"{pair!r} is not BACKEND.KEY=VALUE", param_hint="--option")
        out.setdefault(name, {})[key] = option_value(value)
    return out


def check_options(names: list[str], options: dict[str, dict[str, Any]]) -> None:
    """Build each backend once so a bad option is a usage error now, not an ``open`` that
    the delivery worker would retry (with backoff) until ``--timeout``, or forever."""
    registry = get_registry()
    for name in names:
        try:
            registry.backend(name).check_options(options.get(name, {}))
        except UnknownBackendError as exc:
            raise click.UsageError(str(exc)) from None
        except ValueError as exc:
            raise click.UsageError(f"backend {name!r}: {exc}") from None


def stored_options(meta: dict[str, Any], name: str) -> dict[str, Any]:
    """The options the live run used for ``name``, minus redacted secrets."""
    stored = (meta.get("backend_options") or {}).get(name) or {}
    return {k: v for k, v in stored.items() if v != REDACTED}


@click.command()
@click.argument("run_args", metavar="RUN...", nargs=-1, required=True)
@click.option("--to", "to", help="Comma list of backends (default: the run's backends).")
@click.option("-o", "--option", "options", multiple=True,
              help="Backend option BACKEND.KEY=VALUE (repeatable).")
@click.option("--dir", "root", type=click.Path(file_okay=False),
              help="Spool root for run ids (default $TRACKMUX_DIR or ./trackmux).")
@click.option("--timeout", type=float, default=None, help="Give up after this many seconds.")
@click.option("--progress/--no-progress", default=None, help="Show a progress bar.")
def sync(run_args: tuple[str, ...], to: str | None, options: tuple[str, ...],
         root: str | None, timeout: float | None, progress: bool | None) -> None:
    """Deliver spooled runs to backends, exactly once, resumable after interruption."""
    from tqdm import tqdm

    cli_options = parse_options(options)
    show = sys.stderr.isatty() if progress is None else progress
    left = 0
    damaged = False
    failed = False
    for arg in run_args:
        try:
            run_dir = resolve_run(arg, root)
            summary = summarize(run_dir)
        except FileNotFoundError as exc:
            raise click.UsageError(str(exc)) from None
        names = [n.strip() for n in to.split(",") if n.strip()] if to else summary.backends
        if not names:
            click.echo(f"{run_dir.name}: no backends to deliver to (use --to)")
            continue
        merged = {n: {**stored_options(summary.meta, n), **cli_options.get(n, {})}
                  for n in names}
        check_options(names, merged)
        bars: dict[str, Any] = {}

        def on_progress(p: Any, bars: dict[str, Any] = bars, total: int = summary.last_seq
                        ) -> None:
            if not show:
                return
            bar = bars.get(p.backend)
            if bar is None:
                bar = bars[p.backend] = tqdm(total=total, desc=p.backend,
                                             unit="ev", leave=True)
            bar.n = p.acked
            bar.set_postfix_str(p.state, refresh=True)

        try:
            result = deliver_by_name(run_dir, names, merged, timeout=timeout,
                                     on_progress=on_progress)
        except SpoolLockedError as exc:
            click.echo(f"trackmux sync: {exc}", err=True)
            sys.exit(2)
        except UnknownBackendError as exc:
            raise click.UsageError(str(exc)) from None
        finally:
            for bar in bars.values():
                bar.close()
        for name in names:
            acked = result.acked.get(name, 0)
            pending = result.target - acked
            before = summary.delivered.get(name, 0)
            if name in result.failed:
                state = f"FAILED, not retried: {result.failed[name]}"
                failed = True
            elif pending > 0:
                state = f"{pending} events left"
            elif acked > before:
                state = f"delivered {acked - before} events, up to date"
            else:
                state = "nothing to deliver, already up to date"
            click.echo(f"{run_dir.name} -> {name}: {state} "
                       f"(acknowledged {acked} of {result.target})")
            if result.quarantined.get(name):
                click.echo(f"  {name}: {result.quarantined[name]} event(s) quarantined "
                           "(refused for good; see trackmux show)", err=True)
            left += max(0, pending)
        for problem in result.problems:
            if problem.kind == "failed":
                continue  # printed with its backend above
            click.echo(f"  {problem.backend}: {problem.kind}: {problem.message}", err=True)
        if result.damage:
            damaged = True
            click.echo(f"  spool damage ({len(result.damage)}): "
                       + "; ".join(result.damage[:5]), err=True)
    sys.exit(1 if left or damaged or failed else 0)
