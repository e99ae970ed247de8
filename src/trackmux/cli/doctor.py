"""``trackmux doctor RUN... [--json] [--rules FILE]``: the doctor's rules over runs.

The same detectors that watch a live run (trackmux/doctor/), over each run's spool, finished
or live. Text for a person; ``--json`` one object per run per line,
``{"run": id, "findings": [{"rule", "severity", "step", "keys", "message", "evidence"}]}``
(and ``"explain"`` with ``--explain``: the dialects recognised, which key fed which signal,
which rules read nothing). Exit status
0 when no run has a warning or critical finding, 1 when one has, 2 on bad usage.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson


@click.command()
@click.argument("runs", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run per line.")
@click.option("--rules", default=None,
              help="Rules file (TOML or YAML), 'off' for none, default: every rule with its "
                   "defaults (docs/doctor.md).")
@click.option("--explain", is_flag=True,
              help="Say which key fed which signal and which rules had nothing to read.")
@click.option("--dir", "root", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Spool root to find run ids in (default: TRACKMUX_DIR, else ./trackmux).")
def doctor(runs: tuple[str, ...], as_json: bool, rules: str | None, explain: bool,
           root: Path | None) -> None:
    """Find what went wrong in RUNS (run directories, run ids or PROJECT/RUN_ID)."""
    from trackmux.core.spool.runs import resolve_run
    from trackmux.doctor.findings import severity_rank
    from trackmux.doctor.offline import diagnose_explained

    setting: object = True if rules is None else rules
    try:
        from trackmux.doctor.config import resolve

        resolve(setting)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--rules") from exc
    dirs = []
    for run in runs:
        try:
            dirs.append(resolve_run(run, root))
        except (FileNotFoundError, ValueError) as exc:
            raise click.BadParameter(str(exc), param_hint="RUN") from exc
    serious = False
    for run_dir in dirs:
        try:
            found, why = diagnose_explained(run_dir, setting)
        except Exception as exc:  # an unreadable spool is this run's problem, not usage
            click.echo(f"{run_dir}: cannot read: {type(exc).__name__}: {exc}", err=True)
            serious = True
            continue
        found.sort(key=lambda f: f.step)
        serious = serious or any(severity_rank(f.severity) >= 1 for f in found)
        if as_json:
            record: dict[str, object] = {"run": run_dir.name,
                                         "findings": [f.as_dict() for f in found]}
            if explain:
                record["explain"] = why
            sys.stdout.buffer.write(orjson.dumps(record) + b"\n")
            sys.stdout.flush()
            continue
        click.echo(f"{run_dir.name}: " + (f"{len(found)} finding(s)" if found
                                          else "no findings"))
        for f in found:
            keys = f" [{', '.join(f.keys)}]" if f.keys else ""
            click.echo(f"  {f.severity.upper():8} {f.rule} @ step {f.step}{keys}")
            click.echo(f"           {f.message}")
        if explain:
            click.echo(f"  dialects: {', '.join(why['dialects']) or 'none recognised'}")
            for signal, keys in why["signals"].items():
                fed = ", ".join(f"{k['key']} ({k['dialect']})" for k in keys)
                click.echo(f"  signal {signal}: {fed}")
            click.echo("  rules with nothing to read: " + (", ".join(why["unread_rules"])
                                                            or "none"))
    sys.exit(1 if serious else 0)
