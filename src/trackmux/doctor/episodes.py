"""Findings that grow: a finding is an episode, followed after the rule raised it.

A rule raises a finding once, when it is sure (its latch); the curve goes on. A KL found
29.5x above its level at a median of 0.37 may reach 5.0 with the reward flat all along,
and a reader of the run needs that, not the first words. So the engine follows the first
key of every finding whose rule said how it goes bad (``Finding.grows``): the worst value
and its step, the latest, and the rule's critical line, whose crossing (``PERSIST`` points
in a row past it) raises the severity to ``critical``. What moved with it is read from the
run's main signals (reward, response length, truncation, entropy, KL, grad norm): each
one's median over the ``BEFORE_STEPS`` steps before the change began against its last
``RECENT_POINTS`` points. The change began where the curve left its level
(``Finding.began``), which may be well before the onset its rule dated: a slow fall found
late is dated where its rule's short series still reaches, and signals read from there
would have moved with it already, told as flat beside a message saying they rose.

An update is a new :class:`~trackmux.core.events.FindingEvent` of the same id with the next
revision, and updates are few: when the severity rises, when the worst value's distance
from the level has grown fourfold since the last event said it, when a newer episode of the same
rule and key takes over, and once when the run has ended (the doctor ticked with the
trainer gone) if anything changed since. A KL running from 0.37 to 5 is told in a handful
of events, not one per step; the work per metrics event is a dict lookup per followed key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from trackmux.core.events import FindingEvent
from trackmux.doctor.findings import Finding, severity_rank
from trackmux.doctor.stats import Series, finite, median, ratio, robust_sigma

#: the signals whose course is told beside a finding (the first key of each)
CONTEXT = ("reward", "response_length", "truncation", "entropy", "kl", "grad_norm")
CONTEXT_POINTS = 512
#: points in a row past the critical line before the severity rises
PERSIST = 3
BEFORE_STEPS = 20
RECENT_POINTS = 5
#: an update is due when the worst value's distance from the level grew this many times
GROWTH = 4.0
#: a signal that moved less than this share of its level (and 3 standard errors of the
#: change of its median) is flat
FLAT = 0.1
#: a median's standard error over a mean's, for roughly normal noise (sqrt(pi / 2))
MEDIAN_SE = 1.2533
#: episodes followed at once (the oldest stop growing beyond this)
MAX_FOLLOWED = 256


def _fmt(value: float) -> str:
    return f"{value:.3g}"


class Context:
    """Short series of the run's main signals, for what moved beside a finding."""

    def __init__(self) -> None:
        self.series: dict[str, tuple[str, Series]] = {}

    def add(self, by_signal: Mapping[str, list[str]], data: Mapping[str, Any],
            step: int) -> None:
        for signal in CONTEXT:
            keys = by_signal.get(signal)
            if not keys:
                continue
            held = self.series.get(signal)
            if held is None:
                held = self.series[signal] = (keys[0], Series(CONTEXT_POINTS))
            elif held[0] not in data:  # the first key fed is the one followed
                continue
            value = finite(data[held[0]])
            if value is not None:
                held[1].add(step, value)

    def before(self, onset: int) -> dict[str, tuple[str, float, float]]:
        """Per signal: (key, median, standard error of that median) of its points before
        ``onset``. A change is judged by the standard errors of the two medians
        (:meth:`now_error`), not by the spread of single points: a reward that moved
        0.34 -> 0.98 was called flat beside the noise of its single points."""
        out: dict[str, tuple[str, float, float]] = {}
        for signal, (key, s) in self.series.items():
            pairs = [(st, v) for st, v in zip(s.steps, s.values, strict=True) if st < onset]
            points = [v for st, v in pairs if st >= onset - BEFORE_STEPS]
            if len(points) < 3:
                points = [v for _, v in pairs[-RECENT_POINTS:]]
            if len(points) >= 3:
                out[signal] = (key, median(points), _median_error(points))
        return out

    def now(self, signal: str) -> float | None:
        held = self.series.get(signal)
        if held is None or not held[1].values:
            return None
        return median(held[1].tail(RECENT_POINTS))

    def now_error(self, signal: str) -> float:
        """The standard error of :meth:`now` (0 below 3 points)."""
        held = self.series.get(signal)
        points = list(held[1].tail(RECENT_POINTS)) if held is not None else []
        return _median_error(points) if len(points) >= 3 else 0.0


def _median_error(points: list[float]) -> float:
    """A median's standard error, from the points' robust spread."""
    return MEDIAN_SE * robust_sigma(points) / math.sqrt(len(points))


