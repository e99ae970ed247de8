"""Rules over metric curves: nonfinite, reward_collapse, kl_blowup, entropy_collapse,
grad_explosion, length_blowup, val_regression (docs/doctor.md has every parameter).

Each compares a short recent median with a robust level of the points before it, asks
the change to be large both relative to the level and to the curve's own noise (MAD),
and to hold for ``persist`` points in a row; a healthy run that rises noisily, plateaus
or moves in a curriculum step stays below every threshold.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from trackmux.core.events import Event, HistogramEvent, MetricsEvent
from trackmux.doctor.detector import Detector, KeyMatcher, Param
from trackmux.doctor.findings import Finding
from trackmux.doctor.rules.series import SeriesRule, _Either, first_past, fmt, span
from trackmux.doctor.stats import Latch, Series, median, robust_sigma


class Nonfinite(Detector):
    """NaN or inf in a metric (or in a histogram's values): the first step, the keys,
    how many; each key reported once."""

    rule = "nonfinite"
    kinds = frozenset({"metrics", "histogram"})
    params_spec = {
        "keys": Param(["*"], "patterns", "metric keys to check"),
        "severity": Param("critical", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.match = KeyMatcher(self.params["keys"])
        self.seen: set[str] = set()
        self.total = 0

    def update(self, event: Event) -> Sequence[Finding]:
        bad: dict[str, str] = {}
        if isinstance(event, MetricsEvent):
            try:  # one C-level sum: finite when every value is (overflow: look closer)
                if math.isfinite(sum(event.data.values())):
                    return ()
            except TypeError:
                pass
            for key, value in event.data.items():
                if not math.isfinite(value) and self.match(key):
                    bad[key] = "nan" if math.isnan(value) else "inf"
        elif isinstance(event, HistogramEvent) and (event.nan or event.inf or event.neginf) \
                and self.match(event.key):
            bad[event.key] = f"{event.nan + event.inf + event.neginf} non-finite values"
        if not bad:
            return ()
        self.total += len(bad)
        new = [k for k in bad if k not in self.seen]
        if not new:
            return ()
        self.seen.update(new)
        shown = ", ".join(f"{k} ({bad[k]})" for k in new[:8])
        more = f" and {len(new) - 8} more" if len(new) > 8 else ""
        first = "first " if self.total == len(bad) else ""
        message = (f"{first}non-finite values at step {event.step} in {len(new)} "
                   f"key{'s' if len(new) > 1 else ''}: {shown}{more}")
        return [self.finding(event.step, new, message, time=event.time)]


class RewardCollapse(SeriesRule):
    """A reward falls well below its recent level (the highest rolling median of the last
    ``lookback`` points) and stays there: the fall is at least ``drop`` of the reward
    gained since the start (or of the level's size), and ``sigmas`` times its noise."""

    rule = "reward_collapse"
    keep_first = 20
    params_spec = {
        "keys": Param(["critic/score/mean", "critic/rewards/mean", "reward/mean",
                       "*reward*/mean", "*score/mean", "!val*", "!*std*"], "patterns"),
        "window": Param(20, "count", "points in the rolling level"),
        "recent": Param(5, "count", "points in the recent median"),
        "lookback": Param(100, "count", "how far back the level's peak is looked for"),
        "drop": Param(0.5, "fraction", "share of the gain (or level) that must be lost"),
        "sigmas": Param(4.0, "positive", "the fall in units of the curve's noise"),
        "persist": Param(3, "count", "checks in a row before it counts"),
        "severity": Param("critical", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.levels: dict[str, deque[tuple[float, float, int, int]]] = {}

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        window, recent_n = self.params["window"], self.params["recent"]
        if s.count < window + recent_n:
            return None
        before = s.before_tail(recent_n, window)
        steps = list(s.steps)
        levels = self.levels.setdefault(key, deque(maxlen=self.params["lookback"]))
        levels.append((median(before), robust_sigma(before), steps[0],
                       steps[-recent_n - 1]))
        ref, sigma, first, last = max(levels, key=lambda item: item[0])
        recent = median(s.tail(recent_n))
        early = median(s.first)
        scale = max(ref - early, abs(ref), 1e-12)
        fall = ref - recent
        bad = fall >= self.params["drop"] * scale and fall >= self.params["sigmas"] * sigma
        line = ref - max(self.params["drop"] * scale, self.params["sigmas"] * sigma)
        if not self.latch(key).check(bad, first_past(s, recent_n, lambda v: v <= line)):
            return None
        onset = self.latch(key).onset
        pct = f"{fall / abs(ref):.0%}" if abs(ref) > 1e-9 else fmt(fall)
        return self.finding(onset, [key], f"{key} fell {pct} from its level of {fmt(ref)} "
                            f"({span([first, last])}) to {fmt(recent)} at step {onset}")


class KlBlowup(SeriesRule):
    """A KL rises ``ratio`` times above its level (the median of the ``window`` points that
    end ``gap`` points before the recent ones; at least ``floor``) and ``sigmas`` times its
    noise, or past the absolute ``bound`` (critical). The gap compares a KL that runs away
    over a few tens of steps with where it was before it started to climb, not with the
    first half of the climb; a KL that rises as a healthy policy learns moves too slowly or
    too noisily for it."""

    rule = "kl_blowup"
    params_spec = {
        "keys": Param(["actor/ppo_kl", "actor/kl_loss", "kl/divergence", "actor/kl*",
                       "*/kl", "*kl_div*", "!*coef*", "!*kl_ctrl*", "!val*"], "patterns"),
        "window": Param(20, "count"),
        "recent": Param(3, "count"),
        "gap": Param(10, "count", "points between the level's window and the recent ones"),
        "ratio": Param(3.0, "positive", "how many times above its level"),
        "floor": Param(0.01, "positive", "levels below this count as this (tiny KLs)"),
        "sigmas": Param(4.0, "positive"),
        "bound": Param(None, "bound", "an absolute KL that is always critical (None: off)"),
        "persist": Param(3, "count"),
        "severity": Param("warning", "severity"),
    }

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        recent_n, window = self.params["recent"], self.params["window"]
        recent = median(s.tail(recent_n))
        steps = list(s.steps)
        bound = self.params["bound"]
        if bound is not None and self.latch(key, "bound").check(recent > bound,
                                                               steps[-min(recent_n, len(steps))]):
            onset = self.latch(key, "bound").onset
            return self.finding(onset, [key], f"{key} passed its bound {fmt(bound)}: "
                                f"{fmt(recent)} at step {onset}", severity="critical")
        gap = self.params["gap"]
        if s.count < window + recent_n + gap:
            return None
        before = s.before_tail(recent_n + gap, window)
        level = median(before)
        base = max(level, self.params["floor"])
        noise = self.params["sigmas"] * robust_sigma(before)
        bad = recent >= self.params["ratio"] * base and recent - level >= noise
        line = max(self.params["ratio"] * base, level + noise)
        if not self.latch(key).check(bad, first_past(s, recent_n, lambda v: v >= line)):
            return None
        onset = self.latch(key).onset
        level_steps = steps[-(recent_n + gap + window):-(recent_n + gap)]
        return self.finding(onset, [key], f"{key} rose {recent / base:.1f}x above its level "
                            f"of {fmt(level)} ({span(level_steps)}) to {fmt(recent)} at "
                            f"step {onset}")


class EntropyCollapse(SeriesRule):
    """Policy entropy falls to ``fraction`` of its early level (the median of the run's
    first ``early`` points) and stays there."""

    rule = "entropy_collapse"
    params_spec = {
        "keys": Param(["actor/entropy", "policy/entropy", "*/entropy", "!val*"], "patterns"),
        "early": Param(10, "count", "points of the early level"),
        "recent": Param(5, "count"),
        "fraction": Param(0.1, "fraction", "collapse below this share of the early level"),
        "persist": Param(3, "count"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.keep_first = self.params["early"]

    def size(self) -> int:
        return int(self.params["recent"])

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        if len(s.first) < self.params["early"] or s.count < self.params["early"] + 1:
            return None
        early = median(s.first)
        recent = median(s.tail(self.params["recent"]))
        line = self.params["fraction"] * early
        bad = early > 0 and recent <= line
        if not self.latch(key).check(bad, first_past(s, self.params["recent"],
                                                      lambda v: v <= line)):
            return None
        onset = self.latch(key).onset
        return self.finding(onset, [key], f"{key} collapsed to {fmt(recent)}, "
                            f"{recent / early:.0%} of its early level {fmt(early)}, at step "
                            f"{onset}")


class GradExplosion(SeriesRule):
    """A gradient norm spikes ``ratio`` times above its recent median (``persist`` points
    in a row; a single point ``hard_ratio`` times above is enough), or vanishes below
    ``vanish`` of its early level."""

    rule = "grad_explosion"
    keep_first = 20
    params_spec = {
        "keys": Param(["actor/grad_norm", "critic/grad_norm", "*grad_norm*", "!val*"],
                      "patterns"),
        "window": Param(20, "count"),
        "recent": Param(5, "count", "points in the median compared for vanishing"),
        "ratio": Param(10.0, "positive"),
        "hard_ratio": Param(100.0, "positive"),
        "floor": Param(0.1, "fraction", "a spike is measured from at least this share of "
                       "the early level (a norm that shrank is not exploding)"),
        "vanish": Param(0.001, "fraction"),
        "persist": Param(2, "count"),
        "severity": Param("warning", "severity"),
    }

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        window = self.params["window"]
        if s.count <= window:
            return None
        before = s.before_tail(1, window)
        early = median(s.first)
        level = max(median(before), self.params["floor"] * early)
        value = s.values[-1]
        if level > 0:
            hard = value >= self.params["hard_ratio"] * level
            spike = value >= self.params["ratio"] * level
            latch = self.latch(key)
            if latch.check(spike, step) or (hard and not latch.active and
                                            self._force(latch, step)):
                return self.finding(latch.onset, [key], f"{key} spiked to {fmt(value)}, "
                                    f"{value / level:.0f}x its median of {fmt(level)} over "
                                    f"{span(list(s.steps)[:-1])}, at step {latch.onset}")
        recent = median(s.tail(self.params["recent"]))
        gone = early > 0 and recent <= self.params["vanish"] * early
        vanish = self.latch(key, "vanish")
        if vanish.check(gone, step):
            return self.finding(vanish.onset, [key], f"{key} vanished to {fmt(recent)}, "
                                f"{recent / early:.1e} of its early level {fmt(early)}, at step "
                                f"{vanish.onset}")
        return None

    @staticmethod
    def _force(latch: Latch, step: int) -> bool:
        latch.active, latch.onset = True, step
        return True


class LengthBlowup(SeriesRule):
    """Response length runs away (``grow`` times its level) or collapses (below
    ``shrink`` of it), or the truncated share (``clip_keys``) climbs past ``clip_bound``
    and ``clip_rise`` above its level."""

    rule = "length_blowup"
    params_spec = {
        "keys": Param(["response_length/mean", "*response_length/mean", "generation/length",
                       "*/response_length", "!val*"], "patterns"),
        "clip_keys": Param(["response_length/clip_ratio", "*/clip_ratio_response",
                            "*response_length/clip_ratio"], "patterns"),
        "window": Param(20, "count"),
        "recent": Param(5, "count"),
        "grow": Param(2.5, "positive"),
        "shrink": Param(0.3, "fraction"),
        "sigmas": Param(4.0, "positive"),
        "clip_bound": Param(0.2, "fraction"),
        "clip_rise": Param(0.1, "fraction"),
        "persist": Param(3, "count"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.clip = KeyMatcher(self.params["clip_keys"])
        self.match = _Either(KeyMatcher(self.params["keys"]), self.clip)

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        window, recent_n = self.params["window"], self.params["recent"]
        if s.count < window + recent_n:
            return None
        before = s.before_tail(recent_n, window)
        level = median(before)
        recent = median(s.tail(recent_n))
        steps = list(s.steps)
        if self.clip(key):
            bad = (recent >= self.params["clip_bound"]
                   and recent - level >= self.params["clip_rise"])
            latch = self.latch(key, "clip")
            if latch.check(bad, steps[-recent_n]):
                where = span([x for x in steps if x < latch.onset])
                return self.finding(latch.onset, [key], f"{key} (the share of truncated "
                                    f"responses) climbed to {fmt(recent)} from {fmt(level)} "
                                    f"({where}) at step {latch.onset}")
            return None
        noise = self.params["sigmas"] * robust_sigma(before)
        grow = level > 0 and recent >= self.params["grow"] * level and recent - level >= noise
        shrink = level > 0 and recent <= self.params["shrink"] * level and level - recent >= noise
        latch = self.latch(key, "grow" if grow else "shrink")
        other = self.latch(key, "shrink" if grow else "grow")
        other.check(False, step)
        if latch.check(grow or shrink, steps[-recent_n]):
            what = "ran away to" if grow else "collapsed to"
            where = span([x for x in steps if x < latch.onset])
            return self.finding(latch.onset, [key], f"{key} {what} {fmt(recent)}, "
                                f"{recent / level:.1f}x its level of {fmt(level)} ({where}), "
                                f"at step {latch.onset}")
        return None


class ValRegression(Detector):
    """A validation score (higher is better) drops ``drop`` below its best so far (of the
    best, or of the gain since the first evaluation, whichever is larger) for ``persist``
    evaluations in a row."""

    rule = "val_regression"
    kinds = frozenset({"metrics"})
    params_spec = {
        "keys": Param(["val-core/*", "val/*score*", "val/*reward*", "val/*acc*",
                       "!*loss*", "!*std*", "!*length*"], "patterns"),
        "drop": Param(0.25, "fraction"),
        "persist": Param(2, "count", "evaluations in a row"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.match = KeyMatcher(self.params["keys"])
        self.best: dict[str, tuple[float, int, float]] = {}  # best, its step, first value
        self.latches: dict[str, Latch] = {}

    def update(self, event: Event) -> Sequence[Finding]:
        if not isinstance(event, MetricsEvent):
            return ()
        out: list[Finding] = []
        keys: list[str] = []
        for key in self.match.select(event.data):
            value = event.data[key]
            if not math.isfinite(value):
                continue
            best, best_step, first = self.best.get(key, (value, event.step, value))
            scale = max(best - first, abs(best), 1e-12)
            drop = best - value
            latch = self.latches.setdefault(key, Latch(self.params["persist"]))
            if latch.check(drop >= self.params["drop"] * scale, event.step):
                keys.append(key)
                pct = f"{drop / abs(best):.0%}" if abs(best) > 1e-9 else fmt(drop)
                out.append(self.finding(latch.onset, [key], f"{key} dropped {pct} from its "
                                        f"best {fmt(best)} (step {best_step}) to {fmt(value)} "
                                        f"at step {latch.onset}", time=event.time))
            if value > best:
                best, best_step = value, event.step
            self.best[key] = (best, best_step, first)
        return out


BUILTIN: tuple[type[Detector], ...] = (Nonfinite, RewardCollapse, KlBlowup, EntropyCollapse,
                                       GradExplosion, LengthBlowup, ValRegression)
