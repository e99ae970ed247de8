"""Robust statistics over short windows: median, MAD, and a per-key episode latch.

Curves of RL runs are noisy and heavy-tailed (a grad norm spike, a batch of hard prompts):
medians and the median absolute deviation move little with one wild point, where a mean
and a standard deviation would. The latch makes a condition count only once it held for
``persist`` checks in a row, and raises it once per episode (until it cleared as long).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

MAD_TO_SIGMA = 1.4826  # MAD of a normal sample times this estimates its sigma


def median(values: Iterable[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return float("nan")
    mid = n // 2
    return ordered[mid] if n % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def robust_sigma(values: Iterable[float]) -> float:
    """MAD scaled to a normal sigma."""
    data = list(values)
    center = median(data)
    return MAD_TO_SIGMA * median(abs(v - center) for v in data)


class Series:
    """The last ``size`` (step, value) points of one key."""

    __slots__ = ("count", "first", "steps", "values")

    def __init__(self, size: int) -> None:
        self.steps: deque[int] = deque(maxlen=size)
        self.values: deque[float] = deque(maxlen=size)
        self.count = 0
        self.first: list[float] = []  # the run's first points (an early level)

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
