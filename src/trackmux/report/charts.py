"""Line charts as inline SVG strings for the ``--static`` report: no plotting library, no
script, no network.

A chart plots one metric key; each run is one coloured series. Non-finite values break
the line (they are counted in the chart's tooltip) and long series are thinned to at
most ``MAX_POINTS`` points per run by keeping each bucket's first, min, max and last.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

#: the same colours as assets/charts.js: any two tell apart (CIELAB distance >= 34), and
#: none is near a severity's colour (a run in red hid its own critical onset line); the
#: first four, given in order to the runs here, are >= 45 apart
PALETTE = ("#2563eb", "#16a34a", "#86198f", "#111827", "#f472b6", "#14b8a6", "#854d0e",
           "#7c3aed", "#84cc16", "#a3a3a3", "#9d174d", "#1e3a8a")
WIDTH, HEIGHT = 420, 230
LEFT, RIGHT, TOP, BOTTOM = 58, 14, 30, 30
MAX_POINTS = 1200


@dataclass(frozen=True)
class Series:
    label: str
    colour: str
    points: Sequence[tuple[int, float]]


def nice_step(span: float, count: int) -> float:
    """A round tick spacing (1, 2, 2.5 or 5 times a power of ten) giving about ``count``
    intervals over ``span``."""
    raw = span / max(count, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    for mult in (1.0, 2.0, 2.5, 5.0, 10.0):
        if mult * power >= raw:
            return mult * power
    return 10.0 * power


def ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (the first <= lo, the last >= hi)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"ticks need finite bounds, got {lo!r}..{hi!r}")
    if hi < lo:
        lo, hi = hi, lo
    if not math.isfinite(hi - lo):  # a span beyond float range: just the two ends
        return [lo, hi]
    if hi - lo <= max(abs(lo), abs(hi)) * 1e-12 or hi - lo < 1e-200:
        pad = abs(lo) * 0.1 if abs(lo) > 1e-200 else 1.0
        lo, hi = lo - pad, hi + pad
    step = nice_step(hi - lo, count)
    start = math.floor(lo / step + 1e-9) * step
    values = []
    value = start
    while value < hi - step * 1e-9:
        values.append(value)
        value = start + step * len(values)
    values.append(value)
    return [0.0 if abs(v) < step * 1e-9 else v for v in values]


def fmt(value: float) -> str:
    """A short label for a tick or a value (3 significant digits, SI-ish exponents)."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1e6 or magnitude < 1e-3:
        return f"{value:.2e}"
    if magnitude >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def tick_label(value: float) -> str:
    """An axis label short enough for the fixed left margin at any size (125k, 3.2M), as
    the interactive charts label theirs (assets/charts.js ``tick``)."""
    magnitude = abs(value)
    if 1e5 <= magnitude < 1e15:
        for scale, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
            if magnitude >= scale and (unit != "k" or magnitude >= 1e5):
                return f"{value / scale:.3g}{unit}"
    return fmt(value)


def tick_labels(values: Sequence[float]) -> list[str]:
    """An axis's labels in one unit, that of its largest value (25k ... 125k, never 75,000
    beside 100k), as assets/charts.js ``ticks`` writes them."""
    magnitude = max((abs(v) for v in values), default=0.0)
    if 1e5 <= magnitude < 1e15:
        for scale, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
            if magnitude >= scale:
                return ["0" if v == 0 else f"{v / scale:.3g}{unit}" for v in values]
    return [tick_label(v) for v in values]


def thin(points: Sequence[tuple[int, float]], limit: int = MAX_POINTS
         ) -> list[tuple[int, float]]:
    """At most about ``limit`` points that keep the line's shape (first/min/max/last of
    each bucket)."""
    if len(points) <= limit:
        return list(points)
    size = math.ceil(len(points) / (limit / 4))
    out: list[tuple[int, float]] = []
    for start in range(0, len(points), size):
        bucket = points[start:start + size]
        finite = [p for p in bucket if math.isfinite(p[1])]
        keep = {0, len(bucket) - 1}
        if finite:
            keep.add(bucket.index(min(finite, key=lambda p: p[1])))
            keep.add(bucket.index(max(finite, key=lambda p: p[1])))
        out.extend(bucket[i] for i in sorted(keep))
    return out


