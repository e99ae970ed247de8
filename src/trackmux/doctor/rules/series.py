"""What the curve rules share: per-key series of the matched metrics, latches, numbers,
windows in steps, and the evidence a finding quotes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trackmux.core.events import Event, MetricsEvent
from trackmux.doctor.detector import Detector, KeyMatcher
from trackmux.doctor.findings import Finding
from trackmux.doctor.stats import (
    SUDDEN_POINTS,
    Latch,
    Noise,
    Series,
    finite,
    sudden_run,
)

#: per-rule bound on the keys it keeps a series of (a run that logs a million distinct
#: keys must not grow the doctor without bound; the first ones are kept)
MAX_SERIES = 2048

#: a finding is dated from where its curve was this share of the way from its level to
#: the threshold (the trailing run of such points, ``since``): where the change began
ONSET = 0.25


def fmt(value: float) -> str:
    return f"{value:.3g}"


def span(steps: Sequence[int]) -> str:
    return f"steps {steps[0]}-{steps[-1]}" if steps else "the start"


class SeriesRule(Detector):
    """A rule over the finite values of the metrics its ``keys`` patterns match."""

    #: points kept per key; the run's first ``keep_first`` are kept apart (an early level)
    keep_first = 0
    #: points a rule that judges a change in the curve's own noise reads it from (0: it
    #: does not; stats.Noise)
    noise_points = 0
    kinds = frozenset({"metrics"})

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.match = KeyMatcher(self.params["keys"])
        self.series: dict[str, Series] = {}
        self.latches: dict[tuple[str, str], Latch] = {}
        self.noises: dict[str, Noise] = {}

    def size(self) -> int:
        return (int(self.params.get("window", 20)) + int(self.params.get("recent", 5))
                + int(self.params.get("gap", 0)) + 1)

    def selected(self, data: Mapping[str, Any]) -> list[str]:
        return self.keys_for(self.match, data)

    def update(self, event: Event) -> Sequence[Finding]:
        if not isinstance(event, MetricsEvent):
            return ()
        out: list[Finding] = []
        series, data = self.series, event.data
        for key in self.selected(data):
            raw = data[key]
            if raw.__class__ is float and raw - raw == 0.0:  # finite float: the usual case
                value: float = raw
            else:
                checked = finite(raw)
                if checked is None:
                    continue
                value = checked
            s = series.get(key)
            if s is None:
                if len(series) >= MAX_SERIES:
                    continue
                s = series[key] = Series(self.size())
            s.add(event.step, value, self.keep_first)
            if self.noise_points:
                noise = self.noises.get(key)
                if noise is None:
                    noise = self.noises[key] = Noise(self.noise_points)
                noise.add(value)
            found = self.check(key, s, event.step)
            if found is not None:
                found.time = event.time
                if found.direction and found.peak is None:  # where a growing one stands
                    found.peak = peak(s, found.step, found.direction)
                if found.direction and found.began is None and found.level is not None:
                    found.began = left_level(s, found.step, found.direction, found.level)
                out.append(found)
        return out

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        raise NotImplementedError

    def noise(self, key: str, skip: int) -> Noise | None:
        """The key's noise, read from its points before the last ``skip`` (those a change
        is judged on); None while too few points are there."""
        noise = self.noises.get(key)
        return noise if noise is not None and noise.estimate(skip) else None

    def sudden(self, key: str, s: Series, level: float, line: float, direction: int,
               far: float) -> bool:
        """The last ``SUDDEN_POINTS`` to ``SUDDEN_MOST`` points of ``key`` all past the
        rule's ``line``, together ``far`` sigmas of the curve's own noise beyond ``level``
        and each far beyond any point before the change (the more points, the less far):
        conclusive without the recent median or the latch's ``persist``
        (stats.sudden_run)."""
        values = s.values
        if len(values) < SUDDEN_POINTS or any(
                direction * (values[-i] - line) < 0 for i in range(1, SUDDEN_POINTS + 1)):
            return False  # (the usual case, checked before the noise is read)
        # the noise read before the last two points, as the rule's own test reads it at
        # this count (the estimate is shared: read before more of them, it moved the
        # rule's recent-median test too, and three generated collapses were told later)
        noise = self.noise(key, SUDDEN_POINTS)
        if noise is None:
            return False
        return sudden_run(list(noise.values), noise, level, line, direction, far) > 0

    def latch(self, key: str, what: str = "") -> Latch:
        latch = self.latches.get((key, what))
        if latch is None:
            latch = self.latches[(key, what)] = Latch(int(self.params.get("persist", 3)))
        return latch


def peak(s: Series, onset: int, direction: int) -> tuple[int, float] | None:
    """The worst (step, value) from ``onset`` on: the highest for ``direction`` +1, the
    lowest for -1 (None if the series no longer reaches back to it)."""
    points = [(st, v) for st, v in zip(s.steps, s.values, strict=True) if st >= onset]
    if not points:
        return None
    return max(points, key=lambda p: direction * p[1])


def left_level(s: Series, onset: int, direction: int, level: float) -> int:
    """Where a change found at ``onset`` began: the step after the last point before it
    that stood at ``level`` or better (``direction`` +1: higher is worse); the series'
    first step if none of its points did (the change began before it), at most
    ``onset``."""
    steps, values = s.steps, s.values
    for i in range(len(steps) - 1, -1, -1):
        if steps[i] < onset and direction * (values[i] - level) <= 0:
            return min(steps[i + 1], onset) if i + 1 < len(steps) else onset
    return min(steps[0], onset) if steps else onset


def trend_window(s: Series, steps: int, least: int) -> tuple[list[int], list[float]] | None:
    """The points a trend is fitted over: those of the last ``steps`` steps, and at least
    ``least`` (a sparse curve, such as a validation score every 10 steps, reaches further
    back); None while the series does not yet reach back that far."""
    n = s.points(steps, least)
    if len(s.values) < n:
        return None
    return list(s.steps)[-n:], s.tail(n)


def first_past(s: Series, n: int, past: Callable[[float], bool]) -> int:
    """The step of the first of the last ``n`` points for which ``past`` holds (the
    onset of a change the recent median just showed); the first of them if none does."""
    steps, values = s.steps, s.values
    start = max(0, len(values) - n)
    for i in range(start, len(values)):
        if past(values[i]):
            return steps[i]
    return steps[start]


def since(s: Series, past: Callable[[float], bool], fallback: int) -> int:
    """The first step of the trailing run of points for which ``past`` holds (the curve
    was already part of the way from its level to the threshold there: the finding dates
    from where the change began, not from where it was confirmed); ``fallback`` if
    none."""
    onset = None
    for st, v in zip(reversed(s.steps), reversed(s.values), strict=True):
        if not past(v):
            break
        onset = st
    return fallback if onset is None else min(onset, fallback)


def at(s: Series, key: str, step: int) -> tuple[str, tuple[str, int, float] | None]:
    """``"<value> at step <step>"`` with the value logged at ``step``, and its evidence."""
    value = s.value_at(step)
    if value is None:
        return f"step {step}", None
    return f"{fmt(value)} at step {step}", (key, step, value)


def evidence(*items: tuple[str, int, float] | None) -> list[tuple[str, int, float]]:
    return [item for item in items if item is not None]
