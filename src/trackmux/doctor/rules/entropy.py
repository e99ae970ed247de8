"""entropy_explosion: the policy's entropy rising far above its level (docs/doctor.md).

The other way an entropy goes wrong than ``entropy_collapse``: a policy pushed off its
support (a learning rate too high, a broken loss sign, a reward that pays for gibberish)
spreads its probability over more and more tokens and turns to noise; its per-token
entropy climbs past where the run started and keeps going. RL post-training lowers the
entropy as the policy commits, so a rise is measured twice: from the lowest rolling level
of the last ``lookback`` checks (a rebound from a dip is a rise) and against the run's
early level (a rebound that stays below where the run began is not an explosion). A rise
that keeps returning to its old level (more than a quarter of the recent points back below
the line) is single-step spikes between ordinary steps, not a policy turning to noise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trackmux.doctor.detector import Param
from trackmux.doctor.findings import Finding
from trackmux.doctor.rules.metrics import ONSET, WINDOW_PARAMS, enough, windows
from trackmux.doctor.rules.series import SeriesRule, at, first_past, fmt, since, span
from trackmux.doctor.stats import STRONG, Series, SlidingBest, median, ratio, robust_sigma


class EntropyExplosion(SeriesRule):
    """Policy entropy rises ``grow`` times above its lowest rolling level (the ``window``
    steps' median, the lowest of the last ``lookback`` checks), to at least ``above`` times
    its early level (the median of the run's first ``early`` points) and ``sigmas`` times
    its noise, for ``persist`` checks: the policy turning to noise. The finding grows and
    becomes critical past ``critical`` times the early level."""

    rule = "entropy_explosion"
    noise_points = 160
    params_spec = {
        "keys": Param(["@entropy"], "patterns", "policy entropy (dialects.py), or patterns"),
        "early": Param(10, "count", "points of the early level"),
        "window": Param(20, "count", "steps in the rolling level"),
        "recent": Param(5, "count", "steps in the recent median"),
        **WINDOW_PARAMS,
        "lookback": Param(300, "count", "checks back the lowest level is looked for"),
        "grow": Param(2.0, "positive", "times above the lowest rolling level"),
        "above": Param(1.5, "positive", "times above the early level"),
        "sigmas": Param(4.0, "positive", "the rise in units of the level window's noise"),
        "critical": Param(3.0, "positive", "critical past this many times the early level"),
        "persist": Param(3, "count"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.keep_first = int(self.params["early"])
        self.levels: dict[str, SlidingBest] = {}

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        if len(s.first) < self.params["early"] or not enough(s, self.params):
            return None
        recent_n, _, window_n = windows(s, self.params)
        before = s.before_tail(recent_n, window_n)
        steps = s.steps
        lows = self.levels.get(key)
        if lows is None:
            lows = self.levels[key] = SlidingBest(int(self.params["lookback"]), lowest=True)
        lows.add((median(before), steps[-recent_n - window_n], steps[-recent_n - 1]))
        low, first, last = lows.best()
        early = median(s.first)
        recent = median(s.tail(recent_n))
        line = max(self.params["grow"] * low, self.params["above"] * early,
                   low + self.params["sigmas"] * robust_sigma(before))
        # a level that rose leaves its old one behind: recent points back below the line
        # are single-step spikes between ordinary steps, not a new level
        back = sum(v < line for v in s.tail(recent_n))
        bad = early > 0 and low >= 0 and recent >= line and back <= recent_n // 4
        # far past the level's noise, every recent point past the line: conclusive
        strong = bad and recent - low >= STRONG * self.params["sigmas"] * \
            robust_sigma(before)
        # no two-point path (stats.sudden) here, as entropy_collapse has: a real healthy
        # run (tests/doctor/real, cs336-grpo-no-clip-off-policy-stable) jumps 25x for four
        # steps and comes back; a policy turning to noise stays there
        latch = self.latch(key)
        if not latch.check(bad, first_past(s, recent_n, lambda v: v >= line), strong):
            return None
        half = ONSET * line + (1 - ONSET) * low
        onset = since(s, lambda v: v >= half, latch.onset)
        where, proof = at(s, key, onset)
        found = self.finding(onset, [key], (
            f"{key} rose to a recent median of {fmt(recent)}, {ratio(recent, early):.1f}x "
            f"its early level {fmt(early)} and {ratio(recent, low):.1f}x its lowest level "
            f"{fmt(low)} ({span([first, last])}), rising since {where}: the policy is turning "
            f"to noise (its probability spread over ever more tokens)"), evidence=[proof])
        return found.grows(1, early, self.params["critical"] * early)
