"""Server-side downsampling so a chart of 100 runs x 10,000 steps ships a few thousand
points per run, not the whole history, and zooming in gets the exact values back.

Method: min/max per bucket on a grid shared by every run. The visible x range is cut
into ``buckets`` equal intervals (one or two per screen pixel); each bucket of each run
gives its smallest and largest finite value, placed at the bucket's first and second
half, in the order they occurred. Every run then has the same x positions, so the
browser overlays 100 runs without joining 100 different x arrays, and no spike is lost
(an average would hide it). When the range holds at most ``2 * buckets`` points of each
run, the points go out exact, at their own x.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # numpy.typing costs 0.1-0.2 s of `trackmux ui`'s start
    import numpy.typing as npt

    Floats = npt.NDArray[np.float64]


@dataclass
class Sampled:
    """Points of one run after downsampling (``exact`` when nothing was dropped)."""

    x: Floats
    y: Floats
    exact: bool


def window(x: Floats, y: Floats, lo: float | None, hi: float | None) -> tuple[Floats, Floats]:
    """The points with lo <= x <= hi, sorted by x (stable: same-x points keep their order)."""
    if x.size and np.any(np.diff(x) < 0):
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    start = 0 if lo is None else int(np.searchsorted(x, lo, side="left"))
    stop = x.size if hi is None else int(np.searchsorted(x, hi, side="right"))
    return x[start:stop], y[start:stop]


def minmax(x: Floats, y: Floats, lo: float, hi: float, buckets: int) -> Sampled:
    """Min and max of each of ``buckets`` equal x intervals of [lo, hi], on the shared
    grid (non-finite values are left out: they would flatten the envelope)."""
    finite = np.isfinite(y)
    x, y = x[finite], y[finite]
    width = (hi - lo) / buckets if hi > lo else 1.0
    grid_x = np.empty(2 * buckets)
    grid_x[0::2] = lo + width * np.arange(buckets) + width * 0.25
    grid_x[1::2] = lo + width * np.arange(buckets) + width * 0.75
    grid_y = np.full(2 * buckets, np.nan)
    if x.size == 0:
        return Sampled(grid_x, grid_y, False)
    index = np.clip(((x - lo) / width).astype(np.int64), 0, buckets - 1)
    starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
    which = index[starts]
    low = np.minimum.reduceat(y, starts)
    high = np.maximum.reduceat(y, starts)
    first = y[starts]
    # the extreme nearer the bucket's first value came first
    min_first = np.abs(first - low) <= np.abs(first - high)
    grid_y[2 * which] = np.where(min_first, low, high)
    grid_y[2 * which + 1] = np.where(min_first, high, low)
    return Sampled(grid_x, grid_y, False)


def sample(x: Floats, y: Floats, lo: float | None, hi: float | None, buckets: int,
           span: tuple[float, float] | None = None) -> Sampled:
    """The points of one run in [lo, hi]: exact when few enough, else min/max buckets over
    ``span`` (the range shared by every run of the chart, so their grids line up)."""
    wx, wy = window(x, y, lo, hi)
    if wx.size <= 2 * buckets:
        return Sampled(wx, np.where(np.isfinite(wy), wy, np.nan), True)
    a, b = span if span is not None else (float(wx[0]), float(wx[-1]))
    return minmax(wx, wy, a, b, buckets)


def align(parts: list[Sampled]) -> tuple[Floats, list[Floats]]:
    """One x array for every run (the union of their x) and each run's y on it (NaN where
    a run has no point), as uPlot draws overlaid series."""
    if not parts:
        return np.empty(0), []
    xs = np.unique(np.concatenate([p.x for p in parts])) if len(parts) > 1 else parts[0].x
    out = []
    for part in parts:
        if part.x is xs:
            out.append(part.y)
            continue
        y = np.full(xs.size, np.nan)
        if part.x.size:
            # several points at one x (a step logged twice): the last one wins
            y[np.searchsorted(xs, part.x)] = part.y
        out.append(y)
    return xs, out
