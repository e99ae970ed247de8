"""The report: the UI frozen into one HTML file. The same API payloads (queries.py),
embedded as JSON, drawn by the same scripts (report/assets: uPlot, charts.js, export.js)
inlined, plus the per-run facts only the report shows (report/details.py).

``trackmux report RUN... -o report.html`` writes it. The file loads nothing: its
Content-Security-Policy allows no connection, and only its own inline scripts (by their
sha256), inline styles and data: images. Charts are downsampled exactly as the live UI
sends them (min/max per bucket, ``WIDTH`` buckets), so a page and its report show the
same lines; the file's size is bounded by the number of keys, not of steps.
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import hashlib
import os
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

import orjson

from trackmux.core.events import ImageEvent, TableEvent
from trackmux.report.details import run_details
from trackmux.report.sections import MAX_TABLE_ROWS, table_cap_note
from trackmux.ui import queries, sources
from trackmux.ui.store import Store

ASSETS = Path(__file__).resolve().parent.parent / "report" / "assets"
STATIC = Path(__file__).resolve().parent / "static"
WIDTH = 500  # buckets per chart: a min and a max each, about two points per pixel of a chart
TABLE_ROWS = MAX_TABLE_ROWS  # rows of a table in the page, said so (the spool has them all)
TABLES_PER_KEY = 24  # logged tables of a key in the page, spread evenly (always the last)
IMAGES_PER_KEY = 24
SAMPLE_STEPS = 40  # steps of each sample key in the report (the live UI has them all)
SAMPLE_ROWS = 64  # samples of each embedded step (whole groups as logged; as the report)
CONVERSATION_ROWS = 16  # the same for a key of conversations (~15 KB each; issue 37)


def spread(items: list[Any], most: int) -> list[Any]:
    """At most ``most`` items evenly spread over ``items``, first and last kept."""
    if len(items) <= most:
        return items
    picks = {round(i * (len(items) - 1) / (most - 1)) for i in range(most)}
    return [items[i] for i in sorted(picks)]


def payload(run_dirs: Sequence[Path]) -> dict[str, Any]:
    """Everything the report draws, in the shapes the API serves. A table is cut to its
    first ``TABLE_ROWS`` rows with a note saying so: the report stays one file whose size
    does not grow with a table's rows."""
    wanted = [d.resolve() for d in run_dirs]
    store = Store(wanted)
    store.warm()
    by_dir = {Path(r["dir"]): r for r in store.rows()}
    rows = [by_dir[d] for d in dict.fromkeys(wanted) if d in by_dir]  # argument order
    names = [r["name"] for r in rows]
    for row in rows:  # a legend label that tells runs of the same name apart
        row["label"] = (row["name"] if names.count(row["name"]) == 1
                        else f"{row['name']} ({Path(row['dir']).name})")
    rids = [r["id"] for r in rows]
    groups = queries.keys(store, rids, whole=True)["groups"]
    series = {key: queries.series(store, key, rids, "step", width=WIDTH, whole=True)
              for keys in groups.values() for key in keys}
    data: dict[str, Any] = {"runs": rows, "groups": groups, "series": series,
                            "compare": queries.compare(store, rids, None) if rids else {},
                            "histograms": {}, "tables": {}, "images": {}, "findings": {},
                            "details": {},
                            "samples": {} if sources.samples_available() else None}
    for row in rows:
        rid = row["id"]
        data["details"][rid] = run_details(Path(row["dir"]))
        cache = store.cache(rid)
        if cache is None:
            continue
        problems = data["details"][rid]["problems"]  # what reading every event found
        problems += [p for p in (f"damaged spool: {e}" for e in cache.damage)
                     if p not in problems]
        data["histograms"][rid] = queries.histograms(cache)["histograms"]
        media = queries.media(cache)
        tables: dict[str, list[dict[str, Any]]] = {}
        for key, items in media["tables"].items():
            tables[key] = []
            for item in spread(items, TABLES_PER_KEY):
                event = cache.event_at(item["seq"])
                if isinstance(event, TableEvent):
                    tables[key].append(_table(event, len(items),
                                              data["details"][rid]["run_id"]))
        data["tables"][rid] = tables
        data["images"][rid] = {key: [_image(cache.event_at(item["seq"]))
                                     for item in spread(items, IMAGES_PER_KEY)]
                               for key, items in media["images"].items()}
        if data["findings"] is not None:
            try:
                data["findings"][rid] = sources.without_coverage(
                    sources.load_findings(cache.run_dir))
                data.setdefault("coverage", {})[rid] = sources.load_coverage(cache.run_dir)
            except sources.Unavailable:
                data["findings"] = None
            except Exception as exc:  # a report never fails for its first section
                data["findings"][rid] = [{
                    "rule": "doctor", "severity": "info", "step": 0, "keys": ["(doctor)"],
                    "message": f"could not read findings: {type(exc).__name__}: {exc}"}]
        if data["samples"] is not None:
            data["samples"][rid] = _samples(cache.run_dir)
        cache.close()
    return data


