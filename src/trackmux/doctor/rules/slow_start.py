"""A reward still at its start: its first value, left only by isolated blips of a few
rollouts' success (``reward_frozen``'s flat-start allowance).

A sparse task's first batches all fail (GRPO's mean reward exactly 0), then one or two
rollouts of hundreds succeed by chance and the next batch fails again (the real corpus's
``cs336-xiaofei-grpo-lr5e-6-seed0-healthy``: 0 on steps 0-16, 1 of 256 on 17, 2 on 22, 0
on 23-35, learning from step 47). Those blips are not a reward that moved and then froze:
the start has not taken hold yet. A blip is one point off the first value, with a point
at it on either side, of a size a start allows: the run's own smallest non-zero step of
the reward is the lattice (one rollout's success, whatever the batch), and a start whose
batches stay at the first value on a share ``f`` of the points succeeds ``k`` times in a
batch about as a Poisson count of mean ``-ln f`` does; a departure of ``k`` lattice steps
less likely than ``chance`` under it, or two points in a row off the first value, is a
reward that moved. The first departure sets the lattice, so it is a blip whatever its size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def at_least(k: int, mean: float) -> float:
    """The chance that a Poisson count of ``mean`` is ``k`` or more."""
    term = total = math.exp(-mean)
    for i in range(1, k):
        term *= mean / i
        total += term
    return max(0.0, 1.0 - total)


@dataclass
class SlowStart:
    """One reward's start: whether it still holds and how many points it has lasted."""

    first: float  # the run's first value: the level a start sits at
    chance: float  # a departure less likely than this under the start is a move
    points: int = 1  # points since the run's first (blips included) while it holds
    blips: int = 0  # points off the first value among them
    last: float = math.nan  # the previous point's value
    lattice: float = math.inf  # the smallest non-zero step of the reward so far
    holds: bool = True

    def __post_init__(self) -> None:
        self.last = self.first

    def add(self, value: float) -> bool:
        """Whether the start still holds with ``value`` as its next point; once it does
        not, it never does again."""
        if not self.holds:
            return False
        move = abs(value - self.last)
        if move > 0:
            self.lattice = min(self.lattice, move)
        off_before, self.last = self.last != self.first, value
        if value != self.first and (off_before or not self._blip(value)):
            self.holds = False
            return False
        self.points += 1
        self.blips += value != self.first
        return True

    def _blip(self, value: float) -> bool:
        """Whether a departure to ``value`` is a size the start allows: its lattice steps
        no less likely than ``chance`` for a Poisson count whose chance of 0 is the share
        of the start's points at its first value (this one counted off it)."""
        steps = max(1, round(abs(value - self.first) / self.lattice))
        at_first = (self.points - self.blips) / (self.points + 1)
        return at_least(steps, -math.log(at_first)) >= self.chance
