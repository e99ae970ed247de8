"""The ``--static`` report: one self-contained HTML page without JavaScript charts (inline
CSS and SVG, images as data URIs, no request to anything), for viewers that run no
scripts and installs without numpy. Its only script is the sample browser's, present when
a run logged samples and allowed by its hash alone (report/samples_section.py). The
default report is the UI's frozen export (trackmux/ui/export.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from html import escape

from trackmux.report import findings, sections
from trackmux.report.artifacts import artifacts_section
from trackmux.report.charts import PALETTE
from trackmux.report.histograms import histograms_section
from trackmux.report.load import RunData
from trackmux.report.provenance import provenance_section
from trackmux.report.samples_section import samples_section, script_hash
from trackmux.report.style import CSS


def render(runs: Sequence[RunData], title: str | None = None) -> str:
    if not runs:
        raise ValueError("a report needs at least one run")
    title = title or "trackmux report: " + ", ".join(run.label for run in runs)
    found = findings.load(runs)  # the doctor's findings open the report (issue 22)
    body = [findings.findings_section(runs, found), sections.runs_section(runs),
            sections.metrics_section(runs, findings.marks(found)),
            histograms_section(runs, PALETTE),
            sections.tables_section(runs)]
    samples_html, script = samples_section(runs)
    body += [samples_html, sections.images_section(runs),
             sections.texts_section(runs), artifacts_section(runs),
             sections.config_section(runs), provenance_section(runs),
             sections.delivery_section(runs)]
    nav = [('findings', 'Doctor'), ('runs', 'Runs'), ('metrics', 'Metrics')]
    nav += [(sections.anchor(p), p) for p in sections.metric_groups(runs)]
    nav += [(section, section.capitalize()) for section in ("histograms", "tables", "samples",
                                                            "images", "text", "artifacts",
                                                            "config", "provenance")
            if f'id="{section}"' in "".join(body)]
    nav.append(("delivery", "Delivery"))
    links = "".join(f'<a href="#{escape(target)}">{escape(label)}</a>' for target, label in nav)
    from trackmux import __version__

    generated = dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # A restrictive policy documents (and enforces) that the page fetches nothing.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "img-src data:; style-src 'unsafe-inline'"
        + (f"; script-src {script_hash(script)}" if script else "") + '">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>{escape(title)}</h1><div class=\"sub\">{len(runs)} run"
        f"{'s' if len(runs) != 1 else ''} · generated {generated} by trackmux "
        f"{escape(__version__)}</div></header><nav>{links}</nav><main>"
        + "".join(body)
        + "</main>" + (f"<script>{script}</script>" if script else "")
        + "<footer>Self-contained: open this file in any browser; it loads nothing "
        "from the network.</footer></body></html>\n")
