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
        try:
            out[run.run_id] = load_findings(run.run_dir)
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
    if not rows:
        body = ('<p class="hint">no findings: no rule of the doctor fired (docs/doctor.md '
                "lists them)</p>")
    else:
        body = ('<table class="findings"><thead><tr><th>severity</th><th>run</th><th>rule</th>'
                "<th>onset step</th><th>keys</th><th>what happened</th></tr></thead><tbody>"
                + "".join(rows) + "</tbody></table><p class=\"hint\">Onsets are marked on the "
                "charts of their keys (dashed lines).</p>")
    return f'<section id="findings"><h2>Doctor</h2>{body}</section>'
