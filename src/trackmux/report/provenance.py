"""The report's provenance section: what produced each run (code, command, packages, host,
GPUs), one column per run, rows where runs differ highlighted as in the config section;
the uncommitted diff of each run folded under it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from trackmux.provenance.text import code_label, flat, gpu_label
from trackmux.report.load import RunData

_SKIP = ("schema", "env", "git.untracked", "git.root", "command.cwd", "host.platform")


def provenance_rows(data: dict[str, object]) -> dict[str, str]:
    """The fields a reader compares between runs, flattened to text."""
    from trackmux.core.values.argv import redacted_again

    data = redacted_again(data)
    rows = {"code": code_label(data.get("git", {})),  # type: ignore[arg-type]
            "gpu": gpu_label(data.get("gpu", {}))}  # type: ignore[arg-type]
    for key, value in flat(data).items():
        if not key.startswith(_SKIP) and not key.startswith("gpu."):
            rows[key] = value
    return rows


def not_recorded(config: Mapping[str, Any] | None) -> str:
    """Why a run of this ``config`` has no provenance, for its column's first row (a
    column of dashes only reads as a broken report)."""
    source = (config or {}).get("_import")
    if isinstance(source, dict) and source.get("format"):
        return f"not recorded: imported from {source['format']} {source.get('source', '')}".strip()
    return "not recorded (the run was logged without trackmux's provenance)"


def provenance_section(runs: Sequence[RunData]) -> str:
    have = [run for run in runs if run.provenance is not None]
    if not have:
        return ""
    tables = [provenance_rows(run.provenance.data) if run.provenance else
              {"code": not_recorded(run.config)} for run in runs]
    keys: list[str] = []
    for table in tables:
        keys.extend(k for k in table if k not in keys)
    head = "".join(f"<th>{escape(run.label)}</th>" for run in runs)
    body = []
    for key in keys:
        values = [t.get(key, "—") for t in tables]
        cls = ' class="diff"' if len(runs) > 1 and len(set(values)) > 1 else ""
        body.append(f'<tr{cls}><td class="mono">{escape(key)}</td>'
                    + "".join(f'<td class="mono">{escape(v)}</td>' for v in values) + "</tr>")
    diffs = "".join(
        f"<details><summary>uncommitted diff of {escape(run.label)} "
        f"({len(run.provenance.diff)} characters)</summary><pre>"
        f"{escape(run.provenance.diff[:200_000])}</pre></details>"
        for run in have if run.provenance and run.provenance.diff)
    return ('<section id="provenance"><h2>Provenance</h2><p class="hint">What produced each '
            "run (recorded at init; <code>trackmux diff A B</code> compares two).</p>"
            f'<div class="panel"><table><thead><tr><th>field</th>{head}</tr></thead><tbody>'
            + "".join(body) + f"</tbody></table></div>{diffs}</section>")
