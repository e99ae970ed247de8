"""length_collapse: responses that shrink to a few tokens (docs/doctor.md).

The other way a response length goes wrong than ``length_blowup``: a policy that finds a
short output the reward does not punish (a well-formed answer with nothing behind it, an
empty reasoning block) drops from a hundred tokens to a dozen within a few updates and
stays there; its reward stays low, and the format reward it still earns hides the fall
in the total. Stanford CS336's GRPO runs at a high learning rate do exactly that ("the
policy collapses to very short outputs that are format-correct and answer-wrong"), while
the healthy seeds of the same loop first shorten their answers to 70% and then lengthen
them again. A policy that learns to be concise shrinks a little; one that collapses falls
to a fraction of where it was, far outside the curve's own noise.

Many hand-written loops measure the length only on their validation split, every tens of
steps (words.py reads ``val_response_length`` as the response length where no training key
names it), so the windows are in steps and ask for as few as two points each, and the run's
first ``early`` points are a level of their own (a curve that falls at its third
evaluation has no full rolling window before the fall): a fall that the sparse curve shows
on three checks in a row is told then, dated where it began.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trackmux.doctor.detector import Param
from trackmux.doctor.rules.fall import Fall, LevelFall
from trackmux.doctor.stats import (
    ANCHORED,
    STRONG,
    Series,
    SlidingBest,
    median,
    robust_sigma,
)


class LengthCollapse(LevelFall):
    """The response length's recent median (the last ``recent`` steps, at least
    ``min_recent`` points) falls below ``shrink`` of its level, the highest of the run's
    early level (the median of its first ``early`` points) and its rolling medians of
    ``window`` steps (at least ``min_points`` points) of the last ``lookback`` checks and
    ``within`` steps, and ``sigmas`` standard deviations of such a change under the
    curve's own noise (stats.Noise once it has 12 points before the recent ones; the
    level window's robust spread until then), for ``persist`` checks (at once where the
    fall is twice that far and the noise is known). The finding grows while the length
    keeps falling."""

    rule = "length_collapse"
    noise_points = 160
    params_spec = {
        "keys": Param(["@response_length"], "patterns", "mean response length "
                      "(dialects.py), or patterns"),
        "early": Param(3, "count", "points of the run's early level"),
        "window": Param(20, "count", "steps in the rolling level"),
        "recent": Param(5, "count", "steps in the recent median"),
        "min_points": Param(2, "count", "least points in the level's window (a validation "
                            "length logged every 10 steps)"),
        "min_recent": Param(2, "count", "least points in the recent median"),
        "lookback": Param(300, "count", "checks back the highest level is looked for"),
        "within": Param(1000, "count", "... and steps back, at most"),
        "shrink": Param(0.3, "fraction", "the recent median at most this share of the "
                        "level: a policy that gets concise shrinks its answers a little "
                        "(CS336's healthy seeds to 70%), a collapse to a fraction"),
        "sigmas": Param(4.0, "positive", "the fall in standard deviations of a change "
                        "between the two windows under the curve's own noise"),
        "persist": Param(3, "count", "checks in a row"),
        "severity": Param("warning", "severity"),
    }
    meaning = (": the policy answers in a few tokens; check that the short answers are "
               "right, not only well-formed (a format reward earned by empty answers, a "
               "learning rate too high)")

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        #: per key: the highest (level, its sigma, first step, last step) of the checks
        self.levels: dict[str, SlidingBest] = {}

    def judge(self, key: str, s: Series, step: int) -> Fall | None:
        recent_n = s.points(int(self.params["recent"]), int(self.params["min_recent"]))
        early = s.first
        if s.count < len(early) + recent_n:
            return None
        steps = s.steps
        levels = self.levels.get(key)
        if levels is None:  # the run's early level first
            levels = self.levels[key] = SlidingBest(int(self.params["lookback"]))
            start = max(0, len(steps) - s.count)  # the run's first point, if still kept
            levels.add((median(early), robust_sigma(early), steps[start],
                        steps[min(len(steps) - 1, start + len(early) - 1)]))
        window_n = s.points(int(self.params["window"]), int(self.params["min_points"]),
                            recent_n)
        if len(s.values) >= recent_n + window_n:
            before = s.before_tail(recent_n, window_n)
            levels.add((median(before), robust_sigma(before), steps[-recent_n - window_n],
                        steps[-recent_n - 1]))
        else:
            window_n = len(early)
        cutoff = step - self.params["within"]  # a level from further back is forgotten
        levels.forget(lambda item: item[2] < cutoff)
        level, sigma, first, last = levels.best()
        recent = median(s.tail(recent_n))
        fall = level - recent
        noise = self.noise(key, recent_n)
        spread = self.params["sigmas"] * sigma if noise is None else \
            self.params["sigmas"] * noise.shift(recent_n, window_n) + \
            ANCHORED * noise.of_median(window_n)
        line = self.params["shrink"] * level
        bad = level > 0 and recent <= line and fall >= spread
        strong = bad and noise is not None and fall >= STRONG * spread
        return Fall(level, recent, recent_n, line, bad, strong, steps=(first, last))


BUILTIN = (LengthCollapse,)
