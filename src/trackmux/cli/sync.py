"""``trackmux sync RUN... [--to NAME[,NAME]]``: deliver what each backend has not acknowledged.

The same delivery worker as a live run; a backend the run never used gets everything,
and its remote identity is kept so a later sync continues the same remote run. Exit
status: 0 when everything is delivered, 1 while anything is left, when a backend failed
permanently (its cause is printed) or when part of the spool was damaged (what was intact
is delivered; the damage is printed), 2 for a usage error (a bad ``-o`` option included)
or a sync of the same run and backend already in progress, 3 when a backend's destination
that can be checked before delivering (the team store: one connection, 5 s timeout) cannot
be reached or used (the cause is printed in one line; the other backends are delivered).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import click
import orjson

from trackmux.cli.output import echo
from trackmux.core.backends.registry import get_registry
from trackmux.core.delivery.sync import SyncResult, deliver_by_name
from trackmux.core.errors import (
    SpoolLockedError,
    SpoolUnreadableError,
    SpoolUnsafeError,
    UnknownBackendError,
)
from trackmux.core.spool.runs import RunSummary, resolve_run, summarize
from trackmux.core.values.redact import REDACTED


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
            registry.backend(name, options.get(name)).check_options(
                options.get(name, {}))
        except UnknownBackendError as exc:
            raise click.UsageError(str(exc)) from None
        except ValueError as exc:
            raise click.UsageError(f"backend {name!r}: {exc}") from None


def unreachable(names: list[str], options: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Per backend whose destination can be checked now and cannot be used, why (one
    line). A backend may offer ``probe()`` (the postgres backend connects once, 5 s
    timeout): without it a store that refuses or never answers would be an ``open``
    retried with backoff, in silence, until ``--timeout`` or forever."""
    registry = get_registry()
    out = {}
    for name in names:
        backend = registry.backend(name, options.get(name)).factory(dict(options.get(name)
                                                                         or {}))
        probe = getattr(backend, "probe", None)
        if not callable(probe):
            continue
        try:
            probe()
        except Exception as exc:
            out[name] = " ".join(str(exc).split()) or type(exc).__name__
    return out


def stored_options(meta: dict[str, Any], name: str) -> tuple[dict[str, Any], list[str]]:
    """The options the live run used for ``name``, and the names of those that held a
    secret: secrets are never stored, so they come from the environment (the backend's own
    variables, e.g. ``WANDB_API_KEY``) or from ``-o`` now."""
    stored = (meta.get("backend_options") or {}).get(name) or {}
    kept = {k: v for k, v in stored.items() if not _holds_redaction(v)}
    return kept, sorted(k for k in stored if k not in kept)


