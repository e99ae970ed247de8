"""The report's opening section: what the doctor found (trackmux/doctor/), and the onset
of each finding to mark on the charts of its keys."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from trackmux.report.load import RunData

#: key -> [(onset step, severity, one-line label)], for the charts
Marks = dict[str, list[tuple[int, str, str]]]


def load(runs: Sequence[RunData]) -> dict[str, list[dict[str, Any]]]:
    """Findings per run id: stored by the live doctor, else diagnosed now."""
    from trackmux.doctor.read import load_findings

    out: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        try:  # the live doctor's "not judged" line is said as the run's coverage
            out[run.run_id] = [f for f in load_findings(run.run_dir)
                               if f["rule"] != "coverage"]
        except Exception as exc:  # a report never fails for its first section
            out[run.run_id] = [{"rule": "doctor", "severity": "info", "step": 0, "keys": [],
                                "message": f"could not read findings: {exc}"}]
    return out


def marks(found: dict[str, list[dict[str, Any]]]) -> Marks:
    out: Marks = {}
    for findings in found.values():
        for f in findings:
            for key in f["keys"]:
                out.setdefault(key, []).append(
                    (int(f["step"]), str(f["severity"]), f"{f['rule']} at step {f['step']}"))
    return out


def findings_section(runs: Sequence[RunData], found: dict[str, list[dict[str, Any]]]) -> str:
    rows = []
    for run in runs:
        for f in found.get(run.run_id, []):
            keys = ", ".join(f["keys"])
            rows.append(f'<tr class="finding {escape(f["severity"])}">'
                        f'<td><span class="sev {escape(f["severity"])}">'
                        f'{escape(f["severity"])}</span></td><td>{escape(run.label)}</td>'
                        f'<td>{escape(f["rule"])}</td><td class="num">{int(f["step"])}</td>'
                        f'<td>{escape(keys)}</td><td>{escape(f["message"])}</td></tr>')
    said = coverage_lines(runs)
    if not rows:
        body = ('<p class="hint">no findings: no rule of the doctor fired (docs/doctor.md '
                "lists them)</p>")
    else:
        body = ('<table class="findings"><thead><tr><th>severity</th><th>run</th><th>rule</th>'
                "<th>onset step</th><th>keys</th><th>what happened</th></tr></thead><tbody>"
                + "".join(rows) + "</tbody></table><p class=\"hint\">Onsets are marked on the "
                "charts of their keys (dashed lines).</p>")
    return f'<section id="findings"><h2>Doctor</h2>{body}{said}</section>'


def coverage_lines(runs: Sequence[RunData]) -> str:
    """Per run, what the doctor read (doctor/coverage.py): a run it could not judge is
    never shown as one with nothing wrong."""
    from trackmux.doctor.coverage import line
    from trackmux.doctor.offline import scan_coverage as scan

    items = []
    for run in runs:
        not_run: dict[str, str] = {}
        try:
            coverage = scan(run.run_dir)
            not_run = dict(coverage.get("not_run") or {})
            text, judged = line({**coverage, "not_run": {}}), bool(coverage["judged"])
        except Exception as exc:  # a report never fails for its first section
            text, judged = f"coverage could not be read: {type(exc).__name__}: {exc}", True
        items.append(f'<li class="coverage{"" if judged else " unjudged"}">'
                     f'<b>{escape(run.label)}</b>: {escape(text)}{_folded(not_run)}</li>')
    return f'<ul class="coverage hint">{"".join(items)}</ul>' if items else ""


def _folded(not_run: dict[str, str]) -> str:
    """The rules that could not run (often twenty, the same for every run of a trainer),
    folded under their count so the line says what was read."""
    if not not_run:
        return ""
    rules = "".join(f"<li>{escape(rule)}: {escape(why)}</li>" for rule, why in not_run.items())
    plural = "s" if len(not_run) > 1 else ""
    return (f'<details class="tm-not-run"><summary>{len(not_run)} rule{plural} could not run '
            f"on this run</summary><ul>{rules}</ul></details>")
