"""Robust statistics over short windows: median, MAD, and a per-key episode latch.

Curves of RL runs are noisy and heavy-tailed (a grad norm spike, a batch of hard prompts):
medians and the median absolute deviation move little with one wild point, where a mean
and a standard deviation would. The latch makes a condition count only once it held for
``persist`` checks in a row, and raises it once per episode (until it cleared as long).

Every number here may be any finite float a trainer logged (1e308, -1e308, 1e-320): the
arithmetic never overflows into an exception (``x * x`` and halves before sums, not
``x ** 2`` or ``(a + b) / 2``), and a difference too large for a float is inf, which every
comparison handles.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

MAD_TO_SIGMA = 1.4826  # MAD of a normal sample times this estimates its sigma


def median(values: Iterable[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return float("nan")
    mid = n // 2
    if n % 2:
        return ordered[mid]
    a, b = ordered[mid - 1], ordered[mid]
    return a if a == b else 0.5 * a + 0.5 * b  # halves first: 1e308 + 1e308 overflows


def robust_sigma(values: Iterable[float]) -> float:
    """MAD scaled to a normal sigma (inf when the spread exceeds a float)."""
    data = list(values)
    center = median(data)
    return MAD_TO_SIGMA * median(abs(v - center) for v in data)


def ratio(a: float, b: float) -> float:
    """``a / b`` that is inf (or 0) where the quotient leaves a float, never raising."""
    if b == 0:
        return math.inf if a > 0 else -math.inf if a < 0 else math.nan
    try:
        return a / b
    except (OverflowError, ZeroDivisionError):
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


def finite(value: object) -> float | None:
    """A logged value as a finite float, or None (NaN, inf, an int beyond a float, text)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            return None
    return None


class Series:
    """The last ``size`` (step, value) points of one key."""

    __slots__ = ("count", "first", "memo", "steps", "values")

    def __init__(self, size: int) -> None:
        self.steps: deque[int] = deque(maxlen=size)
        self.values: deque[float] = deque(maxlen=size)
        self.count = 0
        self.first: list[float] = []  # the run's first points (an early level)
        self.memo: tuple[int, object, object] = (-1, None, None)  # (count, key, value)

    def add(self, step: int, value: float, keep_first: int = 0) -> None:
        self.steps.append(step)
        self.values.append(value)
        self.count += 1
        if len(self.first) < keep_first:
            self.first.append(value)

    def tail(self, n: int) -> list[float]:
        values = self.values
        return [values[i] for i in range(max(0, len(values) - n), len(values))]

    def before_tail(self, n: int, size: int) -> list[float]:
        """The ``size`` points before the last ``n``."""
        values = self.values
        end = len(values) - n
        return [values[i] for i in range(max(0, end - size), max(0, end))]

    def points(self, steps: int, least: int, skip: int = 0) -> int:
        """How many points, before the last ``skip``, cover the last ``steps`` steps, and
        at least ``least``: a window in steps, so a run that logs every 20-50 steps is
        judged on a few points, and one that logs every step on ``steps`` of them. More
        than there are (so the caller waits) while the series may not yet reach back
        ``steps`` steps."""
        stamps = self.steps
        end = len(stamps) - skip
        if end <= 0:
            return max(1, least)
        # the points within ``steps`` of the last one (steps rise along a series: bisect)
        n = end - bisect.bisect_right(stamps, stamps[end - 1] - steps, 0, end)
        if n == end and len(stamps) < (self.steps.maxlen or 0):
            return max(end + 1, least)  # the start of the run: not yet covered
        return max(n, least)

    def value_at(self, step: int) -> float | None:
        """The value logged at ``step`` (the last one, if a step logged twice)."""
        stamps = self.steps
        for i in range(len(stamps) - 1, -1, -1):
            if stamps[i] == step:
                return self.values[i]
            if stamps[i] < step:
                break
        return None


