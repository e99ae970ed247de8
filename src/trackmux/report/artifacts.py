"""The report's artifact section: what was logged (name, type, step, each file with its
size, hash and whether it was copied into the run folder or referenced)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from trackmux.report.load import RunData


def artifacts_section(runs: Sequence[RunData]) -> str:
    out = []
    for run in runs:
        for event in sorted(run.artifacts, key=lambda e: (e.step, e.seq)):
            rows = "".join(
                f"<tr><td>{escape(f.path)}</td><td class=\"num\">{f.size}</td>"
                f"<td><code>{f.sha256[:16]}</code></td>"
                f"<td>{'copied' if f.copied else 'referenced'}</td></tr>"
                for f in event.files)
            out.append(f'<h3>{escape(event.name)} <span class="hint">{escape(event.type)} · '
                       f"{escape(run.label)} · step {event.step} · from "
                       f"{escape(event.source)}</span></h3><div class=\"panel\"><table><thead>"
                       "<tr><th>file</th><th class=\"num\">bytes</th><th>sha256</th>"
                       f"<th>kept</th></tr></thead><tbody>{rows}</tbody></table></div>")
    if not out:
        return ""
    return '<section id="artifacts"><h2>Artifacts</h2>' + "".join(out) + "</section>"
