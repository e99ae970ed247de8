"""``trackmux doctor RUN... [--json] [--rules FILE]``: the doctor's rules over runs.

The same detectors that watch a live run (trackmux/doctor/), over each run's spool, finished
or live. Text for a person; ``--json`` one object per run per line,
``{"run": id, "findings": [{"rule", "severity", "step", "keys", "message", "evidence"}]}``
(and ``"explain"`` with ``--explain``: the dialects recognised, which key fed which signal,
which rules read nothing). The findings the live doctor stored in the spool (a ``stall``,
judged only while the trainer lived) are merged with the re-run's (doctor/offline.py).
Exit status 0 when no run has a warning or critical finding, 1 when one has, 2 on bad
usage and when a spool cannot be read (wholly: refused before any output; in part: the
findings of what could be read, then ``"damage"``): an unreadable spool is never a
healthy verdict.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from trackmux.cli.output import echo


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
    from trackmux.doctor.offline import diagnose_run

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
    serious = damaged = False
    for run_dir in dirs:
        try:
            diagnosis = diagnose_run(run_dir, setting)
        except Exception as exc:  # an unreadable spool is this run's problem, not usage
            echo(f"{run_dir}: cannot read the spool: {type(exc).__name__}: {exc}", err=True)
            damaged = True
            continue
        found = diagnosis.findings
        damaged = damaged or bool(diagnosis.damage)
        serious = serious or any(severity_rank(f.severity) >= 1 for f in found)
        if as_json:
            line: dict[str, object] = {"run": run_dir.name,
                                       "findings": [f.as_dict() for f in found]}
            if explain:
                line["explain"] = diagnosis.explain
            if diagnosis.damage:
                line["damage"] = diagnosis.damage
            echo(orjson.dumps(line).decode())
        else:
            echo(f"{run_dir.name}: " + (f"{len(found)} finding(s)" if found
                                        else "no findings"))
            for f in found:
                keys = f" [{', '.join(f.keys)}]" if f.keys else ""
                echo(f"  {f.severity.upper():8} {f.rule} @ step {f.step}{keys}")
                echo(f"           {f.message}")
            if explain:
                _print_explanation(diagnosis.explain)
        if diagnosis.damage:
            echo(f"{run_dir.name}: the spool is damaged; these findings cover only what "
                 f"could be read ({len(diagnosis.damage)} problem(s): "
                 f"{'; '.join(diagnosis.damage[:3])})", err=True)
    sys.exit(2 if damaged else 1 if serious else 0)


def _print_explanation(why: dict[str, object]) -> None:
    """``--explain`` as text: dialects, key -> signal, rules that had nothing to read."""
    dialects = why.get("dialects") or []
    echo(f"  dialects: {', '.join(dialects) or 'none recognised'}")  # type: ignore[arg-type]
    signals = why.get("signals") or {}
    for signal, keys in signals.items():  # type: ignore[attr-defined]
        fed = ", ".join(f"{k['key']} ({k['dialect']})" for k in keys)
        echo(f"  signal {signal}: {fed}")
    unread = why.get("unread_rules") or []
    echo("  rules with nothing to read: " + (", ".join(unread) or "none"))  # type: ignore[arg-type]
