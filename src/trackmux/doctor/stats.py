"""Robust statistics over short windows: median, MAD, and a per-key episode latch.

Curves of RL runs are noisy and heavy-tailed (a grad norm spike, a batch of hard prompts):
medians and the median absolute deviation move little with one wild point, where a mean
and a standard deviation would. The latch makes a condition count only once it held for
``persist`` checks in a row, and raises it once per episode (until it cleared as long).

Every number here may be any finite float a trainer logged (1e308, -1e308, 1e-320): the
arithmetic never overflows into an exception (``x * x`` and halves before sums, not
``x ** 2`` or ``(a + b) / 2``), and a difference too large for a float is inf, which every
comparison handles.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

MAD_TO_SIGMA = 1.4826  # MAD of a normal sample times this estimates its sigma


def median(values: Iterable[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return float("nan")
    mid = n // 2
    if n % 2:
        return ordered[mid]
    a, b = ordered[mid - 1], ordered[mid]
    return a if a == b else 0.5 * a + 0.5 * b  # halves first: 1e308 + 1e308 overflows


def robust_sigma(values: Iterable[float]) -> float:
    """MAD scaled to a normal sigma (inf when the spread exceeds a float)."""
    data = list(values)
    center = median(data)
    return MAD_TO_SIGMA * median(abs(v - center) for v in data)


def ratio(a: float, b: float) -> float:
    """``a / b`` that is inf (or 0) where the quotient leaves a float, never raising."""
    if b == 0:
        return math.inf if a > 0 else -math.inf if a < 0 else math.nan
    try:
        return a / b
    except (OverflowError, ZeroDivisionError):
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


def finite(value: object) -> float | None:
    """A logged value as a finite float, or None (NaN, inf, an int beyond a float, text)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            return None
    return None


class Series:
    """The last ``size`` (step, value) points of one key."""

    __slots__ = ("count", "first", "memo", "steps", "values")

    def __init__(self, size: int) -> None:
        self.steps: deque[int] = deque(maxlen=size)
        self.values: deque[float] = deque(maxlen=size)
        self.count = 0
        self.first: list[float] = []  # the run's first points (an early level)
        self.memo: tuple[int, object, object] = (-1, None, None)  # (count, key, value)

    def add(self, step: int, value: float, keep_first: int = 0) -> None:
        self.steps.append(step)
        self.values.append(value)
        self.count += 1
        if len(self.first) < keep_first:
            self.first.append(value)

    def tail(self, n: int) -> list[float]:
        values = self.values
        return [values[i] for i in range(max(0, len(values) - n), len(values))]

    def before_tail(self, n: int, size: int) -> list[float]:
        """The ``size`` points before the last ``n``."""
        values = self.values
        end = len(values) - n
        return [values[i] for i in range(max(0, end - size), max(0, end))]

    def points(self, steps: int, least: int, skip: int = 0) -> int:
        """How many points, before the last ``skip``, cover the last ``steps`` steps, and
        at least ``least``: a window in steps, so a run that logs every 20-50 steps is
        judged on a few points, and one that logs every step on ``steps`` of them. More
        than there are (so the caller waits) while the series may not yet reach back
        ``steps`` steps."""
        stamps = self.steps
        end = len(stamps) - skip
        if end <= 0:
            return max(1, least)
        # the points within ``steps`` of the last one (steps rise along a series: bisect)
        n = end - bisect.bisect_right(stamps, stamps[end - 1] - steps, 0, end)
        if n == end and len(stamps) < (self.steps.maxlen or 0):
            return max(end + 1, least)  # the start of the run: not yet covered
        return max(n, least)

    def value_at(self, step: int) -> float | None:
        """The value logged at ``step`` (the last one, if a step logged twice)."""
        stamps = self.steps
        for i in range(len(stamps) - 1, -1, -1):
            if stamps[i] == step:
                return self.values[i]
            if stamps[i] < step:
                break
        return None


class Latch:
    """A condition per key that must hold ``persist`` checks in a row to fire, fires once,
    and re-arms only after it was false ``rearm`` checks in a row (default: 20, and at
    least ``persist``), so a curve that hovers at the threshold is one episode, not ten."""

    __slots__ = ("active", "bad", "good", "onset", "persist", "rearm")

    def __init__(self, persist: int, rearm: int = 20) -> None:
        self.persist = persist
        self.rearm = max(persist, rearm)
        self.bad = 0
        self.good = 0
        self.active = False
        self.onset = 0

    def check(self, condition: bool, step: int) -> bool:
        """True once, when ``condition`` has held ``persist`` checks in a row."""
        if condition:
            if self.bad == 0:
                self.onset = step
            self.bad += 1
            self.good = 0
            if not self.active and self.bad >= self.persist:
                self.active = True
                return True
            return False
        self.good += 1
        self.bad = 0
        if self.active and self.good >= self.rearm:
            self.active = False
        return False


class SlidingBest:
    """The largest (or, with ``lowest``, smallest) of the last ``size`` items by their
    first element, in O(1) amortized per item: a rule's anchored level over a long
    lookback costs no more than a short one."""

    __slots__ = ("count", "items", "lowest", "size")

    def __init__(self, size: int, lowest: bool = False) -> None:
        self.size, self.lowest = size, lowest
        self.items: deque[tuple[int, tuple[Any, ...]]] = deque()  # (index, item), best first
        self.count = 0

    def add(self, item: tuple[Any, ...]) -> None:
        key = item[0]
        items = self.items
        if self.lowest:
            while items and items[-1][1][0] >= key:
                items.pop()
        else:
            while items and items[-1][1][0] <= key:
                items.pop()
        items.append((self.count, item))
        self.count += 1
        while items[0][0] <= self.count - 1 - self.size:
            items.popleft()

    def best(self) -> tuple[Any, ...]:
        return self.items[0][1]


def trend(steps: Sequence[int], values: Sequence[float]) -> tuple[float, float, float]:
    """(slope per step, its t statistic, its standard error) of a least-squares line;
    values are scaled by their largest magnitude first, so 1e200 rewards square without
    overflow."""
    n = len(values)
    scale = max((abs(v) for v in values), default=0.0)
    if n < 4 or scale == 0 or steps[-1] == steps[0]:
        return 0.0, 0.0, 0.0
    ys = [v / scale for v in values]
    mx = sum(steps) / n
    my = sum(ys) / n
    sxx = sum((x - mx) * (x - mx) for x in steps)
    slope = sum((x - mx) * (y - my) for x, y in zip(steps, ys, strict=True)) / sxx
    resid = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(steps, ys, strict=True))
    se = (resid / (n - 2) / sxx) ** 0.5
    t = slope / se if se > 0 else (0.0 if slope == 0 else math.copysign(math.inf, slope))
    return slope * scale, t, se * scale
