"""``idle_steps``: a run whose updates began but most of whose steps still update nothing.

A gradient norm of exactly 0 is exact evidence that a step changed nothing: in GRPO every
group of the batch was flat (all its rollouts scored alike), so every advantage was 0. A
healthy run shows that at a sparse task's start (``frozen_start`` holds such a start) and
on an occasional batch later; once the policy solves some prompts and fails others, a
batch with no signal at all becomes rare. A run whose learning rate is too low or whose
task is too hard keeps failing every rollout of most batches after its first updates:
it learns on a few scattered steps and idles on the rest (Stanford CS336's GRPO at a
learning rate of 3e-6, "too slow to learn in 100 steps": 65 of its 100 steps update
nothing, 44 of them after its first update).

The rule judges the share of idle steps since the run's first update against one half,
the most a run that is said to update "on most steps" can show: a one-sided test of the
count over its last ``window`` points, at ``alpha``, with the variance the idle steps'
own serial correlation before it gives it. Only a full window is judged: right after a
first update the share is not stationary, it falls as learning takes hold, so the
points just after it say how the start went, not how the run goes (a healthy slow start
at a learning rate of 5e-6 idles on 19 of its first 22 points after its first update,
then on 5 of the next 18 and none after). Only the gradient is read: a loss of
exactly 0 is what TRL logs on many healthy steps, and a reward spread of 0 is a batch of
one flat group (half the steps of the Unsloth notebooks), neither means no update.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from trackmux.core.events import Event, MetricsEvent
from trackmux.doctor.detector import Detector, KeyMatcher, Param
from trackmux.doctor.findings import Finding
from trackmux.doctor.rules.series import fmt
from trackmux.doctor.stats import MAX_PHI, finite

#: gradient keys followed per run (a run logs one or a few; the first ones are kept)
MAX_KEYS = 64


def idle_chance(idle: int, points: int, rho: float) -> float:
    """How likely a run that updates on half its steps shows ``idle`` idle steps of
    ``points``, or more: the count's normal approximation (continuity corrected), its
    variance widened as an AR(1)'s by the idle steps' lag-1 correlation ``rho``
    ((1 + rho) / (1 - rho), rho >= 0): idle steps that come in bursts are fewer
    independent pieces of evidence than as many scattered ones."""
    if points <= 0:
        return 1.0
    rho = min(max(rho, 0.0), MAX_PHI)
    sd = math.sqrt(points / 4.0 * (1.0 + rho) / (1.0 - rho))
    z = (idle - 0.5 - points / 2.0) / sd
    return 0.5 * math.erfc(z / math.sqrt(2.0))


@dataclass
class _Course:
    """One gradient key's course: its flat start, its first update and the window since."""

    first_idle: int | None = None  # the first idle step of the run
    updated_at: int | None = None  # the first step with a non-zero gradient
    updated_value: float = 0.0  # its gradient norm
    points: int = 0  # points since the key's first idle step (the episode's reach)
    idle: int = 0  # idle points among them
    window: deque[tuple[int, bool, float | None]] = field(default_factory=deque)
    window_idle: int = 0  # idle points in the window
    #: from the first update to the window: how often a step idled after an idle step
    #: and after an update, [after idle: [idle, all], after update: [idle, all]]
    follows: list[list[int]] = field(default_factory=lambda: [[0, 0], [0, 0]])
    done: bool = False

    def persistence(self) -> float:
        """The lag-1 correlation of the idle steps as a two-state Markov chain's, P(idle
        after idle) - P(idle after an update): read before the window once as many points
        are there as in it (as every noise is: a run that stops updating altogether would
        read its own stop as persistence), from every point since the first update until
        then; 0 while either is unknown."""
        (idle_idle, after_idle), (update_idle, after_update) = self.follows
        if after_idle + after_update < len(self.window):
            flags = [i for _, i, _ in self.window]
            for before, after in pairwise(flags):
                if before:
                    idle_idle, after_idle = idle_idle + after, after_idle + 1
                else:
                    update_idle, after_update = update_idle + after, after_update + 1
        if not after_idle or not after_update:
            return 0.0
        return idle_idle / after_idle - update_idle / after_update


