"""loss_blowup: a policy loss whose size grows by orders of magnitude (docs/doctor.md).

A policy-gradient loss has no level to go back to: its sign and size follow the batch's
advantages, so a hand-written loop logs -18 on one step, 10 on the next and exactly 0
where every group was flat. What it does not do in a healthy run is grow a hundredfold
and stay there: a loss of -8,000 where it was tens is the updates running away (a
reference-free loop whose responses reach their cap, a learning rate too high), often
before the reward says so. So the rule reads the loss's size (``log10 |loss|``; a loss of
exactly 0, a step with nothing to learn, is no point) and compares the median of its last
``recent`` points with the ``window`` steps before them, the run's own history: the rise
must be ``decades`` orders of magnitude above their median and past their ``above``
quantile (a loss whose ordinary steps already range over decades must leave that range),
for ``persist`` checks. A rise while the reward keeps improving or holds is ``info``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from trackmux.doctor.detector import Param
from trackmux.doctor.findings import Finding
from trackmux.doctor.rules.learning import RewardFollower, reward_held, reward_improving
from trackmux.doctor.rules.series import at, first_past, fmt, span
from trackmux.doctor.stats import Series, median

#: sizes kept per key: the level's window and the recent points of a run that logs often
SIZES = 256
#: a point this many decades below the last check's line is not checked (the recent median
#: passes the line only with this point at or above it; the level moves far less per point)
GATE = 0.5


class LossBlowup(RewardFollower):
    """The size of the policy loss (``log10 |loss|``, zeros left out): the median of its
    last ``recent`` points rises ``decades`` orders of magnitude above the median of the
    ``window`` steps before them (at least ``min_points`` points) and past their ``above``
    quantile, for ``persist`` checks; ``info`` while the reward keeps improving or holds
    (rules/learning.py)."""

    rule = "loss_blowup"
    params_spec = {
        "keys": Param(["@loss"], "patterns", "the policy loss (dialects.py), or patterns"),
        "window": Param(50, "count", "steps in the level (at least min_points points)"),
        "recent": Param(8, "count", "points (non-zero) in the recent median"),
        "min_points": Param(10, "count", "least non-zero points in the level"),
        "decades": Param(1.0, "positive", "orders of magnitude above the level"),
        "above": Param(0.9, "fraction", "the recent median must also pass this quantile "
                       "of the level's sizes (the run's own largest ordinary steps)"),
        "reward_keys": Param(["@reward"], "patterns", "the reward judged still improving"),
        "learning": Param(0.1, "fraction", "a reward that rose this share of its level (and "
                          "3 of its noise), or held, through the rise: info"),
        "persist": Param(3, "count"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.sizes: dict[str, Series] = {}
        self.lines: dict[str, float] = {}  # key -> its line at the last full check

    def size(self) -> int:  # raw points, for the value a finding quotes at its onset
        return 64

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        value = s.values[-1]
        if value == 0.0:
            return None
        sizes = self.sizes.get(key)
        if sizes is None:
            sizes = self.sizes[key] = Series(SIZES)
        size = math.log10(abs(value))
        sizes.add(step, size)
        latch = self.latch(key)
        if size < self.lines.get(key, -math.inf) - GATE and not latch.bad and not latch.active:
            return None  # far below the last line: the recent median cannot pass it now
        recent_n = int(self.params["recent"])
        if len(sizes.values) <= recent_n:
            return None
        level_n = sizes.points(int(self.params["window"]), int(self.params["min_points"]),
                               recent_n)
        if len(sizes.values) < recent_n + level_n:
            return None
        level_values = sizes.before_tail(recent_n, level_n)
        level, recent = median(level_values), median(sizes.tail(recent_n))
        ordered = sorted(level_values)
        top = ordered[min(len(ordered) - 1, int(self.params["above"] * len(ordered)))]
        line = max(level + self.params["decades"], top)
        self.lines[key] = line
        bad = recent >= line
        onset = first_past(sizes, recent_n, lambda v: v >= line)
        if not latch.check(bad, onset):
            return None
        where, proof = at(s, key, latch.onset)
        then = 10 ** level
        now = 10 ** recent
        level_steps = [sizes.steps[-recent_n - level_n], sizes.steps[-recent_n - 1]]
        message = (f"{key} grew {now / then:.0f}x in size: a recent median |{key}| of "
                   f"{fmt(now)} against {fmt(then)} over {span(level_steps)}, past "
                   f"{fmt(10 ** line)} since {where}: the updates are running away")
        window = int(self.params["window"])
        learning = reward_improving(self.rewards, latch.onset, level_steps[0], window,
                                    self.params["learning"])
        held = "" if learning else reward_held(self.rewards, latch.onset, window)
        if learning or held:
            message += (f", while the reward {'kept improving' if learning else 'held'} "
                        f"({learning or held}): a stretch the policy came through")
        return self.finding(latch.onset, [key], message, evidence=[proof],
                            severity="info" if learning or held else None)
