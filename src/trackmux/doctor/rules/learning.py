"""A reward that kept improving: what tells a policy learning from a runaway.

A KL that climbs away from the reference, responses that grow longer, a gradient norm
that jumps: each is also what a policy that learns does (it moves off its reference,
learns to reason at length, takes a large step now and then). Rules that judge such a
rise ask the reward too (``kl_blowup``, ``length_blowup``, ``grad_explosion``): a rise
while the reward keeps improving is told as ``info``, a rise with the reward flat or
falling as the rule's severity. The reward's gain is judged in its own noise, so a noisy
reward that wandered up by luck does not excuse a runaway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trackmux.core.events import Event
from trackmux.doctor.detector import KeyMatcher
from trackmux.doctor.findings import Finding
from trackmux.doctor.rules.series import SeriesRule, fmt
from trackmux.doctor.stats import Series, finite, median, robust_sigma, trend

#: a reward that rose over a whole climb: a least-squares line over at least this many
#: points whose t statistic is at least ``LEARNING_T`` (a strong trend, far past the 2 a
#: short climb's median gain is confirmed with)
LEARNING_POINTS = 10
LEARNING_T = 4.0
#: reward points a rule keeps for this reading (its level before a rise, and the rise)
REWARD_POINTS = 256


def reward_improving(rewards: Series, onset: int, start: int | None, window: int,
                     share: float, level: tuple[int, int] | None = None) -> str:
    """How the reward kept improving since ``onset`` ("": it did not), for the message.

    A rise found late is also read from ``start``, the first step of the level the
    detection compared against: a curve that grew with the reward over tens of steps and
    then holds is dated at its last rise, too late to show the reward's gain; and, given
    ``level`` (its first and last step), from the reward over the very steps of that level
    to the reward after them (a rise measured from a level at the run's start). The reward
    improved when the median of its last 5 points is ``share`` of its level (the median of
    the ``window`` steps before) and 3 of that level's noise above it, still rising (t of
    its line at least 2); or, over ``LEARNING_POINTS`` points or more, when its fitted
    line rose that share and one sigma with a t of at least ``LEARNING_T``."""
    pairs = list(zip(rewards.steps, rewards.values, strict=True))
    spans = [(begin - window, begin - 1) for begin in
             dict.fromkeys((onset, min(onset, onset if start is None else start)))]
    for first, last in spans + ([] if level is None else [level]):
        before = [v for st, v in pairs if first <= st <= last]
        since = [(st, v) for st, v in pairs if st > last]
        if len(before) < 3 or len(since) < 5:
            continue
        then, now = median(before), median(v for _, v in since[-5:])
        gain = now - then
        slope, t, _ = trend([st for st, _ in since], [v for _, v in since])
        if gain >= share * abs(then) and gain >= 3 * robust_sigma(before) and t >= 2:
            return f"{fmt(then)} before it to {fmt(now)} now"
        rise = slope * (since[-1][0] - since[0][0])
        if len(since) >= LEARNING_POINTS and t >= LEARNING_T and \
                rise >= share * abs(then) and rise >= robust_sigma(before):
            return (f"{fmt(then)} before step {since[0][0]} to {fmt(now)} now, a "
                    f"steady rise (t {t:.1f})")
    return ""


def reward_held(rewards: Series, onset: int, window: int) -> str:
    """How the reward held through a stretch that began at ``onset`` ("": it fell, or
    fewer than 3 of its points are there since): the median of its points since at least
    that of the ``window`` steps before. A spike the policy came through leaves the reward
    where it was; one that breaks the run shows in it."""
    pairs = list(zip(rewards.steps, rewards.values, strict=True))
    before = [v for st, v in pairs if onset - window <= st < onset]
    since = [v for st, v in pairs if st >= onset]
    if len(before) < 3 or len(since) < 3 or median(since) < median(before):
        return ""
    return f"{fmt(median(before))} before it, {fmt(median(since))} since"


class RewardFollower(SeriesRule):
    """A curve rule that also keeps the run's reward (the first key its ``reward_keys``
    match, in ``self.rewards``), to ask whether it kept improving or held."""

    #: whether the reward key counts as a key the rule read (coverage: a rule that read
    #: nothing "could not run"). False: every rule here judges its own curve (the KL, a
    #: gradient norm, a loss, a clip fraction, an entropy) and only asks the
    #: reward about it, so a run with a reward and no such curve lists the rule as not
    #: run; True only for a rule whose own signal is the reward
    reward_runs_it = False

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.reward = KeyMatcher(self.params["reward_keys"])
        self.rewards = Series(self.reward_points())
        self._step = 0

    def reward_points(self) -> int:
        """How many of the reward's last points are kept (a rule whose look-back is
        longer keeps more)."""
        return REWARD_POINTS

    def selected(self, data: Mapping[str, Any]) -> list[str]:
        keyset = self.signals.resolve(data)
        memo = keyset.memo.get(id(self))
        if memo is None:  # (the rule's keys, the first reward key) of a key set
            memo = keyset.memo[id(self)] = (
                self.keys_for(self.match, data),
                self.keys_for(self.reward, data, counts=self.reward_runs_it)[:1])
        for key in memo[1]:
            value = finite(data[key])
            if value is not None:
                self.rewards.add(self._step, value)
        chosen: list[str] = memo[0]
        return chosen

    def update(self, event: Event) -> Sequence[Finding]:
        self._step = event.step
        return super().update(event)


def reward_bought(rewards: Series, start: int, window: int, sigmas: float,
                  share: float) -> tuple[float, float, float] | None:
    """(the reward's level before, its level now, its noise) when it rose over a fall of
    another curve that began after ``start``; None when it did not, or too few of its
    points are there.

    The level before is the median of the reward's points of the ``window`` steps up to
    ``start`` (at least its last 5 there); now, the median of its last 5 points after
    ``start`` (at least 3). It rose when the gain is ``share`` of the level before and
    ``sigmas`` times its noise: the larger robust sigma of the points before and of those
    5, so a reward that was exactly 0 before (a flat start) is judged by how much it
    wanders now. Entropy is what a policy spends to buy reward (Cui et al. 2025): a fall
    that bought this much is the policy sharpening as it learns."""
    pairs = list(zip(rewards.steps, rewards.values, strict=True))
    earlier = [(st, v) for st, v in pairs if st <= start]
    before = [v for st, v in earlier if st > start - window]
    if len(before) < 5:
        before = [v for _, v in earlier[-5:]]
    since = [v for st, v in pairs if st > start][-5:]
    if len(before) < 3 or len(since) < 3:
        return None
    then, now = median(before), median(since)
    noise = max(robust_sigma(before), robust_sigma(since))
    gain = now - then
    if gain > 0 and gain >= sigmas * noise and gain >= share * abs(then):
        return then, now, noise
    return None
