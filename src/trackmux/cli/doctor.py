"""``trackmux doctor RUN... [--json] [--rules FILE]``: the doctor's rules over runs.

The same detectors that watch a live run (trackmux/doctor/), over each run's spool, finished
or live. Text for a person; ``--json`` one object per run per line,
``{"run": id, "findings": [{"rule", "severity", "step", "keys", "message", "evidence"}],
"coverage": {"judged", "verdict", "signals", "not_run", "declared_unseen"}}`` (and
``"explain"`` with ``--explain``: the dialects recognised, which key fed which signal,
which rules read nothing). Every run's result says its coverage (doctor/coverage.py):
which signals were read from which keys and which rules could not run. The findings the
live doctor stored in the spool (a ``stall``, judged only while the trainer lived) are
merged with the re-run's (doctor/offline.py).

Exit status (the first that applies, over all runs): 2 on bad usage and when a spool
cannot be read (wholly: refused before any output; in part: the findings of what could be
read, then ``"damage"``): an unreadable spool is never a healthy verdict; 1 when a run has
a warning or critical finding; 3 when a run is not judged (the doctor read no reward and
no KL in it: silence there means nothing); 0 otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import orjson

from trackmux.cli.output import echo


@click.command(epilog="Exit status: 0 judged, no warning or critical finding; 1 a warning or "
                     "critical finding; 2 bad usage or an unreadable spool; 3 not judged (no "
                     "reward and no KL key read: declare them with [signals] in the rules file "
                     "or trackmux.init(signals=...)).")
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
    serious = damaged = unjudged = False
    for run_dir in dirs:
        try:
            diagnosis = diagnose_run(run_dir, setting)
        except Exception as exc:  # an unreadable spool is this run's problem, not usage
            echo(f"{run_dir}: cannot read the spool: {type(exc).__name__}: {exc}", err=True)
            damaged = True
            continue
        found = diagnosis.findings
        coverage = diagnosis.coverage
        damaged = damaged or bool(diagnosis.damage)
        serious = serious or any(severity_rank(f.severity) >= 1 for f in found)
        unjudged = unjudged or not coverage.get("judged")
        if as_json:
            line: dict[str, object] = {"run": run_dir.name,
                                       "findings": [f.as_dict() for f in found],
                                       "coverage": coverage}
            if explain:
                line["explain"] = diagnosis.explain
            if diagnosis.damage:
                line["damage"] = diagnosis.damage
            echo(orjson.dumps(line).decode())
        else:
            verdict = f"{len(found)} finding(s)" if found else "no findings"
            if not coverage.get("judged"):
                verdict += f"; {coverage.get('verdict')}"
            echo(f"{run_dir.name}: {verdict}")
            for f in found:
                keys = f" [{', '.join(f.keys)}]" if f.keys else ""
                echo(f"  {f.severity.upper():8} {f.rule} @ step {f.step}{keys}")
                echo(f"           {f.message}")
            _print_coverage(coverage)
            if explain:
                _print_explanation(diagnosis.explain)
        if diagnosis.damage:
            echo(f"{run_dir.name}: the spool is damaged; these findings cover only what "
                 f"could be read ({len(diagnosis.damage)} problem(s): "
                 f"{'; '.join(diagnosis.damage[:3])})", err=True)
    sys.exit(2 if damaged else 1 if serious else 3 if unjudged else 0)


def _print_coverage(coverage: dict[str, Any]) -> None:
    """What the doctor read of the run (doctor/coverage.py), a few lines."""
    signals = coverage.get("signals") or {}
    read = ", ".join(f"{sig} <- {', '.join(k['key'] for k in keys)}"
                     for sig, keys in signals.items())
    echo(f"  read: {read or 'no signal'}")
    for sig, keys in (coverage.get("declared_unseen") or {}).items():
        echo(f"  declared {sig} <- {', '.join(keys)}: never logged")
    not_run = coverage.get("not_run") or {}
    if not_run:
        echo("  not run: " + ", ".join(f"{rule} ({why})" for rule, why in not_run.items()))


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
