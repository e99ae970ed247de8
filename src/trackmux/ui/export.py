"""The UI frozen into one HTML file: the same API payloads (queries.py), embedded as JSON,
drawn by the same scripts (report/assets: uPlot, charts.js, export.js) inlined.

``trackmux report RUN... --interactive -o report.html`` writes it. The file loads nothing:
its Content-Security-Policy allows no connection, only its own inline scripts, styles and
data: images. Charts are downsampled exactly as the live UI sends them (min/max per
bucket, ``WIDTH`` buckets), so a page and its export show the same lines.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

import orjson

from trackmux.core.events import ImageEvent, TableEvent
from trackmux.ui import queries, sources
from trackmux.ui.app import ASSETS, STATIC
from trackmux.ui.store import Store

WIDTH = 1000
TABLE_ROWS = 200
IMAGES_PER_KEY = 12
SAMPLE_STEPS = 20  # steps of each sample key in the export (the live UI has them all)
SAMPLE_ROWS = 64  # samples of each embedded step (whole groups as logged; as the report)


def payload(run_dirs: Sequence[Path]) -> dict[str, Any]:
    """Everything the export draws, in the shapes the API serves."""
    store = Store(run_dirs)
    store.warm()
    rows = [r for r in store.rows() if Path(r["dir"]) in {d.resolve() for d in run_dirs}]
    rids = [r["id"] for r in rows]
    groups = queries.keys(store, rids)["groups"]
    series = {key: queries.series(store, key, rids, "step", width=WIDTH)
              for keys in groups.values() for key in keys}
    data: dict[str, Any] = {"runs": rows, "groups": groups, "series": series,
                            "compare": queries.compare(store, rids, None) if rids else {},
                            "histograms": {}, "tables": {}, "images": {}, "findings": {},
                            "samples": {} if sources.samples_available() else None}
    for rid in rids:
        cache = store.cache(rid)
        if cache is None:
            continue
        data["histograms"][rid] = queries.histograms(cache)["histograms"]
        media = queries.media(cache)
        data["tables"][rid] = {key: [_table(cache.event_at(item["seq"]))
                                     for item in items[-3:]]
                               for key, items in media["tables"].items()}
        data["images"][rid] = {key: [_image(cache.event_at(item["seq"]))
                                     for item in items[-IMAGES_PER_KEY:]]
                               for key, items in media["images"].items()}
        try:
            data["findings"][rid] = sources.load_findings(cache.run_dir)
        except sources.Unavailable:
            data["findings"] = None
        if data["samples"] is not None:
            data["samples"][rid] = _samples(cache.run_dir)
        cache.close()
    return data


def _samples(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The ledger's payloads of at most ``SAMPLE_STEPS`` steps per key, evenly spread
    (always the last), keyed by step; each with its first ``SAMPLE_ROWS`` samples."""
    out: dict[str, dict[str, Any]] = {}
    for key, steps in sources.list_sample_keys(run_dir).items():
        if len(steps) > SAMPLE_STEPS:
            picks = {round(i * (len(steps) - 1) / (SAMPLE_STEPS - 1))
                     for i in range(SAMPLE_STEPS)}
            steps = [steps[i] for i in sorted(picks)]
        out[key] = {str(step): sources.step_payload(run_dir, key, step, max_rows=SAMPLE_ROWS)
                    for step in steps}
    return out


def _table(event: Any) -> dict[str, Any] | None:
    if not isinstance(event, TableEvent):
        return None
    return {"key": event.key, "step": event.step, "columns": list(event.columns),
            "rows": [[queries.cell(c) for c in row] for row in event.rows[:TABLE_ROWS]],
            "offset": 0, "total": len(event.rows)}


def _image(event: Any) -> dict[str, Any] | None:
    if not isinstance(event, ImageEvent):
        return None
    return {"step": event.step, "caption": event.caption,
            "src": "data:image/png;base64," + base64.b64encode(event.png).decode("ascii")}


def render(data: dict[str, Any], title: str) -> str:
    def asset(name: str) -> str:
        return (ASSETS / name).read_text(encoding="utf-8")

    blob = orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    blob = blob.replace("</", "<\\/")  # no user text can close the script element
    csp = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
           "script-src 'unsafe-inline'")
    generated = dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    samples_script = ""
    if data.get("samples") is not None:  # the ledger's own browser, as the UI loads it
        script = sources.SAMPLES_SCRIPT.read_text(encoding="utf-8")
        script = script.replace("</script", "<\\/script")
        style = sources.SAMPLES_STYLE.read_text(encoding="utf-8").replace("</", "<\\/")
        samples_script = f"<style>{style}</style><script>{script}</script>"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        f"<title>{escape(title)}</title>"
        f"<style>{asset('uplot/uPlot.min.css')}\n{(STATIC / 'ui.css').read_text()}</style>"
        f"<script>{asset('uplot/uPlot.iife.min.js')}</script>"
        f"<script>{asset('charts.js')}</script>{samples_script}</head><body>"
        f"<header><h1>{escape(title)}</h1><span class=\"hint\">frozen export of trackmux ui, "
        f"generated {generated}; loads nothing from the network</span></header>"
        '<main id="export"></main>'
        f'<script type="application/json" id="trackmux-data">{blob}</script>'
        f"<script>{asset('export.js')}</script></body></html>\n")


def export_html(run_dirs: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str],
                title: str | None = None) -> Path:
    dirs = [Path(d).expanduser().resolve() for d in run_dirs]
    path = Path(output).expanduser().absolute()
    data = payload(dirs)
    names = ", ".join(r["name"] for r in data["runs"])
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render(data, title or f"trackmux report: {names}"), encoding="utf-8")
    os.replace(tmp, path)
    return path