class Latch:
    """A condition per key that must hold ``persist`` checks in a row to fire, fires once,
    and re-arms only after it was false ``rearm`` checks in a row (default: 20, and at
    least ``persist``), so a curve that hovers at the threshold is one episode, not ten."""

    __slots__ = ("active", "bad", "good", "onset", "persist", "rearm")

    def __init__(self, persist: int, rearm: int = 20) -> None:
        self.persist = persist
        self.rearm = max(persist, rearm)
        self.bad = 0
        self.good = 0
        self.active = False
        self.onset = 0

    def check(self, condition: bool, step: int, strong: bool = False) -> bool:
        """True once, when ``condition`` has held ``persist`` checks in a row, or at once
        when it holds ``strong``ly: a change so many times the curve's noise past the
        line that waiting for more points would only repeat what the first one says
        (the recent median a condition is judged on already outvotes a lone outlier)."""
        if condition:
            if self.bad == 0:
                self.onset = step
            self.bad += 1
            self.good = 0
            if not self.active and (self.bad >= self.persist or strong):
                self.active = True
                return True
            return False
        self.good += 1
        self.bad = 0
        if self.active and self.good >= self.rearm:
            self.active = False
        return False


class SlidingBest:
    """The largest (or, with ``lowest``, smallest) of the last ``size`` items by their
    first element, in O(1) amortized per item: a rule's anchored level over a long
    lookback costs no more than a short one."""

    __slots__ = ("count", "items", "lowest", "size")

    def __init__(self, size: int, lowest: bool = False) -> None:
        self.size, self.lowest = size, lowest
        self.items: deque[tuple[int, tuple[Any, ...]]] = deque()  # (index, item), best first
        self.count = 0

    def add(self, item: tuple[Any, ...]) -> None:
        key = item[0]
        items = self.items
        if self.lowest:
            while items and items[-1][1][0] >= key:
                items.pop()
        else:
            while items and items[-1][1][0] <= key:
                items.pop()
        items.append((self.count, item))
        self.count += 1
        while items[0][0] <= self.count - 1 - self.size:
            items.popleft()

    def best(self) -> tuple[Any, ...]:
        return self.items[0][1]

    def forget(self, old: Callable[[tuple[Any, ...]], bool]) -> None:
        """Drop the oldest items while ``old`` says so (a window in steps rather than in
        items: an item's step is part of it); the newest is always kept. The best of the
        rest is then the best of the newer items, as the deque holds them in order."""
        items = self.items
        while len(items) > 1 and old(items[0][1]):
            items.popleft()


def trend(steps: Sequence[int], values: Sequence[float]) -> tuple[float, float, float]:
    """(slope per step, its t statistic, its standard error) of a least-squares line;
    values are scaled by their largest magnitude first, so 1e200 rewards square without
    overflow."""
    n = len(values)
    scale = max((abs(v) for v in values), default=0.0)
    if n < 4 or scale == 0 or steps[-1] == steps[0]:
        return 0.0, 0.0, 0.0
    ys = [v / scale for v in values]
    mx = sum(steps) / n
    my = sum(ys) / n
    sxx = sum((x - mx) * (x - mx) for x in steps)
    slope = sum((x - mx) * (y - my) for x, y in zip(steps, ys, strict=True)) / sxx
    resid = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(steps, ys, strict=True))
    se = (resid / (n - 2) / sxx) ** 0.5
    t = slope / se if se > 0 else (0.0 if slope == 0 else math.copysign(math.inf, slope))
    return slope * scale, t, se * scale


# -- the noise a run shows, serial correlation included ----------------------------------
#: a median of n points varies about this many times as much as their mean (a normal
#: sample's asymptotic efficiency, pi/2 in variance; nearer 1 for correlated points)
MEDIAN_VARIANCE = math.pi / 2
#: the largest lag-1 correlation believed (a random walk has none finite)
MAX_PHI = 0.97


def diff_sigma(values: Sequence[float], lag: int = 1) -> float:
    """The robust sigma of the differences ``x[t] - x[t-lag]`` (MAD about their median,
    so a steady trend, which shifts every difference alike, adds nothing)."""
    diffs = [values[i] - values[i - lag] for i in range(lag, len(values))]
    if len(diffs) < 2:
        return 0.0
    return robust_sigma(diffs)


def mean_variance(n: int, phi: float) -> float:
    """Var of the mean of ``n`` consecutive points of an AR(1) with unit marginal variance
    and lag-1 correlation ``phi``: (1/n) (1 + 2 sum_h (1 - h/n) phi^h)."""
    if n <= 1:
        return 1.0
    if phi <= 0.0:
        return 1.0 / n
    total, power = float(n), 1.0
    for h in range(1, n):
        power *= phi
        if power < 1e-12:
            break
        total += 2.0 * (n - h) * power
    return min(1.0, total / (n * n))


