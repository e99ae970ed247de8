"""Rules over the signals of 2025-26 RL: ``mismatch`` (training-inference), ``frozen_start``,
``clip_fraction``, ``zero_std_groups`` and ``staleness`` (docs/doctor.md cites every
threshold's source). Each reads canonical signals (dialects.py), so a verl, TRL, NeMo-RL
or slime run is judged on the same terms.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trackmux.core.events import ConfigEvent, Event, MetricsEvent
from trackmux.doctor.detector import Detector, KeyMatcher, Param
from trackmux.doctor.findings import Finding
from trackmux.doctor.rules.learning import RewardFollower, reward_improving
from trackmux.doctor.rules.series import SeriesRule, at, first_past, fmt, span, trend_window
from trackmux.doctor.stats import (
    SUDDEN_POINTS,
    Series,
    SlidingBest,
    ar1_t,
    finite,
    lattice_count,
    median,
    ratio,
    share_change_z,
    sudden_run,
    trend,
)

#: mismatch signal -> (parameter, direction, what it means); the defaults' sources are
#: verl docs/algo/rollout_corr.md ("check_rollout_correction_health", "Troubleshooting")
#: and NeMo-RL docs/guides/grpo.md ("Metrics")
MISMATCH = {
    "mismatch_ess": ("min_ess", "below", "the effective sample size of the training/"
                     "inference importance weights"),
    "mismatch_is_mean": ("is_mean_high", "outside", "the mean training/inference importance "
                         "weight"),
    "mismatch_is_std": ("max_is_std", "above", "the spread of the importance weights"),
    "mismatch_kl": ("max_kl", "above", "the KL between the inference engine's and the "
                    "trainer's token probabilities"),
    "mismatch_chi2": ("max_chi2", "above", "the chi-squared divergence of the importance "
                      "weights"),
    "mismatch_veto": ("max_veto", "above", "the share of sequences vetoed for a "
                      "catastrophic token"),
    "mismatch_mult_prob_error": ("max_mult_prob_error", "above", "the multiplicative token "
                                 "probability error"),
    "mismatch_logp_diff": ("max_logp_diff", "above", "the mean log-probability gap between "
                           "trainer and engine"),
}


class Mismatch(SeriesRule):
    """The inference engine and the trainer disagree on the policy's token probabilities
    past a published threshold for ``persist`` points in a row: importance weights far
    from 1, a low effective sample size, a large mismatch KL or chi-squared, NeMo-RL's
    multiplicative probability error. Off-policy updates from such batches destabilise
    training (verl's rollout-correction docs; NeMo-RL's GRPO guide). One episode is one
    finding: the keys that cross within ``group`` steps of the first (and at most
    ``group_points`` logged points after it was found: a run logged every step waited 10
    points) are named together, each with its evidence; a key that crosses later, within
    ``episode`` steps, is told as the episode's continuation (``info``)."""

    rule = "mismatch"
    noise_points = 160
    params_spec = {
        "keys": Param([f"@{s}" for s in MISMATCH], "patterns", "mismatch signals"),
        "min_ess": Param(0.3, "positive", "verl: ESS below 0.3 is too low"),
        "is_mean_low": Param(0.5, "positive", "verl: a mean IS weight below 0.5 ..."),
        "is_mean_high": Param(2.0, "positive", "... or above 2.0 is far from 1"),
        "max_is_std": Param(1.0, "positive", "verl: IS weight std above 1.0"),
        "max_kl": Param(0.1, "positive", "verl: |rollout_corr/kl| above 0.1; NeMo-RL's "
                        "gen_kl_error is judged by max_gen_kl"),
        "max_gen_kl": Param(0.002, "positive", "NeMo-RL: KL errors below 1e-3 acceptable, "
                            "about 1e-3 typical; twice that is past the typical"),
        "max_chi2": Param(1.0, "positive", "verl: chi2_token above 1.0"),
        "max_veto": Param(0.1, "positive", "verl: veto fraction above 0.1"),
        "max_mult_prob_error": Param(1.02, "positive", "NeMo-RL: past ~1-2% is a problem"),
        "max_logp_diff": Param(0.1, "positive", "slime's CI gate on "
                               "train_rollout_logprob_abs_diff"),
        "rise": Param(5.0, "positive", "a distance from ideal (1 - ESS, |IS mean - 1|, "
                      "KL, chi2 ...) this many times its anchored level also counts"),
        "sigmas": Param(4.0, "positive", "... and that many standard deviations of such a "
                        "change under the curve's own noise (stats.Noise) above it"),
        "window": Param(20, "count", "steps in the rolling level"),
        "recent": Param(5, "count", "steps in the recent median"),
        "min_points": Param(5, "count"),
        "min_recent": Param(3, "count"),
        "lookback": Param(300, "count", "checks back the anchored level is looked for"),
        "group": Param(10, "count", "steps after the first key's onset within which other "
                       "keys that cross are the same episode (told once, together)"),
        "group_points": Param(2, "count", "... or this many logged points after the first "
                              "key was found, whichever comes first"),
        "episode": Param(50, "count", "steps after an episode's finding within which "
                         "keys that cross are told as its continuation (info)"),
        "persist": Param(3, "count"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.levels: dict[str, SlidingBest] = {}
        self.held: list[Finding] = []  # the episode's findings, not yet told
        self.held_since = 0.0
        self.held_points = 0  # steps logged since the episode's first finding ...
        self.held_step = 0  # ... the last of them
        self.held_late = False  # they continue an episode already told
        self.told = -1  # the step at which the last episode's finding was told
        self.first = -1  # that episode's onset

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        signal = self._signal(key)
        if signal is None:
            return None
        found = self._rise(key, s, signal)
        if found is not None:
            return found
        value = s.values[-1]
        p = self.params
        if signal == "mismatch_ess":
            bad, line, how = value < p["min_ess"], p["min_ess"], "below"
        elif signal == "mismatch_is_mean":
            bad = value < p["is_mean_low"] or value > p["is_mean_high"]
            line, how = (p["is_mean_low"] if value < 1 else p["is_mean_high"]), \
                ("below" if value < 1 else "above")
        elif signal == "mismatch_kl":
            line = p["max_gen_kl"] if "gen_kl" in key else p["max_kl"]
            bad, how = abs(value) > line, "above"
        else:
            line = p[MISMATCH[signal][0]]
            bad, how = value > line, "above"
        latch = self.latch(key)
        if not latch.check(bad, step):
            return None
        where, proof = at(s, key, latch.onset)
        return self.finding(latch.onset, [key], (
            f"{key} ({MISMATCH[signal][2]}) is {how} {fmt(line)}: {where}, and stayed so "
            f"for {p['persist']} points"), evidence=[proof])

    def update(self, event: Event) -> Sequence[Finding]:
        """One episode, one finding: keys that cross within ``group`` steps of the first
        key's onset are told together when the episode is ``group`` steps old, or
        ``group_points`` logged points after the first key was found (or the run ended),
        naming every key; keys that cross later, within ``episode`` steps of the
        episode's last finding, are added to it as an ``info`` finding (held ``group``
        steps, so the keys that follow together are one continuation). The points bound
        the wait for the warning on a run logged every step, where 10 steps held it 10
        points (issue 42's delay)."""
        found = super().update(event)
        if self.held and isinstance(event, MetricsEvent) and event.step > self.held_step:
            self.held_points += 1
            self.held_step = event.step
        if found and not self.held:
            self.held_since = event.time
            self.held_points, self.held_step = 0, event.step
            self.held_late = self.told >= 0 and event.step - self.told <= \
                self.params["episode"]
        self.held.extend(found)
        if self.held and (event.step >= self.held[0].step + self.params["group"] or (
                self.held_points >= self.params["group_points"] and not self.held_late)):
            return self._tell(event.time, event.step)
        return ()

    def tick(self, now: float, alive: bool) -> Sequence[Finding]:
        if self.held and (not alive or now - self.held_since >= 60.0):
            return self._tell(now, self.held[-1].step)
        return ()

    def _tell(self, time: float, step: int) -> Sequence[Finding]:
        held, self.held = self.held, []
        held.sort(key=lambda f: f.step)
        keys = list(dict.fromkeys(k for f in held for k in f.keys))
        what = "; ".join(f.message for f in held)
        evidence = [e for f in held for e in f.evidence]
        late, self.told = self.held_late, step
        if late:
            found = self.finding(held[0].step, keys, (
                f"the mismatch episode told at step {self.first} goes on: {what}"),
                severity="info", evidence=evidence)
        else:
            self.first = held[0].step
            many = f"{len(keys)} mismatch signals crossed together: " if len(keys) > 1 \
                else ""
            found = self.finding(held[0].step, keys, (
                f"{many}{what}; the inference engine and the trainer no longer agree on the "
                f"policy (precision, a stale or wrong weight sync, a kernel): correct the "
                f"batches (importance sampling, rejection) or find the cause"),
                evidence=evidence)
        found.time = time
        return [found]

    @staticmethod
    def distance(signal: str, value: float) -> float:
        """How far a mismatch value is from a perfect match (0)."""
        if signal == "mismatch_ess":
            return 1.0 - value
        if signal in ("mismatch_is_mean", "mismatch_mult_prob_error"):
            return abs(value - 1.0)
        return abs(value)

    def _rise(self, key: str, s: Series, signal: str) -> Finding | None:
        """A distance from a perfect match that grew ``rise`` times its anchored level:
        the gap opened, before it reached the published bound."""
        from trackmux.doctor.rules.metrics import ONSET, enough, windows
        from trackmux.doctor.rules.series import since
        from trackmux.doctor.stats import ANCHORED, STRONG

        if not enough(s, self.params):
            return None
        recent_n, _, window_n = windows(s, self.params)
        noise = self.noise(key, recent_n)
        if noise is None:
            return None
        before = [self.distance(signal, v) for v in s.before_tail(recent_n, window_n)]
        levels = self.levels.get(key)
        if levels is None:
            levels = self.levels[key] = SlidingBest(self.params["lookback"], lowest=True)
        levels.add((median(before),))
        level = levels.best()[0]
        recent = median(self.distance(signal, v) for v in s.tail(recent_n))
        # past the noise of a change between the two windows (serial correlation taken
        # into account), from a level that is the lowest of many windows
        spread = self.params["sigmas"] * noise.shift(recent_n, window_n) + \
            ANCHORED * noise.of_median(window_n)
        line = max(self.params["rise"] * level, level + spread)
        latch = self.latch(key, "rise")
        strong = recent >= line > 0 and recent - level >= STRONG * spread
        bad = recent >= line > 0
        last = [self.distance(signal, v) for v in s.tail(SUDDEN_POINTS)]
        if not strong and line > 0 and min(last) >= line:  # the last points far past it
            near = self.noise(key, SUDDEN_POINTS)
            if near is not None and sudden_run(
                    [self.distance(signal, v) for v in near.values],
                    near, level, line, 1, STRONG * self.params["sigmas"], own_spread=False):
                bad = strong = True
        if not latch.check(bad, s.steps[-1], strong):
            return None
        half = ONSET * line + (1 - ONSET) * level
        onset = since(s, lambda v: self.distance(signal, v) >= half, latch.onset)
        where, proof = at(s, key, onset)
        return self.finding(onset, [key], (
            f"{key} ({MISMATCH[signal][2]}) moved away from a perfect match: "
            f"{ratio(recent, max(level, 1e-300)):.0f}x its level's distance since {where}, "
            f"before the published bound"), evidence=[proof])

    def _signal(self, key: str) -> str | None:
        for signal, keys in self.signals.fed.items():
            if signal in MISMATCH and key in keys:
                return str(signal)
        return "mismatch_kl" if "kl" in key else None


class FrozenStart(Detector):
    """The gradient norm is exactly 0 for the run's first ``points`` points (nothing
    learns: frozen parameters, a detached loss, every advantage zero), or, where no
    gradient norm is logged, the KL and the loss both are: a broken setup, from step 1.

    A zero gradient at a point where every GRPO group was flat (its zero-std share 1, or
    the mean reward exactly 0: every rollout failed) is explained, not broken: the
    advantages are all zero, as they are at the start of a sparse task the policy cannot
    yet solve ("it may take a few steps before we sample rollouts with non-zero rewards",
    Stanford CS336's GRPO assignment). Such points are not counted toward ``points``; a
    start that stays flat and frozen is raised once it has lasted ``patience`` points, or
    when the run ends (a run that never learned is one, however short: ``end_points``
    points, or a single one where every group was flat, which is conclusive on its own).
    A start that is flat and frozen and then learns raises nothing."""

    rule = "frozen_start"
    kinds = frozenset({"metrics"})
    params_spec = {
        "grad_keys": Param(["@grad_norm"], "patterns"),
        "kl_keys": Param(["@kl"], "patterns"),
        "loss_keys": Param(["@loss"], "patterns"),
        "flat_keys": Param(["@zero_std_frac"], "patterns", "share of GRPO groups with "
                                                           "zero reward spread"),
        "reward_keys": Param(["@reward"], "patterns", "the mean reward: exactly 0 means "
                                                      "every rollout failed"),
        "points": Param(5, "count", "first points that must all be exactly 0 (points where "
                                    "every group was flat not counted)"),
        "patience": Param(50, "count", "points a flat, frozen start may last before it is "
                                       "raised while the run goes on"),
        "end_points": Param(2, "count", "a run that ended sooner: the points it needs"),
        "severity": Param("critical", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.matchers = {name: KeyMatcher(self.params[f"{name}_keys"])
                         for name in ("grad", "kl", "loss", "flat", "reward")}
        #: per "kind\0key": its first points (step, value), while they are all 0
        self.first: dict[str, list[tuple[int, float]]] = {}
        #: kind\0key of the keys that moved off 0 (or were not 0 at their first point)
        self.moved: set[str] = set()
        #: the steps at which every group was flat (a zero gradient there is explained)
        self.flat_steps: set[int] = set()
        self.steps_seen = 0
        self.every_point_flat = True
        self.done = False
        self.time = 0.0

    def update(self, event: Event) -> Sequence[Finding]:
        if self.done or not isinstance(event, MetricsEvent):
            return ()
        data = event.data
        flat = self._flat(data)
        if flat:
            self.flat_steps.add(event.step)
        self.steps_seen += 1
        if self.steps_seen > 10 * self.params["patience"]:
            self.done = True  # the run's first points are long past: nothing to judge
            return ()
        for name in ("grad", "kl", "loss"):
            for key in self.keys_for(self.matchers[name], data):
                value = finite(data[key])
                tag = f"{name}\0{key}"
                if value is None or tag in self.moved:
                    continue
                if value != 0:
                    self.moved.add(tag)
                    self.first.pop(tag, None)
                    continue
                points = self.first.setdefault(tag, [])
                if len(points) < self.params["patience"]:
                    points.append((event.step, value))
                    self.every_point_flat = self.every_point_flat and flat
                    self.time = event.time
        return self._judge()

    def _flat(self, data: Mapping[str, Any]) -> bool:
        """Every GRPO group flat at this point: its zero-std share 1 or more, or its mean
        reward exactly 0 (every rollout failed)."""
        for key in self.keys_for(self.matchers["flat"], data):
            value = finite(data[key])
            if value is not None and value >= 1.0:
                return True
        return any(finite(data[key]) == 0.0
                   for key in self.keys_for(self.matchers["reward"], data))

    def tick(self, now: float, alive: bool) -> Sequence[Finding]:
        """A run that ended before its keys were judged is judged on the points it has
        (``end_points`` or more; one where every group was flat): a short run that never
        learned is still one."""
        if self.done or alive:
            return ()
        least = 1 if self.every_point_flat and self.flat_steps else self.params["end_points"]
        return self._judge(final=least)

    def _state(self, tag: str) -> str:
        """``moved``, ``frozen`` (its first ``points`` unexplained zeros, or ``patience``
        zeros in all) or ``open`` (not yet known)."""
        if tag in self.moved:
            return "moved"
        points = self.first.get(tag, [])
        unexplained = sum(1 for step, _ in points if step not in self.flat_steps)
        if unexplained >= self.params["points"] or len(points) >= self.params["patience"]:
            return "frozen"
        return "open"

    def _judge(self, final: int = 0) -> Sequence[Finding]:
        tags = [*self.first, *(t for t in self.moved if t not in self.first)]
        grads = [t for t in tags if t.startswith("grad\0")]
        if final:  # the run ended: what is still open and has enough points is frozen
            def frozen(t: str) -> bool:
                return self._state(t) == "frozen" or (
                    self._state(t) == "open" and len(self.first.get(t, [])) >= final)
        else:
            def frozen(t: str) -> bool:
                return self._state(t) == "frozen"
        if grads:
            if not final and any(self._state(t) == "open" for t in grads):
                return ()
            hit = [t for t in grads if frozen(t)]
        else:
            kls = [t for t in tags if t.startswith("kl\0")]
            losses = [t for t in tags if t.startswith("loss\0")]
            if not kls or not losses:
                if final:
                    self.done = True
                return ()
            if any(self._state(t) == "moved" for t in kls + losses):
                self.done = True
                return ()
            if not (any(frozen(t) for t in kls) and any(frozen(t) for t in losses)):
                if final:
                    self.done = True
                return ()
            hit = [t for t in kls + losses if frozen(t)]
        self.done = True
        if not hit:
            return ()
        keys = [t.split("\0", 1)[1] for t in hit]
        points = self.first[hit[0]]
        first_step, last_step = points[0][0], points[-1][0]
        flat = sum(1 for step, _ in points if step in self.flat_steps)
        if final:
            which = (f"every one of the {len(points)} point{'s' if len(points) > 1 else ''} "
                     f"the run logged")
        else:
            which = f"the run's first {len(points)} points"
        also = ""
        if flat == len(points):
            also = ", with every GRPO group flat (zero reward spread) at each of them"
        elif flat:
            also = f" ({flat} of them with every GRPO group flat)"
        return [self.finding(first_step, keys, (
            f"{', '.join(keys)} exactly 0 at {which} (steps {first_step}-{last_step}){also}: "
            f"nothing is learning. Check for frozen parameters, a loss detached from the "
            f"graph, a zero learning rate, or every advantage zero (a task the policy "
            f"cannot yet solve)"), time=self.time,
            evidence=[(t.split("\0", 1)[1], st, v) for t in hit for st, v in self.first[t]
                      if st in (first_step, last_step)])]


class ClipFraction(RewardFollower):
    """The share of clipped PPO ratios spikes (``ratio`` times its anchored level and
    ``rise`` above it: updates much larger than the trust region), or the low and high
    clip shares drift apart (one ``imbalance`` times the other and above ``floor``:
    the policy pushes probabilities one way only, often before an entropy collapse).

    A share that rises while the reward keeps improving (by ``learning``:
    rules/learning.py) is told as ``info``: the policy moving as it starts to learn. A
    run whose first steps update nothing (every GRPO group flat) logs its share at 0
    there, and a share that then climbs with the first rewards is that start, not a
    runaway; so is a clip range chosen tight on purpose (GSPO's sequence ratio)."""

    rule = "clip_fraction"
    params_spec = {
        "keys": Param(["@clip_frac", "@clip_frac_low", "@clip_frac_high"], "patterns"),
        "window": Param(20, "count", "steps in the level"),
        "recent": Param(5, "count", "steps in the recent median"),
        "min_points": Param(5, "count"),
        "min_recent": Param(3, "count"),
        "lookback": Param(300, "count", "checks back the anchored level is looked for"),
        "ratio": Param(3.0, "positive"),
        "rise": Param(0.1, "fraction", "least absolute rise of the share"),
        "imbalance": Param(5.0, "positive"),
        "floor": Param(0.05, "fraction", "least share for an imbalance to count"),
        "reward_keys": Param(["@reward"], "patterns", "the reward judged still improving"),
        "learning": Param(0.1, "fraction", "a reward that rose this share of its level (and "
                          "3 of its noise) since the level: info"),
        "persist": Param(3, "count"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.levels: dict[str, SlidingBest] = {}
        self.recents: dict[str, tuple[int, float]] = {}

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        from trackmux.doctor.rules.metrics import enough, windows

        self.recents[key] = (step, s.values[-1])
        found = self._imbalance(key, s, step)
        if found is not None or not enough(s, self.params):
            return found
        recent_n, _, window_n = windows(s, self.params)
        levels = self.levels.get(key)
        if levels is None:
            levels = self.levels[key] = SlidingBest(self.params["lookback"], lowest=True)
        levels.add((median(s.before_tail(recent_n, window_n)),))
        level = levels.best()[0]
        recent = median(s.tail(recent_n))
        line = max(self.params["ratio"] * level, level + self.params["rise"])
        latch = self.latch(key)
        bad = recent >= line and recent - level >= self.params["rise"]
        if not latch.check(bad, first_past(s, recent_n, lambda v: v >= line)):
            return None
        where, proof = at(s, key, latch.onset)
        times = (f"{ratio(recent, level):.1f}x its level of {fmt(level)}" if level > 0 else
                 f"from a level of {fmt(level)}")
        steps = list(s.steps)
        learning = reward_improving(self.rewards, latch.onset,
                                    steps[max(0, len(steps) - recent_n - window_n)],
                                    int(self.params["window"]), self.params["learning"])
        said = ("updates far outside the trust region; lower the learning rate or check the "
                "advantages")
        if learning:
            said = (f"while the reward kept improving ({learning}): a policy that moves as it "
                    f"learns")
        return self.finding(latch.onset, [key], (
            f"{key} (the share of clipped policy ratios) spiked to {where}, {times} (recent "
            f"median {fmt(recent)}): {said}"), evidence=[proof],
            severity="info" if learning else None)

    def _imbalance(self, key: str, s: Series, step: int) -> Finding | None:
        fed = self.signals.fed
        if "clip_frac_low" not in fed or "clip_frac_high" not in fed:
            return None
        low = [k for k in fed["clip_frac_low"] if k in self.recents]
        high = [k for k in fed["clip_frac_high"] if k in self.recents]
        if not low or not high or key not in (low[0], high[0]):
            return None
        (ls, lv), (hs, hv) = self.recents[low[0]], self.recents[high[0]]
        if ls != hs:
            return None
        big, small = max(lv, hv), min(lv, hv)
        bad = big >= self.params["floor"] and big >= self.params["imbalance"] * max(small,
                                                                                     1e-12)
        latch = self.latch(low[0] + "|" + high[0], "imbalance")
        if not latch.check(bad, step):
            return None
        return self.finding(latch.onset, [low[0], high[0]], (
            f"the clip shares drifted apart since step {latch.onset}: {low[0]} {fmt(lv)} "
            f"and {high[0]} {fmt(hv)} at step {step}: the policy is pushed one way only "
            f"(the high end: entropy tends to fall)"),
            evidence=[(low[0], step, lv), (high[0], step, hv)])


class ZeroStdGroups(SeriesRule):
    """Most GRPO groups have zero reward spread (``frac_reward_zero_std`` or its
    equivalent at or above ``share``, ``persist`` points in a row): their advantages are
    zero and they teach nothing; the scalar twin of ``flat_groups``, for runs that log no
    samples."""

    rule = "zero_std_groups"
    params_spec = {
        "keys": Param(["@zero_std_frac"], "patterns"),
        "share": Param(0.9, "fraction", "share of flat groups"),
        "persist": Param(3, "count"),
        "severity": Param("warning", "severity"),
    }

    def size(self) -> int:
        return 8

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        latch = self.latch(key)
        if not latch.check(s.values[-1] >= self.params["share"], step):
            return None
        where, proof = at(s, key, latch.onset)
        return self.finding(latch.onset, [key], (
            f"{key} reached {where}: nearly every GRPO group got the same reward for all "
            f"its samples, so their advantages are zero and the batch teaches nothing; the "
            f"prompts are too easy or too hard for the policy, or its samples collapsed"),
            evidence=[proof])


class Staleness(SeriesRule):
    """Asynchronous rollouts grow stale: the age of the data trained on (in policy
    versions) exceeds ``bound``, ``persist`` points in a row."""

    rule = "staleness"
    params_spec = {
        "keys": Param(["@staleness"], "patterns"),
        "bound": Param(4.0, "positive", "versions; verl's fully-async default staleness "
                       "is of this order"),
        "persist": Param(3, "count"),
        "severity": Param("warning", "severity"),
    }

    def size(self) -> int:
        return 8

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        latch = self.latch(key)
        if not latch.check(s.values[-1] > self.params["bound"], step):
            return None
        where, proof = at(s, key, latch.onset)
        return self.finding(latch.onset, [key], (
            f"{key} (how stale the rollouts are) passed {fmt(self.params['bound'])}: "
            f"{where} ({span([latch.onset, step])}); off-policy updates from old rollouts "
            f"drift from the policy; bound the staleness or correct for it"),
            evidence=[proof])


BUILTIN: tuple[type[Detector], ...] = (Mismatch, FrozenStart, ClipFraction, ZeroStdGroups,
                                       Staleness)


class RewardHacking(SeriesRule):
    """Reward hacking from logged scalars: over the last ``trend_window`` steps a reward
    component (``rewards/<fn>/mean``) trends up while another component or the held-out
    reward trends down, each line's slope ``sigmas`` standard errors from flat (the
    errors of a line through serially correlated points: stats.ar1_t with the curve's own
    noise), and the fall at least ``min_change`` of where the falling one stood;
    ``persist`` points in a row. One finding names both. A falling penalty
    (``*penalty*``, ``*length*``) is the expected price of a gain and does not count, nor
    does the total reward (a component that rises while the total falls is a trade the
    reward's weights chose).

    A run that ended before its lines had ``min_points`` points is judged once, on its
    first and last points, where the data can carry it: each key a mean of rewards in
    [0, 1] (its count read from its values' lattice, stats.lattice_count: ``short_points``
    values at least; the least count the keys show is the batch's), the run's config
    naming the samples per prompt (``group_keys``: GRPO's
    samples of one prompt succeed or fail together, so the prompts, not the samples, are
    the independent draws), and each change ``sigmas`` standard errors of such a mean
    over that many prompts (stats.share_change_z). Without the group size the short run
    is not judged."""

    rule = "reward_hacking"
    noise_points = 160
    kinds = frozenset({"metrics", "config"})
    params_spec = {
        "keys": Param(["@reward_component", "@val_reward"], "patterns"),
        "rising_keys": Param(["@reward_component"], "patterns", "what may rise"),
        "ignore_falling": Param(["*penalty*", "*length*"], "patterns",
                                "falls that are no sign of hacking"),
        "trend_window": Param(30, "count", "steps of the lines fitted"),
        "long_window": Param(100, "count", "steps of a second, longer line fitted when the "
                             "short one shows no trend: a slow trade is clear only over it"),
        "min_points": Param(8, "count", "least points in a fitted line (sparse logs)"),
        "min_change": Param(0.1, "fraction", "the fall over the window, as a share of "
                            "where the falling key stood"),
        "sigmas": Param(3.5, "positive", "each slope in standard errors from flat"),
        "persist": Param(3, "count"),
        "severity": Param("warning", "severity"),
        "group_keys": Param(["*num_generations*", "*rollout.n", "*n_samples_per_prompt*",
                             "*group_size*"], "patterns", "config keys of the samples per "
                            "prompt (TRL, verl, OpenRLHF, NeMo-RL, a custom loop)"),
        "short_points": Param(3, "count", "a short run's least points per key (two "
                              "values fit a fraction by chance a few percent of the time)"),
        "max_count": Param(8192, "count", "the most rewards a logged mean is read as"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.group_key = KeyMatcher(self.params["group_keys"])
        #: the run config's samples per prompt, once it logged them
        self.group: int | None = None
        self.rising_seen: set[str] = set()
        self.short_done = False
        self.last_time = 0.0
        self.rising = KeyMatcher(self.params["rising_keys"])
        self.ignore = KeyMatcher(self.params["ignore_falling"])
        self.moves: dict[str, tuple[int, int, float, int, float]] = {}
        #: per key, its last move up (a trade is done once the term stops rising, while
        #: the other's fall may only now be clear): what ``moves`` held then
        self.rose: dict[str, tuple[int, int, float, int, float]] = {}
        #: per key, the long line's verdict and the point it was fitted at (refitted
        #: every 4 points: it moves little from one to the next)
        self.long: dict[str, tuple[int, int, float, int]] = {}
        self.told: set[tuple[str, str]] = set()
        self._rising: frozenset[str] = frozenset()

    def size(self) -> int:
        return max(int(self.params["trend_window"]), int(self.params["long_window"])) + \
            int(self.params["min_points"]) + 1

    def selected(self, data: Mapping[str, Any]) -> list[str]:
        self._rising = frozenset(self.keys_for(self.rising, data))
        self.rising_seen |= self._rising
        return self.keys_for(self.match, data)

    def check(self, key: str, s: Series, step: int) -> Finding | None:
        noise = self.noise(key, 0)
        phi = noise.phi if noise is not None else 0.5
        for window in (self.params["trend_window"], self.params["long_window"]):
            cached = self.long.get(key)
            if window == self.params["long_window"] and cached is not None and \
                    s.count - cached[0] < 4:
                self.moves[key] = (step, *cached[1:], s.values[-1])
                if cached[1] == 1:
                    self.rose[key] = self.moves[key]
                break
            line = trend_window(s, int(window), int(self.params["min_points"]))
            if line is None:
                return None
            steps, values = line
            n = len(values)
            slope, t, _ = trend(steps, values)
            t = ar1_t(t, phi)
            start = median(values[:max(3, n // 5)])
            change = slope * (steps[-1] - steps[0])
            sig = self.params["sigmas"]
            direction = 1 if t >= sig and change > 0 else -1 if t <= -sig and \
                -change >= self.params["min_change"] * abs(start) and change < 0 else 0
            self.moves[key] = (step, direction, start, steps[0], values[-1])
            if window == self.params["long_window"]:
                self.long[key] = (s.count, direction, start, steps[0])
            if direction:
                if direction == 1:
                    self.rose[key] = self.moves[key]
                break
        return None

    def update(self, event: Event) -> Sequence[Finding]:
        if isinstance(event, ConfigEvent):
            self._read_group(event.config, "")
            return ()
        super().update(event)  # every key's line at this step first: then the pairs
        self.last_time = event.time
        out: list[Finding] = []
        step = event.step
        now = {k: m for k, m in self.moves.items() if m[0] == step}
        for key, (_, direction, start, first, _) in now.items():
            if key not in self._rising:
                continue
            rose = self.rose.get(key)
            if direction != 1 and rose is not None and \
                    step - rose[0] <= self.params["long_window"]:
                direction, start, first = 1, rose[2], rose[3]  # it rose lately
            falling = [k for k, m in now.items() if k != key and m[1] == -1
                       and not self.ignore(k)] if direction == 1 else []
            latch = self.latch(key)
            if not latch.check(bool(falling), step) or not falling or \
                    (key, falling[0]) in self.told:
                continue
            other = falling[0]
            self.told.add((key, other))
            o_start = now[other][2]
            where, proof = at(self.series[key], key, step)
            o_where, o_proof = at(self.series[other], other, step)
            out.append(self.finding(latch.onset, [key, other], (
                f"reward hacking: the reward component {key} rose from about {fmt(start)} "
                f"(step {first}) to {where} while {other} fell from about {fmt(o_start)} "
                f"to {o_where}, both trends clear since step {latch.onset}: the policy "
                f"gains on one term of the reward at the cost of what it should learn"),
                time=event.time, evidence=[proof, o_proof]))
        return out

    def _read_group(self, config: Mapping[str, Any], prefix: str) -> None:
        for name, value in config.items():
            key = f"{prefix}{name}"
            if isinstance(value, Mapping):
                self._read_group(value, f"{key}.")
            elif self.group_key(key) and isinstance(value, int) and \
                    not isinstance(value, bool) and value >= 1:
                self.group = value

    def _short_moves(self) -> dict[str, tuple[float, int]]:
        """Each short line's change in standard errors over the batch's prompts, and its
        last step; the lines not judged are left out (see the class's docstring). Every
        key is judged over the least count any of them shows: the components score the
        same samples, and a reward of partial credit shows more than their number."""
        if self.group is None:
            return {}
        counts: dict[str, int] = {}
        for key, s in self.series.items():
            if self.params["short_points"] <= s.count < self.params["min_points"]:
                count = lattice_count(list(s.values), int(self.params["max_count"]))
                if count is not None:  # else no mean of rewards in [0, 1]: not judged
                    counts[key] = count
        if not counts or min(counts.values()) % self.group:
            return {}  # not whole groups: the count or the group size is not what it seems
        prompts = min(counts.values()) // self.group
        return {k: (share_change_z(s.values[0], s.values[-1], prompts), s.steps[-1])
                for k in counts for s in (self.series[k],)}

    def tick(self, now: float, alive: bool) -> Sequence[Finding]:
        if alive or self.short_done:
            return ()
        self.short_done = True
        sig = self.params["sigmas"]
        moves = self._short_moves()
        for key, (z, step) in moves.items():
            if key not in self.rising_seen or z < sig:
                continue
            falls = [(oz, other) for other, (oz, _) in moves.items() if other != key
                     and oz <= -sig and not self.ignore(other) and
                     self.series[other].values[0] - self.series[other].values[-1] >=
                     self.params["min_change"] * abs(self.series[other].values[0])]
            if not falls:
                continue
            oz, other = min(falls)
            s, o = self.series[key], self.series[other]
            last = max(step, moves[other][1])
            return [self.finding(last, [key, other], (
                f"reward hacking in a short run: the reward component {key} rose from "
                f"{fmt(s.values[0])} (step {s.steps[0]}) to {fmt(s.values[-1])} (step "
                f"{s.steps[-1]}) while {other} fell from {fmt(o.values[0])} to "
                f"{fmt(o.values[-1])}, {fmt(z)} and {fmt(-oz)} standard errors of a mean "
                f"over the batch's prompts ({self.group} samples each): the policy gains "
                f"on one term of the reward at the cost of what it should learn"),
                time=self.last_time, evidence=[(key, s.steps[-1], s.values[-1]),
                                    (other, o.steps[-1], o.values[-1])])]
        return ()


BUILTIN = (*BUILTIN, RewardHacking)
