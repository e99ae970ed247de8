"""One function per section of the ``--static`` report; each returns an HTML fragment with
every value escaped (run data is user input: keys, table cells and captions may hold
markup). The report itself uses ``wall_time``, ``when`` and ``MAX_TABLE_ROWS`` too."""

from __future__ import annotations

import base64
import datetime as dt
import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import orjson

from trackmux.core.events import ImageEvent, TableEvent
from trackmux.core.spool.runs import stop_words
from trackmux.core.values.intake import input_dropped
from trackmux.core.values.normalize import flatten
from trackmux.report.charts import PALETTE, Series, fmt, line_chart
from trackmux.report.load import RunData

MAX_TABLE_ROWS = 200
MAX_IMAGES_PER_KEY = 24


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def when(timestamp: Any) -> str:
    if not isinstance(timestamp, (int, float)) or not math.isfinite(timestamp):
        return ""
    return dt.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {sec:02d}s"


def wall_time(started: Any, finished: Any, last_event: float | None, state: str) -> str:
    """The run's wall time: start to finish; for a run that never finished (running,
    crashed) start to its last event, said so."""
    if not isinstance(started, (int, float)):
        return ""
    if isinstance(finished, (int, float)):
        return duration(finished - started)
    if last_event is not None:
        return f"{duration(last_event - started)} ({state or 'unfinished'}: to its last event)"
    return ""


def cell(value: Any) -> str:
    """A ``<td>``: numbers right-aligned and shortened, None empty, the rest escaped."""
    if value is None:
        return "<td></td>"
    if isinstance(value, bool):
        return f"<td>{value}</td>"
    if isinstance(value, (int, float)):
        text = str(value) if isinstance(value, int) else fmt(value)
        return f'<td class="num">{escape(text)}</td>'
    return f"<td>{escape(str(value))}</td>"


def legend(runs: Sequence[RunData]) -> str:
    items = "".join(f'<span><i style="background:{colour(i)}"></i>{escape(run.label)}</span>'
                    for i, run in enumerate(runs))
    return f'<div class="legend">{items}</div>'


def runs_section(runs: Sequence[RunData]) -> str:
    rows = []
    for i, run in enumerate(runs):
        meta = run.meta
        started = meta.get("started_at")
        took = wall_time(started, meta.get("finished_at"), run.last_time,
                         str(meta.get("state", "")))
        state = str(meta.get("state", "unknown"))
        badge = {"finished": "ok", "running": "warn", "stopped": "warn"}.get(state, "bad")
        rows.append(
            f'<tr><td><i style="display:inline-block;width:10px;height:10px;'
            f'border-radius:5px;background:{colour(i)}"></i> {escape(run.name)}</td>'
            f'<td class="mono">{escape(run.run_id)}</td>'
            f'<td>{escape(str(meta.get("project", "")))}</td>'
            f'<td><span class="badge {badge}">{escape(state)}</span></td>'
            f"<td>{escape(when(started))}</td><td>{escape(took)}</td>"
            f'<td class="num">{"" if run.last_step is None else run.last_step}</td>'
            f'<td class="num">{run.last_seq}</td>'
            f'<td class="mono">{escape(str(run.run_dir))}</td></tr>')
        for problem in run.damage:
            rows.append(f'<tr><td colspan="9" class="warning">damaged spool: '
                        f"{escape(problem)}</td></tr>")
        for line in stop_words(meta):  # the doctor's stop (issue 45), earlier attempts' too
            rows.append(f'<tr><td colspan="9" class="warning">{escape(line)}</td></tr>')
        for bad in input_dropped(meta):
            rows.append(f'<tr><td colspan="9" class="warning">bad input dropped at the door: '
                        f"{escape(bad)}</td></tr>")
    return ('<section id="runs"><h2>Runs</h2><div class="panel"><table><thead><tr>'
            "<th>name</th><th>run id</th><th>project</th><th>state</th><th>started</th>"
            "<th>duration</th><th>last step</th><th>events</th><th>directory</th></tr>"
            "</thead><tbody>" + "".join(rows) + "</tbody></table></div></section>")