def block_covariance(k: int, m: int, gap: int, phi: float) -> float:
    """Cov of the mean of ``m`` points and the mean of the ``k`` points that follow them
    ``gap`` points later, for an AR(1) with unit marginal variance."""
    if phi <= 0.0 or k < 1 or m < 1:
        return 0.0
    one = 1.0 - phi
    return phi ** (gap + 1) * (1.0 - phi ** m) * (1.0 - phi ** k) / (one * one * k * m)


class Noise:
    """The noise of one curve as its own points show it: a robust marginal sigma and a
    lag-1 correlation, from the differences of its last ``size`` points.

    A curve's points are not independent (a batch mix that drifts, a schedule's wobble):
    with correlation phi, a window of n points holds about n (1 - phi) / (1 + phi)
    independent ones, and its spread alone underestimates how far its median wanders. So
    the marginal sigma is read from lag-1 differences (Var = 2 sigma^2 (1 - phi)), phi from
    the ratio of lag-2 to lag-1 difference variances (1 + phi), both robust (MAD) and blind
    to a steady trend; a change between two windows is then judged against the standard
    deviation of that change under such noise (:meth:`shift`), not against the points'
    spread. Estimated every ``every`` points over the points before the ones being judged.
    """

    __slots__ = ("count", "every", "move", "phi", "sigma", "values")

    def __init__(self, size: int = 160, every: int = 16) -> None:
        self.values: deque[float] = deque(maxlen=size)
        self.every = every
        self.count = 0
        self.sigma = 0.0
        self.phi = 0.0
        #: the robust sigma of a move from one point to the next (0: the points move in
        #: equal steps, or not at all, and say nothing of their noise)
        self.move = 0.0

    def add(self, value: float) -> None:
        self.values.append(value)
        self.count += 1

    def estimate(self, skip: int = 0, least: int = 12) -> bool:
        """Re-estimate (every ``every`` points) from the points before the last ``skip``;
        False while fewer than ``least`` points are there to read.

        Half the variance of the lag-L differences is sigma^2 (1 - phi^L) for an AR(1);
        phi is the largest that lags 2, 4 and 8 give against lag 1 (a short history
        underestimates a strong correlation far more often than it overestimates it, and
        an underestimate is what raises false alarms), then sigma^2 = gamma(1) / (1 - phi).
        Fewer than 40 points: phi at least 0.5 (too few differences to tell)."""
        n = len(self.values) - skip
        if n < least:
            return False
        if self.count % self.every and self.sigma > 0:
            return True
        data = [self.values[i] for i in range(n)]
        g1 = diff_sigma(data, 1)
        self.move = g1
        g1 = 0.5 * g1 * g1
        phi = 0.0
        for lag in (2, 4, 8):
            if n - lag < 8 or g1 <= 0:
                break
            gl = diff_sigma(data, lag)
            phi = max(phi, _ar1_phi(0.5 * gl * gl / g1, lag))
        if n < 40:
            phi = max(phi, 0.5)
        self.phi = phi
        self.sigma = math.sqrt(g1 / (1.0 - phi)) if g1 > 0 else robust_sigma(data)
        return True

    def of_median(self, n: int) -> float:
        """The sigma of the median of ``n`` consecutive points."""
        return self.sigma * math.sqrt(MEDIAN_VARIANCE * mean_variance(n, self.phi))

    def shift(self, recent: int, window: int, gap: int = 0) -> float:
        """The sigma of (median of the last ``recent`` points) - (median of the
        ``window`` points that end ``gap`` points before them) under this noise."""
        phi = self.phi
        var = (mean_variance(recent, phi) + mean_variance(window, phi)
               - 2.0 * block_covariance(recent, window, gap, phi))
        return self.sigma * math.sqrt(MEDIAN_VARIANCE * max(var, 0.0))


def _ar1_phi(ratio: float, lag: int) -> float:
    """The phi of an AR(1) whose lag-``lag`` to lag-1 variogram ratio,
    (1 - phi^lag) / (1 - phi), is ``ratio`` (bisection; the ratio rises with phi)."""
    if not ratio > 1.0:
        return 0.0
    if ratio >= (1.0 - MAX_PHI ** lag) / (1.0 - MAX_PHI):
        return MAX_PHI
    low, high = 0.0, MAX_PHI
    for _ in range(30):
        mid = 0.5 * (low + high)
        if (1.0 - mid ** lag) / (1.0 - mid) < ratio:
            low = mid
        else:
            high = mid
    return low


#: a change this many times the distance its rule's line asks for in the curve's noise
#: (its ``sigmas``) is conclusive on one check: the latch need not wait ``persist``
STRONG = 2.0