class IdleSteps(Detector):
    """Most steps since the run's first update leave the model unchanged: the gradient
    norm is exactly 0 on so many of the last ``window`` points after it (judged once that
    many are there) that a run updating on half its steps would show as many with a
    chance of ``alpha`` or less (``idle_chance``: the idle steps' own lag-1 correlation before
    the window widens the count's spread). A flat start alone is not judged
    (``frozen_start``'s); once the run idles on most steps after it, the start is part of
    the episode. The message says which way the groups are flat: the mean reward of the
    idle steps below that of the updating ones (every rollout failed) or above it
    (prompts the policy solved)."""

    rule = "idle_steps"
    kinds = frozenset({"metrics"})
    params_spec = {
        "grad_keys": Param(["@grad_norm"], "patterns", "the gradient norm: exactly 0 is a "
                                                       "step that updated nothing"),
        "reward_keys": Param(["@reward"], "patterns", "the mean reward: tells a policy that "
                                                      "fails every rollout from one that "
                                                      "solved its prompts"),
        "window": Param(40, "count", "points since the first update the share is judged on "
                                     "(none before that many are there)"),
        "alpha": Param(0.001, "fraction", "chance of as many idle points for a run that "
                                          "updates on half its steps"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.grads = KeyMatcher(self.params["grad_keys"])
        self.rewards = KeyMatcher(self.params["reward_keys"])
        self.courses: dict[str, _Course] = {}

    def update(self, event: Event) -> Sequence[Finding]:
        if not isinstance(event, MetricsEvent):
            return ()
        data = event.data
        reward = None
        out: list[Finding] = []
        for key in self.keys_for(self.grads, data):
            value = finite(data[key])
            if value is None:
                continue
            if reward is None:
                reward = self._reward(data)
            course = self.courses.get(key)
            if course is None:
                if len(self.courses) >= MAX_KEYS:
                    continue
                course = self.courses[key] = _Course()
            found = self._add(key, course, event, value, reward)
            if found is not None:
                out.append(found)
        return out

    def _reward(self, data: Mapping[str, Any]) -> float | None:
        for key in self.keys_for(self.rewards, data, counts=False):
            value = finite(data[key])
            if value is not None:
                return value
        return None

    def _add(self, key: str, course: _Course, event: Event, value: float,
             reward: float | None) -> Finding | None:
        if course.done:
            return None
        idle = value == 0.0
        step = event.step
        if idle and course.first_idle is None:
            course.first_idle = step
        if course.first_idle is not None:
            course.points += 1
            course.idle += idle
        if course.updated_at is None:
            if idle:
                return None  # a flat start: frozen_start's to judge
            course.updated_at, course.updated_value = step, value
        course.window.append((step, idle, reward))
        course.window_idle += idle
        if len(course.window) > self.params["window"]:
            left = course.window.popleft()[1]
            course.window_idle -= left
            follow = course.follows[0 if left else 1]
            follow[0] += course.window[0][1]
            follow[1] += 1
        points, idle_points = len(course.window), course.window_idle
        if points < self.params["window"] or 2 * idle_points <= points:
            return None  # not a full window yet, or not most of it idle (the usual case)
        if idle_chance(idle_points, points, course.persistence()) > self.params["alpha"]:
            return None
        course.done = True
        return self._finding(key, course, idle_points, event)

    def _finding(self, key: str, course: _Course, idle_points: int, event: Event) -> Finding:
        window = course.window
        assert course.first_idle is not None and course.updated_at is not None
        # the episode reaches back to the run's first idle step while most steps since it
        # idled (a flat start that never gave way to learning), else to the window's
        whole = 2 * course.idle >= course.points
        onset = course.first_idle if whole else next(s for s, i, _ in window if i)
        first, last = window[0][0], window[-1][0]
        if first == course.updated_at:
            where = (f"{idle_points} of the {len(window)} points since its first update "
                     f"at step {first} (to step {last})")
        else:
            where = (f"{idle_points} of the last {len(window)} points (steps {first}-{last}; "
                     f"its first update at step {course.updated_at})")
        said = f"{key} exactly 0 (no update) on {where}"
        if whole:
            said += f", {course.idle} of {course.points} since step {course.first_idle}"
        said += (f": most steps update nothing (in GRPO: every group's rollouts scored alike, "
                 f"so every advantage was 0){_why(window)}")
        return self.finding(onset, [key], said, time=event.time,
                            evidence=[(key, onset, 0.0),
                                      (key, course.updated_at, course.updated_value)])


def _why(window: deque[tuple[int, bool, float | None]]) -> str:
    """What the mean reward of the idle steps says against the updating steps': every
    rollout failed (a task the policy rarely solves, a learning rate too low to move it)
    or every rollout succeeded (prompts it has solved)."""
    at_idle = [r for _, i, r in window if i and r is not None]
    at_update = [r for _, i, r in window if not i and r is not None]
    if not at_idle or not at_update:
        return (". Check the rewards: a task the policy rarely solves, a learning rate too "
                "low to move it, or prompts it has all solved")
    idle_mean = sum(at_idle) / len(at_idle)
    update_mean = sum(at_update) / len(at_update)
    rewards = (f"; the mean reward {fmt(idle_mean)} on the idle steps, {fmt(update_mean)} on "
               f"the others")
    if idle_mean > update_mean:
        return (f"{rewards}: the policy solved these prompts; harder ones would teach it "
                f"more")
    return (f"{rewards}: the policy fails every rollout of most batches. Try a higher "
            f"learning rate, easier prompts or more rollouts per prompt")


BUILTIN = (IdleSteps,)