def delivery_section(runs: Sequence[RunData]) -> str:
    blocks = []
    for run in runs:
        rows = []
        for d in run.delivery:
            if d.updated is None:
                state, badge = "not started", "bad"
            elif d.pending:
                state, badge = f"{d.pending} pending", "warn"
            else:
                state, badge = "all delivered", "ok"
            rows.append(f"<tr><td>{escape(d.backend)}</td>"
                        f'<td><span class="badge {badge}">{escape(state)}</span></td>'
                        f'<td class="num">{d.acked} / {d.last}</td>'
                        f'<td class="mono">{escape(d.remote_id or "")}</td>'
                        f"<td>{escape(when(d.updated))}</td></tr>")
        pending = [d.backend for d in run.delivery if d.pending]
        hint = ""
        if pending:
            hint = ('<p class="hint">Deliver the rest with <span class="mono">trackmux sync '
                    f'{escape(str(run.run_dir))} --to {escape(",".join(pending))}</span></p>')
        body = ("<table><thead><tr><th>backend</th><th>state</th><th>acked / last seq</th>"
                "<th>remote id</th><th>last ack</th></tr></thead><tbody>" + "".join(rows)
                + "</tbody></table>" if rows else
                '<p class="hint">spool only: no backend was configured for this run</p>')
        blocks.append(f"<h3>{escape(run.label)}</h3><div class=\"panel\">{body}{hint}</div>")
    return ('<section id="delivery"><h2>Delivery</h2><p class="hint">Events each backend '
            "has acknowledged, against the last event in the spool.</p>" + "".join(blocks)
            + "</section>")


def metric_groups(runs: Sequence[RunData]) -> dict[str, list[str]]:
    """Metric keys grouped by their prefix (before the first '/'), in first-logged order."""
    groups: dict[str, list[str]] = {}
    for run in runs:
        for key in run.metrics:
            prefix = key.split("/", 1)[0] if "/" in key else "other"
            keys = groups.setdefault(prefix, [])
            if key not in keys:
                keys.append(key)
    if "other" in groups:
        groups["other"] = groups.pop("other")
    return groups


def anchor(prefix: str) -> str:
    return "metrics-" + "".join(c if c.isalnum() else "-" for c in prefix)


def metrics_section(runs: Sequence[RunData],
                    marks: Mapping[str, Sequence[tuple[int, str, str]]] | None = None) -> str:
    groups = metric_groups(runs)
    if not groups:
        return ('<section id="metrics"><h2>Metrics</h2><p class="hint">no metrics logged'
                "</p></section>")
    out = ['<section id="metrics"><h2>Metrics</h2>', legend(runs)]
    for prefix, keys in groups.items():
        out.append(f'<h3 id="{anchor(prefix)}">{escape(prefix)}</h3><div class="charts">')
        for key in keys:
            series = [Series(run.label, colour(i), run.metrics[key])
                      for i, run in enumerate(runs) if key in run.metrics]
            chart = line_chart(key, series, marks=(marks or {}).get(key, ()))
            out.append(f'<div class="panel">{chart}</div>')
        out.append("</div>")
    out.append("</section>")
    return "".join(out)


def table_cap_note(shown: int, total: int, run_id: str) -> str:
    """What a report says under a table it cut (as the console says what it did not
    print): the reader learns the total and where every row is."""
    return (f"the first {shown:,} of {total:,} rows; every row is in the spool: "
            f"trackmux ui, or trackmux show {run_id}")


