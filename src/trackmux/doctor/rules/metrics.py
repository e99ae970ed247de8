"""Rules over metric curves: nonfinite, reward_collapse, reward_frozen, kl_blowup,
entropy_collapse, grad_explosion, length_blowup, val_regression (docs/doctor.md has every
parameter).

Each compares a short recent median with a robust level of the points before it, asks
the change to be large both relative to the level and to the curve's own noise (MAD),
and to hold for ``persist`` points in a row; a healthy run that rises noisily, plateaus
or moves in a curriculum step stays below every threshold. Windows are in steps, with a
least number of points (``min_points``), so a run that logs every 20-50 steps is judged
on a few points; a level is anchored (the lowest, or highest, rolling level of the last
``lookback`` checks), so a slow drift is measured from where it started. Keys are the
run's canonical signals (``@reward``, ``@kl`` ...: dialects.py) unless a user names them.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from trackmux.core.events import ConfigEvent, Event, HistogramEvent, MetricsEvent
from trackmux.doctor.detector import Detector, KeyMatcher, Param
from trackmux.doctor.findings import Finding
from trackmux.doctor.rules.fall import Fall, LevelFall
from trackmux.doctor.rules.learning import (
    REWARD_POINTS,
    RewardFollower,
    reward_bought,
    reward_held,
    reward_improving,
)
from trackmux.doctor.rules.series import ONSET as ONSET  # (entropy.py, signals.py read it here)
from trackmux.doctor.rules.series import SeriesRule, at, first_past, fmt, since, span
from trackmux.doctor.rules.slow_start import SlowStart
from trackmux.doctor.stats import (
    ANCHORED,
    STRONG,
    SUDDEN_POINTS,
    Latch,
    Noise,
    Series,
    SlidingBest,
    finite,
    median,
    ratio,
    robust_sigma,
)


class Nonfinite(Detector):
    """NaN or inf in a metric (or in a histogram's values): the first step, the keys,
    how many; each key reported once. Its evidence holds each quoted key's value as the
    string ``"nan"``, ``"inf"`` or ``"-inf"`` (strict JSON has no NaN).

    A key NaN from its first point on, at each of its first ``not_computed`` points (or
    at every point of a run that ended sooner), is ``info``: some trainers log NaN for a
    term they do not compute. NaN in a key that had numbers, and inf anywhere, keep the
    rule's severity, as does a key NaN at fewer first points that then has a number (told
    at that number, dated at its first NaN)."""

    rule = "nonfinite"
    kinds = frozenset({"metrics", "histogram"})
    params_spec = {
        "keys": Param(["*"], "patterns", "metric keys to check"),
        "not_computed": Param(3, "count", "points a key NaN from its first must have to be "
                                          "told as not computed (info)"),
        "severity": Param("critical", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.match = KeyMatcher(self.params["keys"])
        self.seen: set[str] = set()
        self.total = 0
        #: keys that had a number (a NaN in them is a fault)
        self.numbers: set[str] = set()
        #: keys NaN at every point so far: key -> [first step, last step, points]
        self.nan_only: dict[str, list[int]] = {}
        self.told: set[str] = set()  # keys told as not computed
        self.time = 0.0

    def _had_numbers(self, data: Mapping[str, Any]) -> list[str]:
        """Every key of an all-finite event had a number (once per key set); returns
        the keys that were NaN until now."""
        keyset = self.signals.resolve(data)
        if keyset.memo.get(id(self)) is not None:
            return []
        keyset.memo[id(self)] = True
        if len(self.numbers) < 100_000:
            self.numbers.update(k for k in keyset.keys if isinstance(k, str))
        return [k for k in keyset.keys if k in self.nan_only] if self.nan_only else []

    def _revived(self, keys: list[str], step: int, time: float) -> list[Finding]:
        """Keys NaN from their first point that now have a number: a fault after all."""
        if not keys:
            return []
        spans = {k: self.nan_only.pop(k) for k in keys}
        if len(self.seen) < 100_000:
            self.seen.update(keys)
        first = min(s[0] for s in spans.values())
        shown = ", ".join(f"{k} (nan, steps {s[0]}-{s[1]})" for k, s in list(spans.items())[:8])
        more = f" and {len(keys) - 8} more" if len(keys) > 8 else ""
        return [self.finding(first, keys, (
            f"non-finite values from step {first} in {len(keys)} key"
            f"{'s' if len(keys) > 1 else ''}: {shown}{more}, then numbers at step {step}"),
            time=time, evidence=[(k, s[0], "nan") for k, s in list(spans.items())[:8]])]

    def update(self, event: Event) -> Sequence[Finding]:
        bad: dict[str, str] = {}
        if not self.read:
            self.note_read("*")
        quiet: list[str] = []
        revived: list[str] = []
        if isinstance(event, MetricsEvent):
            try:  # one C-level sum: finite when every value is (overflow: look closer)
                if math.isfinite(sum(event.data.values())):
                    return self._revived(self._had_numbers(event.data), event.step,
                                         event.time)
            except (TypeError, OverflowError):
                pass
            for key, value in event.data.items():
                if not isinstance(value, float) or math.isfinite(value):
                    if isinstance(key, str) and len(self.numbers) < 100_000:
                        self.numbers.add(key)
                        if key in self.nan_only:
                            revived.append(key)
                    continue
                if not self.match(key):
                    continue
                if math.isnan(value) and key not in self.numbers and key not in self.seen:
                    if key not in self.told:  # NaN since its first point: not computed?
                        quiet.append(key)
                    continue
                bad[key] = "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"
        elif isinstance(event, HistogramEvent) and (event.nan or event.inf or event.neginf) \
                and self.match(event.key):
            bad[event.key] = f"{event.nan + event.inf + event.neginf} non-finite values"
        found = self._not_computed(quiet, event.step, event.time)
        found += self._revived(revived, event.step, event.time)
        if not bad:
            return found
        self.total += len(bad)
        new = [k for k in bad if k not in self.seen]
        if not new:
            return found
        if len(self.seen) < 100_000:
            self.seen.update(new)
        shown = ", ".join(f"{k} ({bad[k]})" for k in new[:8])
        more = f" and {len(new) - 8} more" if len(new) > 8 else ""
        first = "first " if self.total == len(bad) else ""
        message = (f"{first}non-finite values at step {event.step} in {len(new)} "
                   f"key{'s' if len(new) > 1 else ''}: {shown}{more}")
        proof = [(k, event.step, bad[k]) for k in new[:8]] \
            if isinstance(event, MetricsEvent) else []  # JSON has no NaN: as strings
        return [*found, self.finding(event.step, new, message, time=event.time,
                                     evidence=proof)]

    def _not_computed(self, keys: list[str], step: int, time: float) -> list[Finding]:
        """Count the points of keys NaN since their first; tell those that reached
        ``not_computed`` points, together, as info."""
        due = []
        for key in keys:
            points = self.nan_only.get(key)
            if points is None:
                if len(self.nan_only) >= 100_000:
                    continue
                points = self.nan_only[key] = [step, step, 0]
            points[1], points[2] = step, points[2] + 1
            if points[2] >= self.params["not_computed"]:
                due.append(key)
        self.time = time or self.time
        return self._tell_not_computed(due)

    def _tell_not_computed(self, due: list[str]) -> list[Finding]:
        if not due:
            return []
        spans = {k: self.nan_only.pop(k) for k in due}
        if len(self.told) < 100_000:
            self.told.update(due)  # told once; a number, then NaN, is still a fault
        first = min(s[0] for s in spans.values())
        shown = ", ".join(f"{k} (steps {s[0]}-{s[1]}, {s[2]} point{'s' if s[2] > 1 else ''})"
                          for k, s in list(spans.items())[:8])
        more = f" and {len(due) - 8} more" if len(due) > 8 else ""
        message = (f"not computed: {shown}{more} NaN at every point from the first, no "
                   f"number yet (a term the trainer does not compute, or not before its "
                   f"first update; if it should, it is broken from the start; NaN after a "
                   f"number is told as a fault)")
        return [self.finding(first, due, message, time=self.time, severity="info",
                             evidence=[(k, s[0], "nan") for k, s in
                                       list(spans.items())[:8]])]

    def tick(self, now: float, alive: bool) -> Sequence[Finding]:
        """A run that ended: keys NaN at every point it logged are not computed."""
        if alive or not self.nan_only:
            return ()
        return self._tell_not_computed(list(self.nan_only))


#: the ``sigmas`` of a rule without its own: its sudden changes (stats.sudden) must be
#: this many sigmas of the curve's noise past their level
SUDDEN_SIGMAS = 4.0


def windows(s: Series, params: Mapping[str, Any], gap: int = 0) -> tuple[int, int, int]:
    """(recent points, gap points, level points): ``recent``, ``gap`` and ``window`` are
    steps, each covered by at least ``min_recent`` / ``min_points`` points (worked out
    once per new point of the series)."""
    count, memo_key, memo = s.memo
    if count == s.count and memo_key is params and isinstance(memo, tuple):
        return memo
    out = _windows(s, params, gap)
    s.memo = (s.count, params, out)
    return out


def _windows(s: Series, params: Mapping[str, Any], gap: int) -> tuple[int, int, int]:
    recent_n = s.points(int(params["recent"]), int(params.get("min_recent", 3)))
    gap_n = s.points(gap, 0, recent_n) if gap else 0
    window_n = s.points(int(params["window"]), int(params.get("min_points", 5)),
                        recent_n + gap_n)
    return recent_n, gap_n, window_n


def enough(s: Series, params: Mapping[str, Any], gap: int = 0) -> bool:
    """The series has its recent points, its gap and a full level window before them."""
    recent_n, gap_n, window_n = windows(s, params, gap)
    return len(s.values) >= recent_n + gap_n + window_n


WINDOW_PARAMS = {
    "min_points": Param(5, "count", "least points in the level's window (sparse logs)"),
    "min_recent": Param(3, "count", "least points in the recent median (sparse logs)"),
}


class RewardCollapse(SeriesRule):
    """A reward falls well below its recent level (the highest rolling median of the last
    ``lookback`` checks) and stays there: the fall is at least ``drop`` of the reward
    gained since the start (or of the level's size), and ``sigmas`` standard deviations of
    such a change under the curve's own noise (stats.Noise: robust, serial correlation
    taken into account; the level's own luck as the highest of many windows added)."""

    rule = "reward_collapse"
    keep_first = 20
    noise_points = 160
    params_spec = {
        "keys": Param(["@reward"], "patterns", "the total reward (dialects.py), or patterns"),
        "window": Param(20, "count", "steps in the rolling level"),
        "recent": Param(5, "count", "steps in the recent median"),
        **WINDOW_PARAMS,
        "lookback": Param(100, "count", "how many checks back the level's peak is looked for"),
        "drop": Param(0.5, "fraction", "share of the gain (or level) that must be lost"),
        "sigmas": Param(4.0, "positive", "the fall in standard deviations of a change between "
                        "the two windows under the curve's own noise"),
        "persist": Param(3, "count", "checks in a row before it counts"),
        "severity": Param("critical", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.levels: dict[str, SlidingBest] = {}

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        if not enough(s, self.params):
            return None
        recent_n, _, window_n = windows(s, self.params)
        before = s.before_tail(recent_n, window_n)
        steps = s.steps
        levels = self.levels.get(key)
        if levels is None:
            levels = self.levels[key] = SlidingBest(self.params["lookback"])
        levels.add((median(before), robust_sigma(before), steps[-recent_n - window_n],
                    steps[-recent_n - 1]))
        ref, sigma, first, last = levels.best()
        recent = median(s.tail(recent_n))
        early = median(s.first)
        scale = max(ref - early, abs(ref), 1e-12)
        fall = ref - recent
        noise = self.noise(key, recent_n)
        spread = self.params["sigmas"] * sigma if noise is None else \
            self.params["sigmas"] * noise.shift(recent_n, window_n) + \
            ANCHORED * noise.of_median(window_n)
        bad = fall >= self.params["drop"] * scale and fall >= spread
        strong = bad and noise is not None and fall >= STRONG * spread
        line = ref - max(self.params["drop"] * scale, spread)
        # sudden: the drop's share alone as the line, the noise judged by stats.sudden
        # (STRONG times its sigmas, in the points' own spread where the AR(1) model reads
        # a learning curve's bend as a strong correlation and its line falls out of reach)
        if not strong and self.sudden(key, s, ref, ref - self.params["drop"] * scale, -1,
                                      STRONG * self.params["sigmas"]):
            bad = strong = True  # the last points far below: told now
        if not self.latch(key).check(bad, first_past(s, recent_n, lambda v: v <= line),
                                     strong):
            return None
        onset = self.latch(key).onset
        pct = f"{ratio(fall, abs(ref)):.0%}" if abs(ref) > 1e-9 else fmt(fall)
        where, proof = at(s, key, onset)
        return self.finding(onset, [key], f"{key} fell {pct} from its level of {fmt(ref)} "
                            f"({span([first, last])}) to {where} (recent median "
                            f"{fmt(recent)})", evidence=[proof])


class RewardFrozen(SeriesRule):
    """The reward stops moving: the last ``window`` steps (at least ``min_points`` points)
    stay within ``spread`` of their level, end to end, and, once the run has ``history``
    earlier windows, within ``shrink`` of their usual range. The mean reward of a batch of
    other prompts moves from batch to batch, by sampling alone; a mean that does not means
    every rollout scores the same whatever the prompt (a policy collapsed to one answer, a
    reward model that saturated, or a task all solved or all failed), and the updates
    carry no signal. The second test keeps a reward model's score with a large offset, whose
    batch means move little against their level, quiet once its usual movement is known;
    with that history its step-to-step moves must also have shrunk to ``shrink`` of the
    curve's own (stats.Noise, read before the window): a slowly wandering reward (strong
    serial correlation) spans little in a window without standing still. Dated from the
    first step of the first window that stood still.

    A reward that has not moved from its first value since the run's first point has
    not stopped: it never started (every rollout of a sparse task failing, "it may take a
    few steps before we sample rollouts with non-zero rewards", Stanford CS336's GRPO
    assignment). Nor has one whose only departures from it are isolated blips of a few
    rollouts' success (slow_start.py: a start that has not taken hold yet). Its finding
    is held until that start has lasted ``flat_start`` points, or the run ends on it, and
    dropped if the reward moves first."""

    rule = "reward_frozen"
    noise_points = 160
    params_spec = {
        "keys": Param(["@reward"], "patterns", "the total reward (dialects.py), or patterns"),
        "window": Param(10, "count", "steps the reward is judged over"),
        "min_points": Param(10, "count", "least points judged (sparse logs)"),
        "spread": Param(0.02, "fraction", "the window's range (max - min) as a share of its "
                        "level; a reward at 0 must not move at all"),
        "history": Param(10, "count", "earlier windows before their usual range is used"),
        "shrink": Param(0.25, "fraction", "the window's range as a share of the median "
                        "range of the earlier windows (with enough history)"),
        "quick": Param(7, "count", "the most points that, once the curve's noise is "
                       "known, are enough on their own when every move among them is "
                       "within ``still`` of the usual one (as few as 5 where that many "
                       "such moves in a row are rare on the curve's history)"),
        "still": Param(0.05, "fraction", "a move this share of the curve's usual move "
                       "(stats.Noise) is standing still"),
        "persist": Param(3, "count", "windows in a row"),
        "flat_start": Param(50, "count", "points a reward may stay at its first value from "
                            "the run's first point (isolated blips of a few rollouts' "
                            "success included) before it is raised while the run goes "
                            "on (at the run's end it is raised all the same)"),
        "blip_chance": Param(0.001, "fraction", "a departure from a reward's start less "
                             "likely than this for a start's chance successes (a Poisson "
                             "count from its share of points at the first value) is a "
                             "move"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        #: per key: (last step, range) of the windows judged, the last 100
        self.ranges: dict[str, deque[tuple[int, float]]] = {}
        #: per key: its start (slow_start.py) and the finding held while it holds
        self.start: dict[str, SlowStart] = {}
        self.held: dict[str, Finding] = {}

    def _unmoved(self, key: str, value: float) -> bool:
        """Whether ``key`` is still at its start: its first value since the run's first
        point, but for isolated blips of a few rollouts' success."""
        start = self.start.get(key)
        if start is None:
            self.start[key] = SlowStart(value, self.params["blip_chance"])
            return True
        return start.add(value)

    def _release(self, key: str, found: Finding | None, unmoved: bool) -> Finding | None:
        """``found`` (or the finding held for ``key``) once a reward that never moved has
        lasted ``flat_start`` points; held until then, dropped if the reward moves."""
        if not unmoved:
            if self.held.pop(key, None) is not None:
                self.latches.pop((key, ""), None)  # a later freeze is a new episode
            return found
        if found is not None:
            self.held[key] = found
        if self.start[key].points >= self.params["flat_start"] and key in self.held:
            return self.held.pop(key)
        return None

    def tick(self, now: float, alive: bool) -> Sequence[Finding]:
        """The run ended on a reward that never moved from its start: told now."""
        if alive or not self.held:
            return ()
        out, self.held = list(self.held.values()), {}
        for found in out:
            found.time = found.time or now
        return out

    def size(self) -> int:  # the first window's first point is still here when it fires
        return (max(int(self.params["window"]), int(self.params["min_points"]))
                + int(self.params["persist"]) + 1)

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        unmoved = self._unmoved(key, s.values[-1])
        return self._release(key, self._check(key, s, step), unmoved)

    def _check(self, key: str, s: Series, step: int) -> Finding | None:
        n = s.points(int(self.params["window"]), int(self.params["min_points"]))
        if len(s.values) < n:
            return None
        values = s.tail(n)
        level, low, high = median(values), min(values), max(values)
        first = s.steps[len(s.steps) - n]
        ranges = self.ranges.get(key)
        if ranges is None:
            ranges = self.ranges[key] = deque(maxlen=100)
        earlier = [r for end, r in ranges if end < first]  # windows this one does not share
        ranges.append((step, high - low))
        frozen = high - low <= self.params["spread"] * abs(level) and (
            len(earlier) < self.params["history"]
            or high - low <= self.params["shrink"] * median(earlier))
        noise = self.noise(key, n)
        usual = 0.0 if noise is None else noise.move
        still = False
        if usual > 0:  # its moves from one point to the next, against the usual ones
            # every move of the window, not their spread: under the curve's own noise
            # (i.i.d. or AR(1) alike) all 9 moves of 10 points within a quarter of the
            # usual move happen about (0.2)^9 = 5e-7 of the time
            moves = [abs(b - a) for a, b in itertools.pairwise(values)]
            frozen = frozen and max(moves) <= self.params["shrink"] * usual
            # the last few points standing still (every move within ``still`` of the
            # usual one) say it on their own, as few as the curve's own history makes
            # conclusive: 5 points whose 4 moves are smaller than any of 70 or more
            # earlier ones, up to ``quick`` where still moves were common
            quick = _quick_still(noise, n, values, moves, self.params["still"] * usual,
                                 self.params["spread"], int(self.params["quick"]))
            still = quick > 0
            if still and not frozen:
                first = s.steps[len(s.steps) - quick]
        if not self.latch(key).check(frozen or still, first, strong=still):
            return None
        onset = self.latch(key).onset
        where, proof = at(s, key, onset)
        last_where, last = at(s, key, step)
        moved = (f"a range of {ratio(high - low, abs(level)):.1%} of its level {fmt(level)}"
                 if level else "not moving at all")
        return self.finding(onset, [key], (
            f"{key} stopped moving: {where}, {last_where}, between {fmt(low)} and "
            f"{fmt(high)} in every window of {self.params['window']} steps since ({moved}): "
            f"every rollout scores about the same whatever the prompt, so "
            f"the updates carry no signal; the policy collapsed to one answer, the reward "
            f"model saturated, or the task is all solved or all failed"),
            evidence=[e for e in (proof, last) if e is not None])


#: reward_frozen's quick test is conclusive only where ``quick - 1`` still moves in a row
#: are at most this likely on the curve's own history: a reward of a few rollouts takes few
#: values (multiples of 1/8) and repeats its ceiling or floor by chance, so its stillness is
#: weighed by how often it stood still before, not by a continuous noise's odds
QUICK_CHANCE = 1e-6


def _quick_still(noise: Noise | None, skip: int, values: list[float], moves: list[float],
                 still: float, spread: float, most: int) -> int:
    """The fewest last points (5 to ``most``) that stand still conclusively: every move
    among them within ``still`` and within the largest of them, their range within
    ``spread`` of their level, and that many such moves in a row rare on the curve's own
    history (:func:`_rarely_still`); 0 if none. A sequential reading of the stillness: a
    reward that stopped dead is told on its first few points, one that only slowed waits
    for more."""
    if noise is None:
        return 0
    for k in range(5, most + 1):  # 4 would need 182 earlier moves, more than kept
        if len(moves) < k - 1:
            return 0
        within = max(moves[-(k - 1):])
        latest = values[-k:]
        if within > still or max(latest) - min(latest) > spread * abs(median(latest)):
            return 0  # a longer stretch holds these points too: it fails as well
        if _rarely_still(noise, skip, within, k - 1):
            return k
    return 0


def _rarely_still(noise: Noise, skip: int, within: float, moves: int) -> bool:
    """Whether ``moves`` moves in a row within ``within`` are rare on the points before the
    last ``skip``: the share of such moves there (one added, so a short or spotless history
    is not read as never), to the power ``moves``, times ``moves!``, at most
    ``QUICK_CHANCE``. The factorial: ``within`` is the largest of the moves judged, so
    the chance that ``moves`` exchangeable moves all fall below the smallest of n earlier
    ones is moves! n! / (n + moves)!, about moves! / n^moves (without it a reward of
    heavy-tailed noise stood still on 4 points in 0.5% of 1,000 healthy runs)."""
    values = list(noise.values)[:-skip] if skip else list(noise.values)
    if len(values) < 2:
        return True
    still = sum(abs(b - a) <= within for a, b in itertools.pairwise(values))
    share = (still + 1) / len(values)
    return bool(math.factorial(moves) * share ** moves <= QUICK_CHANCE)


class KlBlowup(RewardFollower):
    """A KL rises ``ratio`` times above its level (the median of the ``window`` steps that
    end ``gap`` steps before the recent ones; at least ``floor``) and ``sigmas`` times its
    noise, and the median of its recent and gap steps is at least ``min_kl``; or past
    the absolute ``bound`` (critical); or is already past ``early_bound`` in the run's
    first ``early_points`` points: a policy starts at its reference, so its KL starts near
    0, and one that is large at once means a wrong reference or a broken first update. A
    policy that learns moves away from its reference: a per-token KL that grows from 0 to
    a few hundredths is that, not a runaway, however many times its first level
    (``min_kl``). The gap compares a KL that runs away over a few tens of steps with where
    it was before it started to climb. A finding is dated where the climb began (the knee
    of the log-KL's course over the last ``history`` points) and quotes the level of the
    ``window`` steps before it.

    Two KLs, two floors: ``min_kl`` for the KL to the reference (verl's target 0.1), and
    ``min_ppo_kl`` for a PPO old/new-policy KL (keys ``ppo_keys`` match: ``actor/ppo_kl``,
    ``approx_kl``), whose published targets are 0.003-0.03, so a jump from 0.02 to 0.12 is
    a runaway. A KL that climbs while the reward (``reward_keys``) keeps improving, by
    ``learning`` of its level and a rising trend over the climb, is a policy learning: the
    finding is ``info``. Every finding grows (doctor/episodes.py): it becomes critical past
    ``critical`` times the key's floor."""

    rule = "kl_blowup"
    keep_first = 5
    noise_points = 160
    params_spec = {
        "keys": Param(["@kl"], "patterns", "the policy KL (dialects.py), or patterns"),
        "window": Param(20, "count", "steps in the level"),
        "recent": Param(3, "count", "steps in the recent median"),
        **WINDOW_PARAMS,
        "gap": Param(10, "count", "steps between the level's window and the recent ones"),
        "ratio": Param(3.0, "positive", "how many times above its level"),
        "floor": Param(0.01, "positive", "levels below this count as this (tiny KLs)"),
        "min_kl": Param(0.1, "positive", "least KL of a runaway, as the median of the "
                        "recent and the gap's steps: healthy per-token KLs reach a few "
                        "hundredths (verl steers to target_kl 0.1)"),
        "ppo_keys": Param(["*ppo_kl*", "*approx_kl*", "*approxkl*"], "patterns",
                          "keys that are a PPO old/new-policy KL, judged by min_ppo_kl"),
        "min_ppo_kl": Param(0.05, "positive", "min_kl of a PPO old/new-policy KL: the PPO "
                            "paper's adaptive targets are 0.003-0.03, TF-Agents' and "
                            "TorchRL's 0.01"),
        "critical": Param(10.0, "positive", "a finding is critical once its KL passes "
                          "this many times its floor (min_kl 0.1: 1.0; min_ppo_kl: 0.5)"),
        "reward_keys": Param(["@reward"], "patterns", "the reward judged still improving"),
        "learning": Param(0.1, "fraction", "a reward that rose this share of its level "
                          "(and 3 of its noise) over the climb, and still rises: learning"),
        "sigmas": Param(4.0, "positive"),
        "bound": Param(None, "bound", "an absolute KL that is always critical (None: off)"),
        "early_points": Param(5, "count", "the run's first points judged against "
                              "early_bound"),
        "early_bound": Param(0.3, "positive", "a KL already this large in the first points"),
        "history": Param(150, "count", "points kept before the level's window, where the "
                         "start of the climb is looked for"),
        "persist": Param(3, "count"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.ppo = KeyMatcher(self.params["ppo_keys"])

    def size(self) -> int:
        return super().size() + int(self.params["history"])

    def reward_points(self) -> int:
        return self.size()  # the reward over the KL's whole look-back, no more

    def _floor(self, key: str) -> float:
        return float(self.params["min_ppo_kl" if self.ppo(key) else "min_kl"])

    def _learning(self, onset: int, start: int | None = None) -> str:
        """How the reward kept improving since ``onset`` ("": it did not;
        rules/learning.py)."""
        return reward_improving(self.rewards, onset, start, int(self.params["window"]),
                                self.params["learning"])

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        found = self._check(key, s, step)
        if found is not None:  # followed while it lasts; critical past its line
            line = self.params["critical"] * self._floor(key)
            found.grows(1, found.level, None if found.severity == "critical" else line)
        return found

    def _check(self, key: str, s: Series, step: int) -> Finding | None:
        early_n = self.params["early_points"]
        if s.count <= early_n and s.values[-1] >= self.params["early_bound"] and \
                self._per_token(key) and not self.latch(key, "early").active:
            self.latch(key, "early").active = True  # once
            line = self.params["early_bound"]
            where, proof = at(s, key, step)
            return self.finding(step, [key], (
                f"{key} is already {where}, one of the run's first {early_n} points, "
                f"past {fmt(line)}: a policy starts at its reference, so its per-token KL "
                f"starts near 0, and one this large at once points to a wrong reference "
                f"model or a broken first update"), severity="critical", evidence=[proof])
        steps = s.steps
        recent_n = s.points(int(self.params["recent"]), int(self.params["min_recent"]))
        recent = median(s.tail(recent_n))
        bound = self.params["bound"]
        if bound is not None and self.latch(key, "bound").check(recent > bound,
                                                               steps[-min(recent_n, len(steps))]):
            onset = self.latch(key, "bound").onset
            where, proof = at(s, key, onset)
            return self.finding(onset, [key], f"{key} passed its bound {fmt(bound)}: "
                                f"{where} (recent median {fmt(recent)})", severity="critical",
                                evidence=[proof])
        gap = self.params["gap"]
        if not enough(s, self.params, gap):
            return None
        recent_n, gap_n, window_n = windows(s, self.params, gap)
        before = s.before_tail(recent_n + gap_n, window_n)
        level = median(before)
        base = max(level, self.params["floor"])
        noise = self.params["sigmas"] * robust_sigma(before)
        min_kl = self._floor(key)
        bad = recent >= self.params["ratio"] * base and recent - level >= noise and \
            recent >= min_kl and median(s.tail(recent_n + gap_n)) >= min_kl  # held there
        line = max(self.params["ratio"] * base, level + noise, min_kl)
        strong = bad and recent - level >= STRONG * noise and min(s.tail(recent_n)) >= line
        if not strong and self.sudden(key, s, level, line, 1,
                                      self.params["sigmas"]):
            bad = strong = True  # the last points far above: told now (stats.sudden)
        if not self.latch(key).check(bad, first_past(s, recent_n, lambda v: v >= line),
                                     strong):
            return None
        # a run that started at its reference (a KL below floor) moves away from it in its
        # first window steps: that first climb is the policy learning, not the course a
        # runaway left, so the course is fitted from after it
        pairs = list(zip(steps, s.values, strict=True))
        begin = 0
        if s.first and s.first[0] < self.params["floor"] and pairs[0][0] == s.steps[0] \
                and s.count == len(pairs):
            begin = next((i for i, (st, _) in enumerate(pairs)
                          if st >= pairs[0][0] + self.params["window"]), 0)
        knee = min(climb_start([st for st, _ in pairs[begin:]], [v for _, v in pairs[begin:]],
                               self.params["floor"] / 10), self.latch(key).onset)
        level_steps, level_values = level_before(s, knee, int(self.params["window"]),
                                                 window_n)
        onset = knee
        if level_values:  # anchored before the climb, which is dated at its first point
            level = median(level_values)  # past that level's noise
            base = max(level, self.params["floor"])
            top = level + self.params["sigmas"] * robust_sigma(level_values)
            onset = next((st for st, v in zip(steps, s.values, strict=True)
                          if st >= knee and v > top), knee)
            onset = min(onset, self.latch(key).onset)
        where, proof = at(s, key, onset)
        message = (f"{key} rose {ratio(recent, base):.1f}x above its level of {fmt(level)} "
                   f"({span(level_steps)}), to a recent median of {fmt(recent)}, climbing "
                   f"since {where}")
        learning = self._learning(
            onset, steps[max(0, len(steps) - (recent_n + gap_n + window_n))])
        if learning:
            message += (f", while the reward kept improving ({learning}): a policy that "
                        f"learns moves away from its reference (info; critical past "
                        f"{fmt(self.params['critical'] * min_kl)})")
        found = self.finding(onset, [key], message, evidence=[proof],
                             severity="info" if learning else None)
        found.level = level
        return found

    def _per_token(self, key: str) -> bool:
        """A key a dialect names as the KL (a per-token KL: the first-points bound is
        about that scale; a generic ``*/kl`` may be summed over a sequence)."""
        dialects = self.signals.fed.get("kl", {}).get(key)
        return dialects is not None and dialects != "generic"


def level_before(s: Series, onset: int, window: int, least: int
                 ) -> tuple[list[int], list[float]]:
    """The points of the ``window`` steps before ``onset`` (at least ``least`` points, as
    many as there are): the level a climb that began at ``onset`` is measured from."""
    pairs = [(st, v) for st, v in zip(s.steps, s.values, strict=True) if st < onset]
    inside = [p for p in pairs if p[0] >= onset - window]
    chosen = inside if len(inside) >= least else pairs[-least:]
    return [st for st, _ in chosen], [v for _, v in chosen]


def climb_start(steps: list[int], values: list[float], eps: float) -> int:
    """The first step of a climb: the knee of a continuous two-piece line fitted to the
    log of the values (least squares; the second piece steeper), so a KL that crept up
    slowly and then began to grow faster, or sat flat and then took off, is dated where
    its growth changed, not where it was confirmed. The last step if none fits."""
    n = len(values)
    if n < 6:
        return steps[-1]
    ys = [math.log(max(v, eps)) for v in values]
    x0 = steps[0]
    xs = [float(st - x0) for st in steps]
    best, knee = math.inf, n - 1
    for k in range(2, n - 3):  # the knee at point k: the pieces meet at xs[k]
        c = xs[k]
        hs = [x - c if x > c else 0.0 for x in xs]
        fit = _fit3(xs, hs, ys)
        if fit is None:
            continue
        sse, slope_change = fit
        if slope_change > 0 and sse < best:
            best, knee = sse, k
    return steps[min(knee + 1, n - 1)]


def _fit3(xs: list[float], hs: list[float], ys: list[float]) -> tuple[float, float] | None:
    """Least squares of ``y = a + b x + d h``: (the residual sum of squares, d)."""
    n = float(len(xs))
    sx, sh, sy = sum(xs), sum(hs), sum(ys)
    sxx = sum(x * x for x in xs)
    shh = sum(h * h for h in hs)
    sxh = sum(x * h for x, h in zip(xs, hs, strict=True))
    sxy = sum(x * y for x, y in zip(xs, ys, strict=True))
    shy = sum(h * y for h, y in zip(hs, ys, strict=True))
    m = [[n, sx, sh], [sx, sxx, sxh], [sh, sxh, shh]]
    r = [sy, sxy, shy]
    det = _det3(m)
    if not math.isfinite(det) or abs(det) < 1e-12 * max(1.0, abs(sxx * shh * n)):
        return None
    coef = []
    for i in range(3):
        mi = [row[:] for row in m]
        for j in range(3):
            mi[j][i] = r[j]
        coef.append(_det3(mi) / det)
    a, b, d = coef
    sse = sum((y - a - b * x - d * h) ** 2 for x, h, y in zip(xs, hs, ys, strict=True))
    return sse, d


def _det3(m: list[list[float]]) -> float:
    return (m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]))


class EntropyCollapse(LevelFall, RewardFollower):
    """Policy entropy falls to ``fraction`` of its early level (the median of the run's
    first ``early`` points) and stays there; the finding grows (doctor/episodes.py) and is
    critical below ``critical`` of the early level. Its other direction, a rise far above
    the early level, is ``entropy_explosion`` (rules/entropy.py).

    Entropy is what a policy spends to buy reward (Cui et al. 2025, R ~ -a exp(H) + b): a
    fall over which the reward (``reward_keys``) rose ``learning_sigmas`` of its own noise
    and ``learning`` of its level (rules/learning.py, ``reward_bought``) is the policy
    sharpening as it learns, told as ``info``. The fault is exploration that died with
    nothing bought, or whose gain did not last: while the entropy stays past the line, a
    reward that gives back ``give_back`` of its gain (from the best it reached since) is
    then told at the rule's severity. No reward read: every fall is the rule's
    severity."""

    rule = "entropy_collapse"
    noise_points = 160
    params_spec = {
        "keys": Param(["@entropy"], "patterns", "policy entropy (dialects.py), or patterns"),
        "early": Param(10, "count", "points of the early level"),
        "recent": Param(5, "count", "steps in the recent median"),
        "min_recent": Param(3, "count", "least points in the recent median (sparse logs)"),
        "fraction": Param(0.1, "fraction", "collapse below this share of the early level"),
        "critical": Param(0.01, "fraction", "critical below this share of the early level"),
        "reward_keys": Param(["@reward"], "patterns", "the reward the entropy was spent on"),
        "window": Param(20, "count", "steps of the reward's level before the fall"),
        "learning": Param(0.1, "fraction", "a fall over which the reward rose this share "
                          "of its level (and learning_sigmas of its noise): info"),
        "learning_sigmas": Param(5.0, "positive", "the reward's gain over the fall, in its "
                                 "own noise, that makes it learning"),
        "give_back": Param(0.5, "fraction", "after such a fall, a reward that lost this "
                           "share of its gain while the entropy stays down: the fault"),
        "persist": Param(3, "count"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        #: key -> (the reward before the fall, the best it reached since, its noise) of a
        #: fall told as learning, while it lasts
        self.sharpened: dict[str, tuple[float, float, float]] = {}
        #: key -> the last step the entropy was above the middle of its fall (_follow)
        self.fall_start: dict[str, int] = {}

    def size(self) -> int:
        return int(self.params["recent"]) + 30

    def _follow(self, key: str, step: int, value: float, level: float, line: float) -> None:
        """Where the fall began: the last step the entropy was at or above the geometric
        middle of its level and its line (kept per key as the points come, in O(1): a fall
        found late, after the entropy hovered at the line, is still read from where it
        began)."""
        if value >= math.sqrt(level * line):
            self.fall_start[key] = step

    def told(self, key: str, s: Series, fall: Fall, found: Finding) -> Finding:
        self.sharpened.pop(key, None)
        if not self.rewards:
            return found
        start = min(self.fall_start.get(key, s.steps[0]), self.latch(key).onset)
        bought = reward_bought(self.rewards, start,
                               int(self.params["window"]), self.params["learning_sigmas"],
                               self.params["learning"])
        if bought is None:
            return found
        self.sharpened[key] = bought
        then, now, _ = bought
        found.severity = "info"
        found.message += (f", while the reward rose from {fmt(then)} before the fall to "
                          f"{fmt(now)}: the policy sharpened as it learned (info; a warning "
                          f"if the reward gives back {self.params['give_back']:.0%} of its "
                          f"gain while the entropy stays down)")
        return found

    def after(self, key: str, s: Series, fall: Fall, step: int) -> Finding | None:
        bought = self.sharpened.get(key)
        if bought is None:
            return None
        then, best, noise = bought
        recent = self.rewards.tail(5)
        if len(recent) < 3:
            return None
        now = median(recent)
        best = max(best, now)
        self.sharpened[key] = (then, best, noise)
        line = best - self.params["give_back"] * (best - then)
        latch = self.latch(key, "gave_back")
        if not latch.check(fall.bad and now <= line, self.rewards.steps[-1]):
            return None
        del self.sharpened[key]  # told once per fall
        where, proof = at(s, key, latch.onset)
        found = self.finding(latch.onset, [key], (
            f"{key} stays collapsed (a recent median of {fmt(fall.recent)}, "
            f"{ratio(fall.recent, fall.level):.0%} of its {fall.said()}, {where}) and the "
            f"reward it bought gave its gain back: {fmt(then)} before the fall, {fmt(best)} "
            f"at best, {fmt(now)} now: exploration is gone and the policy stopped "
            f"learning{self.meaning}"), evidence=[proof])
        return found.grows(-1, fall.level, fall.critical)

    def judge(self, key: str, s: Series, step: int) -> Fall | None:
        if s.count < self.params["early"] + 1:
            return None
        early = median(s.first)
        recent_n = s.points(int(self.params["recent"]), int(self.params["min_recent"]))
        recent = median(s.tail(recent_n))
        line = self.params["fraction"] * early
        if early > 0:
            self._follow(key, s.steps[-1], s.values[-1], early, line)
        bad = early > 0 and recent <= line
        # every point of the recent window past the line: it held, point after point
        strong = bad and max(s.tail(recent_n)) <= line
        if early > 0 and not strong and s.values[-1] <= line and self.sudden(
                key, s, median(s.before_tail(SUDDEN_POINTS, 10)), line, -1,
                SUDDEN_SIGMAS):  # (the level read only once the last point is past)
            bad = strong = True  # the last points far below: told now (stats.sudden)
        return Fall(early, recent, recent_n, line, bad, strong, self.params["critical"] * early)


class GradExplosion(RewardFollower):
    """A gradient norm stays ``ratio`` times above its recent median (the ``window`` steps
    before each point), or vanishes below ``vanish`` of its early level.

    An explosion is a level that stays up, not a point: the norm must be past the line
    ``persist`` points in a row, and longer than the longest such stretch the run already
    came back from by itself (its own spike history, read from its ``min_points``-th point
    on), so a run whose norm jumps a thousandfold on single steps and returns is not
    called exploding at every jump. A stretch while the reward (``reward_keys``) keeps
    improving (rules/learning.py), or holds (the median of its 3 or more points since the
    onset at least that of the ``window`` steps before), is told as ``info``: a first
    explosion is told after ``persist`` points, before the reward has 3 to show."""

    rule = "grad_explosion"
    keep_first = 20
    params_spec = {
        "keys": Param(["@grad_norm"], "patterns", "gradient norms (dialects.py), or patterns"),
        "window": Param(20, "count", "steps in the median a spike is measured from"),
        "min_points": Param(5, "count", "least points in that median (sparse logs)"),
        "recent": Param(5, "count", "points in the median compared for vanishing"),
        "ratio": Param(10.0, "positive"),
        "floor": Param(0.1, "fraction", "a spike is measured from at least this share of "
                       "the early level (a norm that shrank is not exploding)"),
        "vanish": Param(0.001, "fraction"),
        "reward_keys": Param(["@reward"], "patterns", "the reward judged still improving"),
        "learning": Param(0.1, "fraction", "a reward that rose this share of its level (and "
                          "3 of its noise) over the stretch: info"),
        "persist": Param(2, "count", "least points in a row past the line"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        #: key -> the longest stretch of spikes the norm came back from
        self.recovered: dict[str, int] = {}

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        if s.count <= self.params["min_points"]:
            return None
        window_n = s.points(int(self.params["window"]), int(self.params["min_points"]), 1)
        warm = len(s.values) <= window_n  # the run's first window: history only
        before = s.before_tail(1, min(window_n, len(s.values) - 1))
        early = median(s.first)
        level = max(median(before), self.params["floor"] * early)
        value = s.values[-1]
        if level > 0:
            spike = value >= self.params["ratio"] * level
            latch = self.latch(key)
            if not spike and latch.bad:  # a stretch the norm came back from
                self.recovered[key] = max(self.recovered.get(key, 0), latch.bad)
            latch.persist = max(int(self.params["persist"]), self.recovered.get(key, 0) + 1)
            if warm:
                latch.bad = latch.bad + 1 if spike else 0
            elif latch.check(spike, step):
                return self._spiked(key, s, level, window_n)
        if warm:
            return None
        recent = median(s.tail(self.params["recent"]))
        gone = early > 0 and recent <= self.params["vanish"] * early
        vanish = self.latch(key, "vanish")
        if vanish.check(gone, step):
            where, proof = at(s, key, vanish.onset)
            return self.finding(vanish.onset, [key], f"{key} vanished to {where}, "
                                f"{ratio(recent, early):.1e} of its early level {fmt(early)} "
                                f"(recent median {fmt(recent)})", evidence=[proof])
        return None

    def _spiked(self, key: str, s: Series, level: float, window_n: int) -> Finding:
        latch = self.latch(key)
        where, proof = at(s, key, latch.onset)
        shown = s.value_at(latch.onset) or s.values[-1]
        steps = list(s.steps)
        message = (f"{key} spiked to {where}, {ratio(shown, level):.0f}x its median of "
                   f"{fmt(level)} over {span(steps[-window_n - 1:-1])}, and stayed past "
                   f"{fmt(self.params['ratio'])}x for {latch.bad} points")
        if self.recovered.get(key):
            message += (f", longer than the {self.recovered[key]} the run came back from "
                        f"before")
        learning = reward_improving(self.rewards, latch.onset,
                                    steps[max(0, len(steps) - 1 - window_n)],
                                    int(self.params["window"]), self.params["learning"])
        held = "" if learning else reward_held(self.rewards, latch.onset,
                                                     int(self.params["window"]))
        if learning:
            message += (f", while the reward kept improving ({learning}): large steps of a "
                        f"policy that still learns")
        elif held:
            message += (f", while the reward held ({held}): a stretch the policy came "
                        f"through")
        return self.finding(latch.onset, [key], message, evidence=[proof],
                            severity="info" if learning or held else None)


class LengthBlowup(SeriesRule):
    """Response length runs away (``grow`` times its level), or the truncated share
    (``clip_keys``) climbs past ``clip_bound`` and ``clip_rise`` above its level (a length
    that collapses is ``length_collapse``'s: rules/length_collapse.py). The level is
    anchored: the lowest rolling median of the last ``lookback`` checks and ``within``
    steps, so a length that creeps up over hundreds of steps is measured from where it
    started, not from the drift's own last stretch. A truncation rise while the reward
    stays flat is said so (the policy spends its budget without gaining).

    Pinned at its cap: the length's recent median at ``pinned`` of the cap (``cap``, or
    the run's config: rules/length_cap.py), or a truncated share at ``pinned_clip``,
    whatever the level was (a run that starts at the cap never runs away to it). Findings
    grow (doctor/episodes.py): a runaway becomes critical at the cap, a truncation rise at
    ``pinned_clip``. A runaway while the reward keeps improving (by ``learning``:
    rules/learning.py) is a policy learning to answer at length, ``info``; pinned at its
    cap it is told all the same."""

    rule = "length_blowup"
    kinds = frozenset({"metrics", "config"})
    noise_points = 160
    params_spec = {
        "keys": Param(["@response_length"], "patterns", "mean response length "
                      "(dialects.py), or patterns"),
        "clip_keys": Param(["@truncation"], "patterns", "the share of truncated responses"),
        "reward_keys": Param(["@reward"], "patterns", "the reward judged flat or not"),
        "window": Param(20, "count", "steps in the rolling level"),
        "recent": Param(5, "count", "steps in the recent median"),
        **WINDOW_PARAMS,
        "lookback": Param(300, "count", "checks back the anchored level is looked for"),
        "within": Param(1000, "count", "... and steps back, at most: a length that grows "
                        "2.5x over more steps is a reasoning run learning to answer at length "
                        "(DeepSeek-R1-Zero, DAPO: up to 1.3-2x per 1,000 steps), not a "
                        "runaway"),
        "grow": Param(2.5, "positive"),
        "sigmas": Param(4.0, "positive"),
        "clip_bound": Param(0.2, "fraction"),
        "clip_rise": Param(0.1, "fraction"),
        "flat": Param(0.1, "fraction", "a reward that moved less than this share of its "
                      "level counts as flat"),
        "learning": Param(0.1, "fraction", "a length that grew while the reward rose this "
                          "share of its level (and 3 of its noise) is a policy learning to "
                          "answer at length: info (rules/learning.py)"),
        "cap": Param(None, "bound", "the response length cap in tokens (None: from the "
                     "run's config: data.max_response_length, max_completion_length ...)"),
        "pinned": Param(0.95, "fraction", "a length at this share of its cap is pinned"),
        "pinned_clip": Param(0.9, "fraction", "a truncated share this high is pinned"),
        "persist": Param(3, "count"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.config_cap: tuple[str, int] | None = None
        #: (key, "grow" or "clip") of the rises found: their findings say the cap
        self.rose_before: set[tuple[str, str]] = set()
        self.clip = KeyMatcher(self.params["clip_keys"])
        self.reward = KeyMatcher(self.params["reward_keys"])
        self.levels: dict[str, SlidingBest] = {}  # the lowest rolling level
        self.rewards: dict[str, Series] = {}
        self._clip_now: frozenset[str] = frozenset()

    def selected(self, data: Mapping[str, Any]) -> list[str]:
        keyset = self.signals.resolve(data)
        memo = keyset.memo.get(id(self))
        if memo is None:  # (every key, the truncation keys, the reward keys) of a key set
            clip = self.keys_for(self.clip, data)
            memo = keyset.memo[id(self)] = (
                [*self.keys_for(self.match, data), *clip], frozenset(clip),
                self.keys_for(self.reward, data, counts=False))
        chosen: list[str] = memo[0]
        self._clip_now, rewards = memo[1], memo[2]
        for key in rewards:  # said beside a truncation or a length at its cap
            value = finite(data[key])
            if value is not None and (key in self.rewards or len(self.rewards) < 16):
                self.rewards.setdefault(key, Series(REWARD_POINTS)).add(self._step, value)
        return chosen

    def update(self, event: Event) -> Sequence[Finding]:
        if isinstance(event, ConfigEvent):
            from trackmux.doctor.rules.length_cap import find_cap

            self.config_cap = find_cap(event.config) or self.config_cap
            return ()
        self._step = event.step
        return super().update(event)

    def cap(self) -> tuple[str, float] | None:
        """(where it was read, the cap) of the response length, None if unknown."""
        if self.params["cap"] is not None:
            return "the rule's cap", float(self.params["cap"])
        if self.config_cap is not None:
            return f"config {self.config_cap[0]}", float(self.config_cap[1])
        return None

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        found = self._check(key, s, step)
        if found is None and enough(s, self.params):
            found = self._pinned(key, s, step)
        return found

    def _pinned(self, key: str, s: Series, step: int) -> Finding | None:
        """A length at its cap (or most responses truncated) whatever its level was: where
        the runaway (or the truncation rise) cannot say it, as it rose too little from its
        anchored level, and never did."""
        recent_n, _, _ = windows(s, self.params)
        recent = median(s.tail(recent_n))
        clip = key in self._clip_now
        low = self.levels[key].best()[0]
        rose = recent - low >= self.params["clip_rise"] if clip else \
            low > 0 and recent >= self.params["grow"] * low
        cap = None if clip else self.cap()
        if clip:
            line = self.params["pinned_clip"]
        elif cap is not None:
            line = self.params["pinned"] * cap[1]
        else:
            return None
        latch = self.latch(key, "pinned")
        if (rose and (key, "learning") not in self.rose_before) or \
                (key, "clip" if clip else "grow") in self.rose_before:
            latch.check(False, step)  # that finding grows and turns critical at the cap
            return None
        pinned = line <= recent <= 1.0 if clip else recent >= line  # a share is at most 1
        strong = pinned and self.sudden(key, s, low, line, 1,
                                        self.params["sigmas"])
        if not latch.check(pinned, first_past(s, recent_n, lambda v: v >= line), strong):
            return None
        onset = since(s, lambda v: v >= line, latch.onset)
        where, proof = at(s, key, onset)
        if clip:
            what = (f"{key}: {recent:.0%} of the responses are cut at the length cap (recent "
                    f"median), at least {fmt(line)} since {where}")
        else:
            assert cap is not None
            what = (f"{key} is pinned at its length cap: a recent median of {fmt(recent)}, "
                    f"{ratio(recent, cap[1]):.0%} of the cap {fmt(cap[1])} ({cap[0]}), "
                    f"since {where}: the responses are cut at the limit")
        return self.finding(onset, [key], what + self._reward_flat(onset),
                            evidence=[proof]).grows(1)

    def _check(self, key: str, s: Series, step: int) -> Finding | None:
        if not enough(s, self.params):
            return None
        recent_n, _, window_n = windows(s, self.params)
        before = s.before_tail(recent_n, window_n)
        steps = list(s.steps)
        levels = self.levels.get(key)
        if levels is None:
            levels = self.levels[key] = SlidingBest(self.params["lookback"], lowest=True)
        levels.add((median(before), steps[-recent_n - window_n], steps[-recent_n - 1]))
        cutoff = step - self.params["within"]  # a level from further back is forgotten
        levels.forget(lambda item: item[1] < cutoff)
        recent = median(s.tail(recent_n))
        noise = self.params["sigmas"] * robust_sigma(before)
        if key in self._clip_now:
            level, first, last = levels.best()
            bad = (recent >= self.params["clip_bound"]
                   and recent - level >= self.params["clip_rise"])
            latch = self.latch(key, "clip")
            line = level + self.params["clip_rise"]
            strong = bad and recent - level >= STRONG * self.params["clip_rise"] and \
                min(s.tail(recent_n)) >= line
            if not strong and self.sudden(key, s, level, max(
                    line, self.params["clip_bound"]), 1,
                    self.params["sigmas"]):
                bad = strong = True  # the last points far above: told now
            if latch.check(bad, first_past(s, recent_n, lambda v: v >= line), strong):
                where, proof = at(s, key, latch.onset)
                self.rose_before.add((key, "clip"))
                found = self.finding(latch.onset, [key], f"{key} (the share of truncated "
                                     f"responses) climbed to {where} from {fmt(level)} "
                                     f"({span([first, last])}), recent median {fmt(recent)}"
                                     f"{self._reward_flat(first)}", evidence=[proof])
                return found.grows(1, level, self.params["pinned_clip"])
            return None
        level, first, last = levels.best()
        line = self.params["grow"] * level
        grow = level > 0 and recent >= line and recent - level >= noise
        strong = grow and recent - level >= STRONG * noise
        if not strong and level > 0 and self.sudden(
                key, s, level, max(line, level + noise), 1, self.params["sigmas"]):
            grow = strong = True  # the last points far above: told now (stats.sudden)
        if self.latch(key, "grow").check(grow, first_past(s, recent_n, lambda v: v >= line),
                                         strong):
            half = ONSET * line + (1 - ONSET) * level
            onset = since(s, lambda v: v >= half, self.latch(key, "grow").onset)
            where, proof = at(s, key, onset)
            found = self.finding(onset, [key], f"{key} ran away to a recent median of "
                                 f"{fmt(recent)}, {ratio(recent, level):.1f}x its level of "
                                 f"{fmt(level)} ({span([first, last])}), moving since "
                                 f"{where}", evidence=[proof])
            cap = self.cap()
            # the reward over the climb; from the length's level too where that level is
            # right before the climb (an anchored level hundreds of steps back would credit
            # a run's ordinary learning since then to the length)
            window = int(self.params["window"])
            near = onset - last <= window
            learning = "" if not self.rewards else reward_improving(
                next(iter(self.rewards.values())), onset, first if near else None, window,
                self.params["learning"], (first, last) if near else None)
            if learning:  # learning to answer at length: at its cap, a runaway all the same
                self.rose_before.add((key, "learning"))
                found.severity = "info"
                found.message += (f", while the reward kept improving ({learning}): a "
                                  f"policy learning to answer at length, not a runaway")
            else:
                self.rose_before.add((key, "grow"))
            pinned = None if cap is None or learning else self.params["pinned"] * cap[1]
            return found.grows(1, level, pinned)  # learning: _pinned tells the cap
        return None

    def _reward_flat(self, since: int) -> str:
        for key, r in self.rewards.items():
            then = [v for st, v in zip(r.steps, r.values, strict=True) if st <= since]
            if len(then) < 2 or len(r.values) < 3:
                continue
            level, now = median(then[-5:]), median(r.tail(3))
            if abs(now - level) <= self.params["flat"] * max(abs(level), 1e-12):
                return (f" while the reward {key} stayed flat ({fmt(level)} then, "
                        f"{fmt(now)} now): the policy spends its length budget without "
                        f"gaining")
        return ""


class ValRegression(Detector):
    """A validation score (higher is better) drops ``drop`` below its best so far (of the
    best, or of the gain since the first evaluation, whichever is larger) for ``persist``
    evaluations in a row, measured from the highest median of 3 evaluations in a row (a
    best so far is the luckiest evaluation yet, and a small benchmark's score moves by
    several points from one evaluation to the next); once ``min_history`` evaluations show
    the score's own noise, the drop must also be ``sigmas`` of it."""

    rule = "val_regression"
    kinds = frozenset({"metrics"})
    params_spec = {
        "keys": Param(["@val_reward", "!*loss*", "!*std*", "!*length*"], "patterns",
                      "held-out scores (dialects.py), or patterns"),
        "drop": Param(0.25, "fraction"),
        "sigmas": Param(4.0, "positive", "the drop from the highest median of 3 evaluations "
                        "in the score's own noise (stats.Noise: the sigma of one evaluation, "
                        "serial correlation included)"),
        "min_history": Param(6, "count", "evaluations before the noise is judged"),
        "persist": Param(2, "count", "evaluations in a row"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.match = KeyMatcher(self.params["keys"])
        self.best: dict[str, tuple[float, int, float]] = {}  # best, its step, first value
        self.latches: dict[str, Latch] = {}
        self.recent: dict[str, Series] = {}
        self.noises: dict[str, Noise] = {}
        #: the highest median of 3 evaluations in a row: a best that one lucky (or
        #: heavy-tailed) evaluation does not set, for the drop judged in the noise
        self.steady: dict[str, float] = {}

    def update(self, event: Event) -> Sequence[Finding]:
        if not isinstance(event, MetricsEvent):
            return ()
        out: list[Finding] = []
        keys: list[str] = []
        for key in self.keys_for(self.match, event.data):
            value = finite(event.data[key])
            if value is None or (key not in self.best and len(self.best) >= 2048):
                continue
            best, best_step, first = self.best.get(key, (value, event.step, value))
            scale = max(best - first, abs(best), 1e-12)
            series = self.recent.setdefault(key, Series(self.params["persist"] + 1))
            series.add(event.step, value)
            noise = self.noises.setdefault(key, Noise(160))
            if len(noise.values) >= 3:
                steady = median([noise.values[-3], noise.values[-2], noise.values[-1]])
                self.steady[key] = max(self.steady.get(key, steady), steady)
            # judged once 3 evaluations come before those judged together (``persist``):
            # a best that is the first evaluation or two is no level yet; the drop is
            # judged from the steady best (one lucky evaluation is no level either)
            steady_drop = self.steady.get(key, best) - value
            bad = steady_drop >= self.params["drop"] * scale and \
                len(noise.values) - (self.params["persist"] - 1) >= 3
            # the noise of the evaluations before those judged together
            if bad and noise.estimate(self.params["persist"] - 1, self.params["min_history"]):
                bad = steady_drop >= self.params["sigmas"] * noise.sigma
            noise.add(value)
            latch = self.latches.setdefault(key, Latch(self.params["persist"]))
            if latch.check(bad, event.step):
                keys.append(key)
                shown = series.value_at(latch.onset)
                shown = value if shown is None else shown
                pct = f"{ratio(best - shown, abs(best)):.0%}" if abs(best) > 1e-9 \
                    else fmt(best - shown)
                out.append(self.finding(
                    latch.onset, [key], f"{key} dropped {pct} from its best {fmt(best)} "
                    f"(step {best_step}) to {fmt(shown)} at step {latch.onset}",
                    time=event.time, evidence=[(key, best_step, best),
                                               (key, latch.onset, shown)]))
            if value > best:
                best, best_step = value, event.step
            self.best[key] = (best, best_step, first)
        return out


BUILTIN: tuple[type[Detector], ...] = (Nonfinite, RewardCollapse, RewardFrozen, KlBlowup,
                                       EntropyCollapse, GradExplosion, LengthBlowup,
                                       ValRegression)