#: how far, in sigmas of a window's median, the lowest (or highest) of the rolling levels
#: a rule anchors to sits from their typical one: an anchored level is the extreme of many
#: windows, so a change measured from it starts that far out under noise alone
ANCHORED = 2.0


def ar1_t(t: float, phi: float) -> float:
    """A least-squares slope's t statistic corrected for AR(1) residuals: with lag-1
    correlation phi a line's n points hold about n (1 - phi) / (1 + phi) independent
    ones, so its standard error is that much larger in square root."""
    return t * math.sqrt((1.0 - phi) / (1.0 + phi)) if phi > 0 else t



#: the fewest points a sudden change is confirmed on (:func:`sudden`): two in a row past
#: the line, so a lone spike (one bad batch, a logging glitch) is never a finding alone
SUDDEN_POINTS = 2
#: the most (:func:`sudden_run`): a run logged every step shows a fault's ramp a point at
#: a time, and this many points past the line are what a recent median of 5 points and
#: the latch's 3 checks would wait for anyway
SUDDEN_MOST = 8
#: ... and each of them this many times as far from the level as the curve went in the
#: points before the change began: heavy tails (a hand-written loop's entropy of 8
#: rollouts that jumps 7x for two steps) are read from the curve's own extremes, not from
#: a normal's odds. 1.5 let two Student-t (2.5 degrees of freedom) rewards in a row through
#: on 1 of 1,000 generated healthy runs; under such tails a point passes 2x the largest of
#: 150 about 1/150 * 2^-2.5 of the time, two in a row about 1.4e-6
SUDDEN_TAIL = 2.0
#: a point this share of the way from the level to the line is part of the change
SUDDEN_BEGUN = 0.25


def sudden_tail(points: int) -> float:
    """How many times as far as the curve's earlier extremes each of ``points`` points in a
    row must be: ``SUDDEN_TAIL`` for two, ``SUDDEN_TAIL ** (2 / points)`` for more. Under a
    tail of index a (Student-t: its degrees of freedom) k points each T times past the
    largest of N earlier ones come about (N^-1 T^-a)^k of the time, so T^k held at
    SUDDEN_TAIL^2 keeps T's share of the odds that of two points, and every point more
    divides them by N again (150 points: 3 in a row at 1.59x about 2e-9)."""
    return float(SUDDEN_TAIL ** (SUDDEN_POINTS / max(SUDDEN_POINTS, points)))


def sudden(last: Sequence[float], history: Sequence[float], noise: Noise | None,
           level: float, line: float, direction: int, far: float,
           own_spread: bool = True) -> bool:
    """Whether the last points are conclusive on their own: every one past ``line`` (in
    ``direction``, +1 up or -1 down), their mean ``far`` standard deviations of the mean
    of that many consecutive points beyond ``level`` under the curve's own noise
    (:class:`Noise`: robust sigma and lag-1 correlation, read before them; or the
    history's own robust spread where smaller, unless ``own_spread`` is False: values
    folded about a target, such as a distance from 1, spread less than the curve's noise
    they come from), and every one ``sudden_tail(len(last))`` times as far from ``level``
    as any point of ``history`` (the points before them, less the trailing ones already
    part of the way to the line).

    The confirmation then scales with the size of the change, as a sequential test's
    would: a shift of many sigmas, beyond anything the curve did before, is told on
    ``SUDDEN_POINTS`` points, however many steps its rule's recent median spans on a
    densely logged run and however many more points a sparse log would make it wait; a
    smaller one waits for the recent median and the latch's ``persist``. A correlated
    curve moves its points together, so two of them weigh less there
    (``mean_variance``)."""
    if noise is None or noise.sigma <= 0 or not last or \
            any(direction * (v - line) < 0 for v in last):
        return False
    before = _before_change(history, level, line, direction)
    if before is None:
        return False
    return _conclusive(last, before, noise, level, direction, far,
                       _point_sigma(noise, before, own_spread))