def _holds_redaction(value: Any) -> bool:
    if isinstance(value, str):
        return REDACTED in value or "://***@" in value
    if isinstance(value, dict):
        return any(_holds_redaction(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_redaction(v) for v in value)
    return False


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
    blocked = False
    for arg in run_args:
        try:
            run_dir = resolve_run(arg, root)
            summary = summarize(run_dir)
        except (FileNotFoundError, SpoolUnsafeError, SpoolUnreadableError) as exc:
            raise click.UsageError(str(exc)) from None
        names = [n.strip() for n in to.split(",") if n.strip()] if to else summary.backends
        if not names:
            echo(f"{run_dir.name}: no backends to deliver to (use --to)")
            continue
        merged = {}
        for n in names:
            kept, secret = stored_options(summary.meta, n)
            missing = [k for k in secret if k not in cli_options.get(n, {})]
            if missing:
                echo(f"{run_dir.name} -> {n}: option(s) {', '.join(missing)} held a "
                     "secret and were not stored; the backend reads its environment, "
                     f"or pass -o {n}.{missing[0]}=...", err=True)
            merged[n] = {**kept, **cli_options.get(n, {})}
        check_options(names, merged)
        for name, why in unreachable(names, merged).items():
            echo(f"{run_dir.name} -> {name}: cannot deliver: {why}", err=True)
            names.remove(name)
            blocked = True
        if not names:
            continue
        places = Destinations(run_dir)
        cursors = {n: places.cursor(n, summary, cli_options.get(n, {})) for n in names}
        places.save()
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
            result = deliver_by_name(run_dir, names, merged, cursors=cursors,
                                     timeout=timeout, on_progress=on_progress)
        except SpoolLockedError as exc:
            echo(f"trackmux sync: {exc}", err=True)
            sys.exit(2)
        except UnknownBackendError as exc:
            raise click.UsageError(str(exc)) from None
        finally:
            for bar in bars.values():
                bar.close()
        for backend in names:
            name = cursors[backend]
            if name != backend:
                echo(f"{run_dir.name} -> {backend}: a new destination "
                     f"({name.partition('@')[2]}): delivered there from the first "
                     "event, with acknowledgements of its own; the run's earlier "
                     f"destination keeps its progress (sync without -o continues it)")
            if name in result.failed:
                echo(f"{run_dir.name} -> {name}: FAILED, not retried: "
                     f"{result.failed[name]} (acknowledged "
                     f"{result.acked.get(name, 0)} of {result.target})")
                failed = True
            else:
                echo(f"{run_dir.name} -> {name}: {outcome(result, name)}")
            if result.quarantined.get(name):
                echo(f"  {name}: {result.quarantined[name]} event(s) quarantined "
                     "(refused for good; see trackmux show)", err=True)
            left += max(0, result.target - result.acked.get(name, 0))
        for problem in result.problems:
            if problem.kind == "failed":
                continue  # printed with its backend above
            echo(f"  {problem.backend}: {problem.kind}: {problem.message}", err=True)
        if result.damage:
            damaged = True
            echo(f"  spool damage ({len(result.damage)}): "
                 + "; ".join(result.damage[:5]), err=True)
    sys.exit(3 if blocked else 1 if left or damaged or failed else 0)


class Destinations:
    """Where each cursor of a run delivered: ``<run dir>/sync-destinations.json`` maps a
    cursor name to the destination options (``Backend.destination_options``: a folder, a
    server, a project) it was first synced with. A backend's own cursor otherwise has the
    destination the live run used (its stored options; the defaults when none)."""

    FILE = "sync-destinations.json"

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / self.FILE
        try:
            loaded = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            loaded = {}
        self.known: dict[str, dict[str, Any]] = loaded if isinstance(loaded, dict) else {}
        self._changed = False

    def cursor(self, name: str, summary: RunSummary, given: dict[str, Any]) -> str:
        """The cursor ``name``'s acknowledgements are kept under: its own, unless ``-o``
        moves a destination option away from where that cursor delivered; the new
        destination is ``name@option=value`` (passwords never in it) and gets every
        event from the first. A cursor that never delivered anything (a bad DSN from the
        start) is not a place anyone has data in: ``-o`` fixes it in place, so the
        backend's pending events go there and no phantom "pending" stays behind."""
        factory = get_registry().backend(name).factory
        wanted = {k: v for k, v in given.items()
                  if k in getattr(factory, "destination_options", ())}
        if not wanted:
            return name
        own = self.known.get(name)
        if own is None and name in summary.backends:  # the live run's (defaults if none)
            own = (summary.meta.get("backend_options") or {}).get(name) or {}
        if own is None or (not summary.delivered.get(name)
                           and not summary.remote_ids.get(name)):
            self._record(name, wanted)  # nothing delivered yet: its own cursor
            return name
        if all(same_place(own.get(k), v) for k, v in wanted.items()):
            return name
        moved = name + "@" + ",".join(f"{k}={_shown(v)}" for k, v in sorted(wanted.items()))
        if moved not in self.known:
            self._record(moved, wanted)
        return moved

    def _record(self, cursor: str, wanted: dict[str, Any]) -> dict[str, Any]:
        self.known[cursor] = {k: _shown(v) for k, v in wanted.items()}  # no secret on disk
        self._changed = True
        return self.known[cursor]

    def save(self) -> None:
        if self._changed:
            fd = os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC
                         | getattr(os, "O_NOFOLLOW", 0), 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(orjson.dumps(self.known))


_USERINFO = re.compile(r"(?i)^([a-z][a-z0-9+.\-]*://)[^/@\s]*@")
_PASSWORD_WORD = re.compile(r"(?i)\bpassword\s*=\s*\S+")


def _place(value: Any) -> Any:
    """Where a destination option points, leaving out who connects and with what secret
    (``postgresql://ro:pw@db/x`` and the stored ``postgresql://***@db/x`` are one place)."""
    if not isinstance(value, str):
        return value
    return " ".join(_PASSWORD_WORD.sub("", _USERINFO.sub(r"\1", value.strip())).split())


def same_place(stored: Any, given: Any) -> bool:
    return bool(stored == given or _place(stored) == _place(given))


def _shown(value: Any) -> Any:
    """A destination option as a cursor name or the destinations file may hold it."""
    if not isinstance(value, str):
        return value
    from trackmux.core.values.redact import redact_text

    return redact_text(value, env_secrets=[])


def outcome(result: SyncResult, name: str) -> str:
    """One line per backend: what this sync delivered, where, and what is left."""
    acked = result.acked.get(name, 0)
    pending = result.target - acked
    now = result.delivered_now(name)
    where = result.where.get(name)
    to = f" to {where}" if where else ""
    if now == 0 and pending <= 0:
        return f"nothing to do: all {result.target} events were already delivered{to}"
    done = f"delivered {now} event{'' if now == 1 else 's'} now{to}"
    if pending <= 0:
        return f"{done}; complete ({acked} of {result.target})"
    return f"{done}; {pending} events left (acknowledged {acked} of {result.target})"
