"""A curve that falls from the run's own level and stays there: the shape
``entropy_collapse`` (rules/metrics.py) and ``length_collapse`` (rules/length_collapse.py)
share, written once.

Each rule reads its own level and judges the fall in its own noise (``judge``); what
follows is the same for both: the latch that asks the fall to hold, the onset dated where
the curve was ``ONSET`` of the way down, and a growing finding said the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trackmux.doctor.findings import Finding
from trackmux.doctor.rules.series import (
    ONSET,
    SeriesRule,
    at,
    first_past,
    fmt,
    since,
    span,
)
from trackmux.doctor.stats import Series, ratio


@dataclass(frozen=True)
class Fall:
    """What a falling rule read at one check."""

    level: float  #: the level the fall is measured from
    recent: float  #: the median of the last ``recent_n`` points
    recent_n: int
    line: float  #: a point at or below it is past the rule's line
    bad: bool  #: fallen at this check
    strong: bool  #: conclusive at once (the latch's ``persist`` not waited for)
    critical: float | None = None  #: the finding turns critical below this
    #: the first and last step of the window the level is the median of (None: the
    #: run's early level)
    steps: tuple[int, int] | None = None

    def said(self) -> str:
        """The level in the finding's message."""
        if self.steps is None:
            return f"early level {fmt(self.level)}"
        return f"level of {fmt(self.level)} ({span(self.steps)})"


class LevelFall(SeriesRule):
    """A rule whose finding is a fall of its curve below a line under the run's own
    level. Its params have ``early``: the run's first points, kept apart (its early
    level); nothing is judged before they are there."""

    #: said after the fall in the finding (what it means for the run), or ""
    meaning = ""

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.keep_first = int(self.params["early"])
        #: key -> the first step of the curve's current stretch below its level (kept as
        #: the points come, in O(1): a slow fall found after the series forgot where it
        #: began still says so, ``Finding.began``)
        self.below_since: dict[str, int] = {}

    def judge(self, key: str, s: Series, step: int) -> Fall | None:
        """The level, the line and whether the curve is past it (None: too few points)."""
        raise NotImplementedError

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        if len(s.first) < self.params["early"]:
            return None
        fall = self.judge(key, s, step)
        if fall is None:
            return None
        if s.values[-1] >= fall.level:
            self.below_since.pop(key, None)
        else:
            self.below_since.setdefault(key, s.steps[-1])
        line = fall.line
        latch = self.latch(key)
        if not latch.check(fall.bad, first_past(s, fall.recent_n, lambda v: v <= line),
                           fall.strong):
            return self.after(key, s, fall, step) if latch.active else None
        half = ONSET * line + (1 - ONSET) * fall.level
        onset = since(s, lambda v: v <= half, latch.onset)
        where, proof = at(s, key, onset)
        found = self.finding(onset, [key], (
            f"{key} collapsed to a recent median of {fmt(fall.recent)}, "
            f"{ratio(fall.recent, fall.level):.0%} of its {fall.said()}, falling since "
            f"{where}{self.meaning}"), evidence=[proof])
        found.began = min(onset, self.below_since.get(key, onset))
        return self.told(key, s, fall, found).grows(-1, fall.level, fall.critical)

    def told(self, key: str, s: Series, fall: Fall, found: Finding) -> Finding:
        """The finding as told (a rule that reads what moved with the fall may soften
        it); as found by default."""
        return found

    def after(self, key: str, s: Series, fall: Fall, step: int) -> Finding | None:
        """A later finding of the same fall while it lasts (the latch is active): none by
        default."""
        return None
