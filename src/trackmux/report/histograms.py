"""The ``--static`` report's histogram section: each key's latest distribution as bars,
and its spread over the run (p05, p50, p95 per step) as lines, all inline SVG."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from trackmux.core.events import HistogramEvent
from trackmux.core.values.histogram import quantile
from trackmux.report.charts import HEIGHT, LEFT, WIDTH, Series, fmt, line_chart
from trackmux.report.load import RunData

SPREAD = ((0.05, "p05", "#93c5fd"), (0.5, "p50", "#2563eb"), (0.95, "p95", "#1e3a8a"))


def bar_chart(event: HistogramEvent, label: str, colour: str, width: int = WIDTH,
              height: int = HEIGHT) -> str:
    """One ``<svg class="chart histogram">``: a bar per bin, value range on the x axis."""
    title = escape(f"{event.key} · step {event.step}")
    nonfinite = ", ".join(f"{n} {name}" for name, n in event.nonfinite.items() if n)
    head = (f'<svg class="chart histogram" data-key="{escape(event.key)}" '
            f'data-run="{escape(label)}" xmlns="http://www.w3.org/2000/svg" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'aria-label="{title}"><text class="chart-title" x="{LEFT}" y="18">{title}</text>')
    if not event.count:
        note = f" ({nonfinite})" if nonfinite else ""
        return (head + f'<text class="empty" x="{width / 2}" y="{height / 2}" '
                f'text-anchor="middle">no finite values{escape(note)}</text></svg>')
    top, bottom, right = 30, 30, 14
    plot_w, plot_h = width - LEFT - right, height - top - bottom
    tallest = max(event.counts) or 1
    bar_w = plot_w / len(event.counts)
    parts = [head]
    for i, count in enumerate(event.counts):
        h = count / tallest * plot_h
        x = LEFT + i * bar_w
        parts.append(f'<rect class="bin" x="{x:.1f}" y="{top + plot_h - h:.1f}" '
                     f'width="{max(bar_w - 0.5, 0.5):.1f}" height="{h:.1f}" fill="{colour}">'
                     f"<title>[{escape(fmt(event.edges[i]))}, {escape(fmt(event.edges[i + 1]))})"
                     f": {count}</title></rect>")
    low, high = event.edges[0], event.edges[-1]
    parts.append(f'<text class="tick" x="{LEFT}" y="{height - bottom + 15}">'
                 f"{escape(fmt(low))}</text><text class=\"tick\" x=\"{width - right}\" "
                 f'y="{height - bottom + 15}" text-anchor="end">{escape(fmt(high))}</text>')
    summary = f"n={event.count} mean={fmt(event.mean or 0.0)} std={fmt(event.std or 0.0)}"
    if nonfinite:
        summary += f"; not binned: {nonfinite}"
    parts.append(f'<text class="axis-label" x="{width / 2}" y="{height - 3}" '
                 f'text-anchor="middle">{escape(summary)}</text></svg>')
    return "".join(parts)


def spread_chart(key: str, events: Sequence[HistogramEvent]) -> str:
    """p05/p50/p95 of ``key`` at each logged step (interpolated within bins)."""
    series = []
    for q, name, colour in SPREAD:
        points = []
        for event in events:
            value = quantile(event.counts, event.edges, q)
            if value is not None:
                points.append((event.step, value))
        series.append(Series(name, colour, points))
    return line_chart(f"{key} (p05 / p50 / p95)", series)


def histograms_section(runs: Sequence[RunData], palette: Sequence[str]) -> str:
    out = []
    for index, run in enumerate(runs):
        by_key: dict[str, list[HistogramEvent]] = {}
        for event in run.histograms:
            by_key.setdefault(event.key, []).append(event)
        for key, events in by_key.items():
            events.sort(key=lambda e: (e.step, e.seq))
            colour = palette[index % len(palette)]
            out.append(f'<h3>{escape(key)} <span class="hint">{escape(run.label)}, '
                       f'{len(events)} logged</span></h3><div class="charts">'
                       f'<div class="panel">{bar_chart(events[-1], run.label, colour)}</div>')
            if len(events) > 1:
                out.append(f'<div class="panel">{spread_chart(key, events)}</div>')
            out.append("</div>")
    if not out:
        return ""
    return '<section id="histograms"><h2>Histograms</h2>' + "".join(out) + "</section>"
