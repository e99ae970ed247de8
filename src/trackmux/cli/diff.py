"""``trackmux diff RUN_A RUN_B``: what differs between two runs (config, code, command,
packages, Python, hardware, environment variable names), read from their spools.

Exit status (as ``diff(1)``): 0 when nothing differs, 1 when something does, 2 for bad
input (a run that cannot be found or read). A run without provenance (recorded before it
existed, or with ``provenance=False``) is compared on its config only, and says so.
"""

from __future__ import annotations

import sys
from typing import Any

import click
import orjson

from trackmux.cli.output import echo
from trackmux.core.errors import SpoolUnreadableError, SpoolUnsafeError
from trackmux.core.spool.runs import resolve_run


def _show(value: Any) -> str:
    if value is None:
        return "(absent)"
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return text if len(text) <= 120 else text[:117] + "..."


@click.command()
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@click.option("--dir", "root", type=click.Path(file_okay=False),
              help="Spool root for run ids (default $TRACKMUX_DIR or ./trackmux).")
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON.")
def diff(run_a: str, run_b: str, root: str | None, as_json: bool) -> None:
    """Show what differs between two runs. Exit 0: same; 1: different; 2: bad input."""
    from trackmux.provenance.compare import AREAS, compare, load

    try:
        a = load(resolve_run(run_a, root))
        b = load(resolve_run(run_b, root))
    except (FileNotFoundError, SpoolUnsafeError, SpoolUnreadableError) as exc:
        raise click.UsageError(str(exc)) from None
    result = compare(a, b)
    missing = [str(r.run_dir) for r in (a, b) if r.provenance is None]
    different = any(result[area] for area in AREAS)
    if as_json:
        echo(orjson.dumps({"a": str(a.run_dir), "b": str(b.run_dir),
                                 "same": not different, "no_provenance": missing,
                                 "differences": result}, option=orjson.OPT_INDENT_2).decode())
    else:
        echo(f"a: {a.run_dir}\nb: {b.run_dir}")
        for path in missing:
            echo(f"note: {path} has no provenance; code, packages and hardware are "
                       "not compared for it")
        for area in AREAS:
            if not result[area]:
                continue
            echo(f"{area} ({len(result[area])}):")
            for item in result[area]:
                echo(f"  {item['key']}: {_show(item['a'])} -> {_show(item['b'])}")
        if not different:
            echo("no differences")
    sys.exit(1 if different else 0)