def table_html(event: TableEvent, run_id: str = "") -> str:
    """The first rows of ``event`` (at most ``MAX_TABLE_ROWS``, and at most the table's
    ``max_rows``), and a line saying how many rows the report left out."""
    shown = min(MAX_TABLE_ROWS, len(event.rows), event.max_rows or len(event.rows))
    rows = event.rows[:shown]

    def numeric(index: int) -> bool:  # from the rows shown: a cost bounded by the page
        values = [row[index] for row in rows if row[index] is not None]
        return bool(values) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                    for v in values)

    head = "".join(f'<th class="num">{escape(c)}</th>' if numeric(i) else f"<th>{escape(c)}</th>"
                   for i, c in enumerate(event.columns))
    body = "".join("<tr>" + "".join(cell(v) for v in row) + "</tr>" for row in rows)
    note = ""
    if shown < len(event.rows):
        note = (f'<p class="hint tm-cap">'
                f"{escape(table_cap_note(shown, len(event.rows), run_id))}</p>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"


def tables_section(runs: Sequence[RunData]) -> str:
    """Each table's first rows inline, and how many the page left out."""
    out = []
    for run in runs:
        by_key: dict[str, list[TableEvent]] = {}
        for event in run.tables:
            by_key.setdefault(event.key, []).append(event)
        for key, events in by_key.items():
            events.sort(key=lambda e: (e.step, e.seq))
            out.append(f'<h3>{escape(key)} <span class="hint">{escape(run.label)}, '
                       f"{len(events)} logged</span></h3><div class=\"panel\">")
            for event in reversed(events):
                is_open = " open" if event is events[-1] else ""
                out.append(f"<details{is_open}><summary>step {event.step}</summary>"
                           f"{table_html(event, run.run_id)}</details>")
            out.append("</div>")
    if not out:
        return ""
    return '<section id="tables"><h2>Tables</h2>' + "".join(out) + "</section>"


def _spread(events: list[ImageEvent], limit: int) -> list[ImageEvent]:
    """At most ``limit`` images evenly spread over the run, always the last one."""
    if len(events) <= limit:
        return events
    picks = {round(i * (len(events) - 1) / (limit - 1)) for i in range(limit)}
    return [events[i] for i in sorted(picks)]


def images_section(runs: Sequence[RunData]) -> str:
    out = []
    for run in runs:
        by_key: dict[str, list[ImageEvent]] = {}
        for event in run.images:
            by_key.setdefault(event.key, []).append(event)
        for key, events in by_key.items():
            events.sort(key=lambda e: (e.step, e.seq))
            shown = _spread(events, MAX_IMAGES_PER_KEY)
            note = (f", {len(shown)} of {len(events)} shown" if len(shown) < len(events)
                    else "")
            out.append(f'<h3>{escape(key)} <span class="hint">{escape(run.label)}{note}'
                       '</span></h3><div class="gallery">')
            for event in reversed(shown):
                data = base64.b64encode(event.png).decode("ascii")
                caption = f"{key} · step {event.step}"
                if event.caption:
                    caption += f" · {event.caption}"
                out.append(f'<figure><img src="data:image/png;base64,{data}" '
                           f'width="{event.width}" height="{event.height}" '
                           f'alt="{escape(caption)}"><figcaption>{escape(caption)}'
                           "</figcaption></figure>")
            out.append("</div>")
    if not out:
        return ""
    return '<section id="images"><h2>Images</h2>' + "".join(out) + "</section>"


def texts_section(runs: Sequence[RunData]) -> str:
    out = []
    for run in runs:
        for event in sorted(run.texts, key=lambda e: (e.step, e.seq)):
            out.append(f"<details><summary>{escape(event.key)} · step {event.step} "
                       f'<span class="hint">{escape(run.label)}</span></summary>'
                       f"<pre>{escape(event.text)}</pre></details>")
    if not out:
        return ""
    return ('<section id="text"><h2>Text</h2><div class="panel">' + "".join(out)
            + "</div></section>")


def _config_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def config_section(runs: Sequence[RunData]) -> str:
    flat = [flatten(run.config) if run.config else {} for run in runs]
    keys: list[str] = []
    for flat_config in flat:
        keys.extend(k for k in flat_config if k not in keys)
    if not keys:
        return ""
    head = "".join(f"<th>{escape(run.label)}</th>" for run in runs)
    rows = []
    for key in keys:
        values = [_config_value(f.get(key)) if key in f else "—" for f in flat]
        differs = len(runs) > 1 and len(set(values)) > 1
        cls = ' class="diff"' if differs else ""
        rows.append(f'<tr{cls}><td class="mono">{escape(key)}</td>'
                    + "".join(f'<td class="mono">{escape(v)}</td>' for v in values) + "</tr>")
    hint = ('<p class="hint">Rows where the runs differ are highlighted.</p>'
            if len(runs) > 1 else "")
    return (f'<section id="config"><h2>Config</h2>{hint}<div class="panel"><table><thead>'
            f"<tr><th>key</th>{head}</tr></thead><tbody>" + "".join(rows)
            + "</tbody></table></div></section>")