def segments(points: Sequence[tuple[int, float]]) -> list[list[tuple[int, float]]]:
    """Runs of consecutive finite points (NaN and inf break the line)."""
    parts: list[list[tuple[int, float]]] = [[]]
    for step, value in points:
        if math.isfinite(value):
            parts[-1].append((step, value))
        elif parts[-1]:
            parts.append([])
    return [part for part in parts if part]


def line_chart(key: str, series: Sequence[Series], width: int = WIDTH,
               height: int = HEIGHT, marks: Sequence[tuple[int, str, str]] = ()) -> str:
    """One ``<svg class="chart">`` for ``key`` with one polyline per series segment."""
    shown = [Series(s.label, s.colour, thin(s.points)) for s in series]
    finite = [(x, y) for s in shown for x, y in s.points if math.isfinite(y)]
    title = escape(key)
    head = (f'<svg class="chart" data-key="{title}" xmlns="http://www.w3.org/2000/svg" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'aria-label="{title}">'
            f'<text class="chart-title" x="{LEFT}" y="18">{title}</text>')
    if not finite:
        return (head + f'<text class="empty" x="{width / 2}" y="{height / 2}" '
                f'text-anchor="middle">no finite values</text></svg>')
    xs = [x for x, _ in finite]
    ys = [y for _, y in finite]
    xticks = ticks(min(xs), max(xs), 5) if max(xs) > min(xs) else [min(xs) - 1.0,
                                                                     min(xs) + 1.0]
    yticks = ticks(min(ys), max(ys), 4)
    x0, x1, y0, y1 = xticks[0], xticks[-1], yticks[0], yticks[-1]
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def sy(y: float) -> float:
        return TOP + (1 - (y - y0) / (y1 - y0)) * plot_h

    parts = [head]
    for value, label in zip(yticks, tick_labels(yticks), strict=True):
        y = sy(value)
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{width - RIGHT}" y1="{y:.1f}" '
                     f'y2="{y:.1f}"/><text class="tick" x="{LEFT - 6}" y="{y + 3.5:.1f}" '
                     f'text-anchor="end">{escape(label)}</text>')
    for value, label in zip(xticks, tick_labels(xticks), strict=True):
        x = sx(value)
        parts.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" '
                     f'y2="{height - BOTTOM}"/><text class="tick" x="{x:.1f}" '
                     f'y="{height - BOTTOM + 15}" text-anchor="middle">'
                     f'{escape(label)}</text>')
    parts.append(f'<text class="axis-label" x="{width - RIGHT}" y="{height - 3}" '
                 f'text-anchor="end">step</text>')
    for step, severity, label in marks:  # the onset of a finding of the doctor
        if x0 <= step <= x1:
            x = sx(step)
            parts.append(f'<line class="onset {escape(severity)}" x1="{x:.1f}" x2="{x:.1f}" '
                         f'y1="{TOP}" y2="{height - BOTTOM}"><title>{escape(label)}</title>'
                         "</line>")
    for original, s in zip(series, shown, strict=True):
        label = escape(s.label)
        raw = s.points
        bad = sum(1 for _, v in original.points if not math.isfinite(v))
        for part in segments(raw):
            coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in part)
            parts.append(f'<polyline class="series" data-run="{label}" fill="none" '
                         f'stroke="{s.colour}" stroke-width="1.6" stroke-linejoin="round" '
                         f'points="{coords}"/>')
        last = next(((x, y) for x, y in reversed(raw) if math.isfinite(y)), None)
        if last is not None:
            note = f"; {bad} non-finite values not drawn" if bad else ""
            parts.append(f'<circle class="last" cx="{sx(last[0]):.1f}" cy="{sy(last[1]):.1f}" '
                         f'r="2.8" fill="{s.colour}"><title>{label}: {escape(fmt(last[1]))} '
                         f'at step {last[0]}{note}</title></circle>')
    parts.append("</svg>")
    return "".join(parts)