def sudden_run(values: Sequence[float], noise: Noise | None, level: float, line: float,
               direction: int, far: float, own_spread: bool = True) -> int:
    """The fewest of the last points, ``SUDDEN_POINTS`` up to ``SUDDEN_MOST``, that
    :func:`sudden` finds conclusive (``values``: the curve up to now, last point last;
    0: none). A fault that ramps in over a few steps on a run logged every step puts its
    first points past the line only just past it; each point more past the line is more
    evidence (its mean's deviation shrinks as ``mean_variance`` of that many points, its
    tail odds as sudden_tail says), so such a change is told after a few points past the
    line rather than once half a recent median of many points is."""
    if noise is None or noise.sigma <= 0:
        return 0
    run = 0
    for v in reversed(values):  # the trailing points past the line
        if direction * (v - line) < 0 or run >= SUDDEN_MOST:
            break
        run += 1
    if run < SUDDEN_POINTS or len(values) <= run:
        return 0
    if direction * (line - level) <= 0:  # (a line short of its level: two points only)
        last = values[len(values) - SUDDEN_POINTS:]
        history = values[:len(values) - SUDDEN_POINTS]
        return SUDDEN_POINTS if sudden(last, history, noise, level, line, direction, far,
                                       own_spread) else 0
    # every point of the run is past the line, so past where the change began: the
    # history before the change is the same for each number of points judged
    before = _before_change(values[:len(values) - run], level, line, direction)
    if before is None:
        return 0
    sigma = _point_sigma(noise, before, own_spread)
    for k in range(SUDDEN_POINTS, run + 1):
        if _conclusive(values[len(values) - k:], before, noise, level, direction, far,
                       sigma):
            return k
    return 0


def _before_change(history: Sequence[float], level: float, line: float,
                   direction: int) -> list[float] | None:
    """``history`` less its trailing points part of the way to the line (None: fewer than
    12 points are left to read the curve's extremes from)."""
    begun = level + SUDDEN_BEGUN * (line - level)
    before = list(history)
    while before and direction * (before[-1] - begun) >= 0:
        before.pop()
    return before if len(before) >= 12 else None


def _point_sigma(noise: Noise, before: Sequence[float], own_spread: bool) -> float:
    """A point's sigma: the AR(1) model's marginal one, or the points' own spread where
    that is smaller (a history with a step or a bend reads as a strong correlation, and
    the model's sigma, its lag-1 spread over 1 - phi, then outgrows what the points
    show)."""
    spread = robust_sigma(before) if own_spread else 0.0
    return min(noise.sigma, spread) if spread > 0 else noise.sigma


def _conclusive(last: Sequence[float], before: Sequence[float], noise: Noise, level: float,
                direction: int, far: float, sigma: float) -> bool:
    """``last`` (all past the line) far enough, in their mean and each of them, to tell
    the change on them alone (:func:`sudden`'s two tests)."""
    mean = math.fsum(v / len(last) for v in last)
    sd = sigma * math.sqrt(mean_variance(len(last), noise.phi))
    if direction * (mean - level) < far * sd:
        return False
    worst = max(0.0, max(direction * (v - level) for v in before))
    tail = sudden_tail(len(last))
    return all(direction * (v - level) >= tail * worst for v in last)


#: how far a logged mean of 0/1 rewards may sit from its fraction k/n: a few float32 steps
#: at 1.0 (trainers average in float32, then average those means)
LATTICE_TOLERANCE = 2.5e-7


def lattice_count(values: Sequence[float], most: int) -> int | None:
    """The least ``n`` (up to ``most``) for which every value is a multiple of ``1/n``
    within LATTICE_TOLERANCE: for means of 0/1 rewards, how many each is a mean of, or a
    divisor of that count (an error on the safe side); a reward of partial credit (thirds)
    shows its count times its own steps (3x), so a caller takes the least count the
    batch's keys show. None when a value is outside [0, 1] or no ``n`` fits: the values
    are no such means. A false fit of continuous values needs each of them within the
    tolerance of a fraction: with three values about 1e-4 of the time for ``most`` 8192."""
    if not values or any(not 0.0 <= v <= 1.0 for v in values):
        return None
    for n in range(1, most + 1):
        if all(abs(v * n - round(v * n)) <= LATTICE_TOLERANCE * n for v in values):
            return n
    return None


def share_change_z(before: float, after: float, count: int) -> float:
    """The change of a mean of ``count`` independent values in [0, 1] from ``before`` to
    ``after``, in standard errors of such a change (positive: a rise). The variance of one
    such value with mean p is at most p(1 - p) (the Bhatia-Davis bound, reached by 0/1
    values), so the error is never understated; the pooled p is the one of no change."""
    pooled = 0.5 * before + 0.5 * after
    variance = pooled * (1.0 - pooled) * 2.0 / count
    if variance <= 0.0:
        return 0.0
    return (after - before) / math.sqrt(variance)