class Episode:
    """One finding while it lasts: its state now and what its last event said."""

    def __init__(self, fid: str, head: Finding, severity: str, message: str,
                 keys: tuple[str, ...], evidence: list[tuple[str, int, float | str]],
                 found_at: int, then: dict[str, tuple[str, float, float]]) -> None:
        self.id, self.rule, self.keys = fid, head.rule, keys
        self.key = keys[0]
        self.onset, self.found_at = head.step, found_at
        self.direction, self.level, self.critical = head.direction, head.level, head.critical
        self.severity, self.base, self.evidence = severity, message, evidence
        self.then = then
        self.worst: tuple[int, float] | None = None
        self.latest: tuple[int, float] | None = None
        for key, step, value in evidence:
            if key == self.key and isinstance(value, float):
                self._worse(step, value)
        if head.peak is not None:  # what its rule saw between the onset and now
            self._worse(*head.peak)
        self.past = 0
        self.past_since = 0
        self.critical_since: int | None = None
        self.revision = 0
        self.told: tuple[str, tuple[int, float] | None, tuple[int, float] | None] = (
            "", None, None)
        self.told_worst: float | None = None

    def _worse(self, step: int, value: float) -> None:
        if self.worst is None or self.direction * (value - self.worst[1]) > 0:
            self.worst = (step, value)

    def observe(self, step: int, value: float) -> bool:
        """A new point of the followed key; True when an update is due now."""
        self.latest = (step, value)
        self._worse(step, value)
        rose = False
        if self.critical is not None and self.direction * (value - self.critical) >= 0:
            if self.past == 0:
                self.past_since = step
            self.past += 1
            if self.past >= PERSIST and severity_rank(self.severity) < 2:
                self.severity, self.critical_since, rose = "critical", self.past_since, True
        else:
            self.past = 0
        return rose or self._grew()

    def _grew(self) -> bool:
        """The worst value moved GROWTH times as far from the level as the last event
        said."""
        if self.worst is None or self.told_worst is None:
            return False
        base = self.level if self.level is not None else self.told_worst
        told = self.direction * (self.told_worst - base)
        now = self.direction * (self.worst[1] - base)
        return math.isfinite(told) and told > 0 and now >= GROWTH * told

    @property
    def changed(self) -> bool:
        return (self.severity, self.worst, self.latest) != self.told

    def event(self, time: float, context: Context) -> FindingEvent:
        """The episode's next event (revision 0 first), as it stands now."""
        moved = self._moved(context)
        with_it = "" if not moved else "; with it: " + ", ".join(
            f"{key} {how} ({_fmt(then)} before, {_fmt(now)} now)"
            for key, how, then, now in moved)
        evidence = list(self.evidence)
        if self.revision == 0 or self.worst is None:
            message = self.base + with_it
        else:
            message = self._state() + with_it + f". Found at step {self.found_at}: {self.base}"
            for point in (self.worst, self.latest):
                if point is not None:
                    evidence.append((self.key, point[0], point[1]))
        self.told = (self.severity, self.worst, self.latest)
        self.told_worst = None if self.worst is None else self.worst[1]
        event = FindingEvent(
            self.rule, self.severity, self.keys, message, self.onset, time,
            evidence=tuple(dict.fromkeys(evidence)), id=self.id, revision=self.revision,
            worst=None if self.worst is None else (self.key, *self.worst),
            latest=None if self.latest is None else (self.key, *self.latest),
            moved=tuple(moved))
        self.revision += 1
        return event

    def _state(self) -> str:
        step, value = self.worst or (self.onset, math.nan)
        if self.latest == self.worst:
            text = f"{self.key} now at its worst, {_fmt(value)} at step {step}"
        else:
            text = f"{self.key} worst {_fmt(value)} at step {step}"
        text += self._against_level(value)
        if self.latest is not None and self.latest != self.worst:
            text += f", now {_fmt(self.latest[1])} at step {self.latest[0]}"
        if self.critical_since is not None and self.critical is not None:
            text += (f"; past its critical line {_fmt(self.critical)} since step "
                     f"{self.critical_since}")
        return text

    def _against_level(self, value: float) -> str:
        level = self.level
        if level is None or level <= 0 or not math.isfinite(level):
            return ""
        times = ratio(value, level)
        if self.direction < 0:
            return f" ({times:.0%} of its level {_fmt(level)})"
        shown = f"{times:.0f}" if times >= 10 else f"{times:.1f}"
        return f" ({shown}x its level {_fmt(level)})"

    def _moved(self, context: Context) -> list[tuple[str, str, float, float]]:
        """(key, how, then, now) of each main signal beside this one: the reward always
        (flat says as much as up or down), the others when they moved."""
        out = []
        for signal, (key, then, error) in self.then.items():
            if key in self.keys:
                continue
            now = context.now(signal)
            if now is None:
                continue
            noise = math.hypot(error, context.now_error(signal))
            tolerance = max(3 * noise, FLAT * abs(then))
            how = "flat" if abs(now - then) <= tolerance else "up" if now > then else "down"
            if how != "flat" or signal == "reward":
                out.append((key, how, then, now))
        return out