def _samples(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The ledger's payloads of at most ``SAMPLE_STEPS`` steps per key, evenly spread
    (first and last kept), each with its first ``SAMPLE_ROWS`` samples
    (``CONVERSATION_ROWS`` for conversations); gzip'd and base64'd, decompressed by the
    page only when its step slider reaches one."""
    out: dict[str, dict[str, Any]] = {}
    for key, steps in sources.list_sample_keys(run_dir).items():
        picked = spread(steps, SAMPLE_STEPS)
        packed = {}
        cap = SAMPLE_ROWS
        for step in picked:
            payload = sources.step_payload(run_dir, key, step, max_rows=cap)
            if payload.get("trajectories") and cap > CONVERSATION_ROWS:
                cap = CONVERSATION_ROWS
                payload = sources.step_payload(run_dir, key, step, max_rows=cap)
            body = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)
            packed[str(step)] = base64.b64encode(gzip.compress(body, 6, mtime=0)).decode()
        out[key] = {"total": len(steps), "steps": packed}
    return out


def _table(event: TableEvent, logged: int, run_id: str) -> dict[str, Any]:
    shown = min(TABLE_ROWS, len(event.rows), event.max_rows or len(event.rows))
    return {"key": event.key, "step": event.step, "seq": event.seq, "logged": logged,
            "columns": list(event.columns),
            "rows": [[queries.cell(c) for c in row] for row in event.rows[:shown]],
            "offset": 0, "total": len(event.rows),
            "note": table_cap_note(shown, len(event.rows), run_id) if shown < len(event.rows)
            else None}


def _image(event: Any) -> dict[str, Any] | None:
    if not isinstance(event, ImageEvent):
        return None
    return {"step": event.step, "caption": event.caption, "width": event.width,
            "height": event.height,
            "src": "data:image/png;base64," + base64.b64encode(event.png).decode("ascii")}


def _script_hash(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


def render(data: dict[str, Any], title: str) -> str:
    """The page: styles, the drawing scripts (each allowed by its hash), the data."""
    def asset(name: str) -> str:
        return (ASSETS / name).read_text(encoding="utf-8").replace("</script", "<\\/script")

    from trackmux import __version__

    blob = orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    # no markup from run data in the file at all: '<' is \u003c inside the JSON strings,
    # so nothing can close the script element or open a comment
    blob = blob.replace("<", "\\u003c")
    scripts = [asset("uplot/uPlot.iife.min.js"), asset("charts.js")]
    styles = [asset("uplot/uPlot.min.css"), (STATIC / "ui.css").read_text(encoding="utf-8")]
    if data.get("samples") is not None:  # the ledger's own browser, as the UI loads it
        for script in (sources.CONVERSATION_SCRIPT, sources.SAMPLES_SCRIPT):
            scripts.append(script.read_text(encoding="utf-8").replace("</script", "<\\/script"))
        for style in (sources.SAMPLES_STYLE, sources.CONVERSATION_STYLE):
            styles.append(style.read_text(encoding="utf-8").replace("</", "<\\/"))
    scripts.append(asset("export.js"))
    csp = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src "
           + " ".join(_script_hash(s) for s in scripts))
    generated = dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    count = len(data["runs"])
    license_note = (ASSETS / "uplot" / "LICENSE").read_text(encoding="utf-8")
    head = "".join(f"<script>{s}</script>" for s in scripts[:-1])
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        f"<title>{escape(title)}</title>"
        f"<!-- uPlot 1.6.32, inlined below:\n{escape(license_note)}-->"
        f"<style>{chr(10).join(styles)}</style>{head}</head><body class=\"report\">"
        f"<header><h1>{escape(title)}</h1><span class=\"hint\">{count} run"
        f"{'s' if count != 1 else ''} · generated {generated} by trackmux "
        f"{escape(__version__)} · the frozen export of <code>trackmux ui</code>: "
        "open it anywhere, it loads nothing from the network</span></header>"
        '<nav id="nav"></nav><main id="export"><noscript>This report draws its charts with '
        "JavaScript; <code>trackmux report --static</code> writes a page without scripts."
        "</noscript></main>"
        f'<script type="application/json" id="trackmux-data">{blob}</script>'
        f"<script>{scripts[-1]}</script></body></html>\n")


def export_html(run_dirs: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str],
                title: str | None = None) -> Path:
    """Write the report of ``run_dirs`` to ``output`` (atomically); return its path."""
    dirs = [Path(d).expanduser().resolve() for d in run_dirs]
    path = Path(output).expanduser().absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = payload(dirs)
    if not data["runs"]:
        raise ValueError("a report needs at least one run")
    names = ", ".join(r["label"] for r in data["runs"])
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render(data, title or f"trackmux report: {names}"), encoding="utf-8")
    os.replace(tmp, path)
    return path
