"""Rules over the rewards of logged samples: ``flat_groups`` and ``component_divergence``.

Both read a batch of samples as named columns: the samples ledger's event (core/events.py
``SamplesEvent``: ``columns`` names, ``values[j]`` the cells of column j) and a logged
table with the same column names. The defaults fit verl's rollout samples
(integrations/verl_samples.py: ``uid`` groups, ``score`` and ``reward``, the reward
manager's extra values as ``reward/<name>``) and TRL's GRPO samples
(integrations/trl_samples.py: ``group``, ``reward``, ``reward/<function>``).

- ``flat_groups``: GRPO normalises each reward by its group's mean, so a group whose
  samples all got the same reward has zero advantages and teaches nothing. A batch where
  most groups are flat (all solved, or all failed) means the prompts are too easy or too
  hard for the policy.
- ``component_divergence``: a reward component that moves against the total reward (one
  rises while the other falls), or whose per-sample correlation with the total flips
  sign, is the mark of a policy that learned to please one term of the reward at the
  cost of the others (reward hacking).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trackmux.core.events import Event, SamplesEvent, TableEvent
from trackmux.doctor.detector import Detector, KeyMatcher, Param, compile_pattern
from trackmux.doctor.findings import Finding
from trackmux.doctor.rules.series import first_past, fmt
from trackmux.doctor.stats import Latch, Series, median, robust_sigma

Columns = dict[str, Sequence[Any]]
#: sample keys (or key and column pairs) a rule keeps state for: bounded on user data
MAX_KEYS = 1024


def samples_columns(event: Any) -> Columns:
    assert isinstance(event, SamplesEvent)
    return dict(zip(event.columns, event.values, strict=False))


def table_columns(event: Any) -> Columns:
    assert isinstance(event, TableEvent)
    return {name: [row[i] if i < len(row) else None for row in event.rows]
            for i, name in enumerate(event.columns)}


#: event kind -> its samples as named columns; add a kind here to check its rewards
COLUMNS: dict[str, Callable[[Any], Columns]] = {
    "samples": samples_columns,
    "table": table_columns,
}


def number(cell: Any) -> float | None:
    """A finite number (a boolean as 0 or 1: verl's ``acc`` is one), or None (text,
    missing and non-finite cells)."""
    if isinstance(cell, (int, float)):
        value = float(cell)
        return value if math.isfinite(value) else None
    return None


@functools.lru_cache(maxsize=256)
def _pattern(pattern: str) -> Callable[[str], bool]:
    return compile_pattern(pattern)


def first_column(columns: Columns, patterns: Sequence[str]) -> str | None:
    """The column the first of ``patterns`` (in the user's order: a name, a glob or a
    ``re:`` expression) matches; a plain name is looked up directly."""
    for pattern in patterns:
        if pattern in columns:
            return pattern
        if pattern.startswith("!"):
            continue
        match = _pattern(pattern)
        found = next((name for name in columns if match(name)), None)
        if found is not None:
            return found
    return None


def numeric(cells: Sequence[Any]) -> list[float | None] | None:
    """The cells as numbers, or None when fewer than half of them are numbers (a text
    column such as verl's ``reward/pred``)."""
    values = [number(c) for c in cells]
    return values if sum(v is not None for v in values) * 2 >= max(1, len(values)) else None


def correlation(xs: Sequence[float | None], ys: Sequence[float | None]) -> float | None:
    """Pearson's r over the samples where both are numbers; None when either is constant."""
    pairs = [(x, y) for x, y in zip(xs, ys, strict=False) if x is not None and y is not None]
    if len(pairs) < 3:
        return None
    # scaled to at most 1 first: r does not change, and 1e200 rewards square without
    # overflowing (``x ** 2`` of a float raises OverflowError)
    sx = max(abs(p[0]) for p in pairs) or 1.0
    sy = max(abs(p[1]) for p in pairs) or 1.0
    pairs = [(p[0] / sx, p[1] / sy) for p in pairs]
    n = len(pairs)
    mx = sum(p[0] for p in pairs) / n
    my = sum(p[1] for p in pairs) / n
    sxx = sum((p[0] - mx) * (p[0] - mx) for p in pairs)
    syy = sum((p[1] - my) * (p[1] - my) for p in pairs)
    if sxx <= 1e-12 * n or syy <= 1e-12 * n:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in pairs) / math.sqrt(sxx * syy)


def the_total(column: str) -> str:
    """"the total reward" naming its column, without saying "reward reward"."""
    return "the total reward" if column.lower() in ("reward", "rewards") else \
        f"the total reward ({column})"


def names(items: Sequence[Any], limit: int = 6) -> str:
    shown = ", ".join(str(g) for g in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


#: flat_groups: the fewest batches in a row, the chance under the key's usual share of flat
#: groups at most which they are told at once, and the groups seen before that is judged
SUDDEN_BATCHES = 2
FLAT_CHANCE = 1e-6
FLAT_HISTORY = 40


def _kl_bernoulli(q: float, p: float) -> float:
    """KL(q || p) of two Bernoulli shares (0 < p < 1): the exponent of the Chernoff bound
    on a binomial(n, p) reaching a share ``q`` >= p, exp(-n KL)."""
    out = (1.0 - q) * math.log((1.0 - q) / (1.0 - p)) if q < 1.0 else 0.0
    return out + (q * math.log(q / p) if q > 0.0 else 0.0)


class FlatGroups(Detector):
    """Most GRPO groups of a batch carry no learning signal: every sample of the group got
    the same reward (within ``tolerance``), so its advantages are zero. Over the last
    ``window`` batches of a key, at least ``share`` of the groups (``min_groups`` or more,
    of ``min_size`` samples or more) are flat, ``persist`` batches in a row; or, at once,
    two batches in a row (``SUDDEN_BATCHES``) each at ``share`` or more whose flat groups
    are at most ``FLAT_CHANCE`` likely at the share of flat groups the key's earlier
    batches had (a sequential test: a batch all flat after batches with few flat groups is
    told on its second batch; a run whose groups were mostly flat already waits)."""

    rule = "flat_groups"
    params_spec = {
        "keys": Param(["*", "!val*"], "patterns", "sample and table keys to read"),
        "group_columns": Param(["uid", "group", "group_id"], "patterns",
                               "the group column: the first of these a batch has"),
        "reward_columns": Param(["score", "reward"], "patterns",
                                "the reward column: the first of these a batch has "
                                "(verl's score is the verifier's, before any KL penalty)"),
        "tolerance": Param(1e-6, "positive", "rewards closer than this agree"),
        "share": Param(0.8, "fraction", "share of the groups that must be flat"),
        "min_groups": Param(4, "count", "groups a batch needs to be judged"),
        "min_size": Param(2, "count", "samples a group needs to count"),
        "window": Param(3, "count", "batches of one key pooled"),
        "persist": Param(3, "count", "batches in a row"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.kinds = frozenset(COLUMNS)  # read now: a kind added to COLUMNS counts
        self.match = KeyMatcher(self.params["keys"])
        self.recent: dict[str, list[tuple[int, int, int]]] = {}  # key -> (step, flat, all)
        self.latches: dict[str, Latch] = {}
        #: key -> [flat groups, groups] of its batches before the trailing run of batches
        #: at ``share`` or more, and that run's (step, flat, all)
        self.history: dict[str, list[Any]] = {}

    @staticmethod
    def _sudden(history: list[Any], line: float) -> bool:
        """Whether the trailing run of batches at ``line`` or more cannot be the key's
        usual batches: at least ``SUDDEN_BATCHES`` of them, and their flat
        groups at most ``FLAT_CHANCE`` likely at the share of flat groups the batches
        before them had (a Chernoff bound on each batch's binomial tail; the share with
        one flat and one live group added, so a short history is not read as never
        flat). A run whose batches were nearly all flat already waits for the window."""
        run: list[tuple[int, int, int]] = history[2]
        if len(run) < SUDDEN_BATCHES or history[1] < FLAT_HISTORY:
            return False
        p0 = (history[0] + 1) / (history[1] + 2)
        if p0 >= line:
            return False
        bound = 0.0  # the log of the chance, summed over the batches
        for _, flat, groups in run:
            q = flat / groups
            if q <= p0:
                return False
            bound -= groups * _kl_bernoulli(q, p0)
        return bound <= math.log(FLAT_CHANCE)

    def groups(self, columns: Columns) -> dict[Any, list[float]] | None:
        group = first_column(columns, self.params["group_columns"])
        reward = first_column(columns, self.params["reward_columns"])
        if group is None or reward is None:
            return None
        out: dict[Any, list[float]] = {}
        for g, cell in zip(columns[group], columns[reward], strict=False):
            value = number(cell)
            if value is not None and g is not None:
                out.setdefault(g, []).append(value)
        return {g: v for g, v in out.items() if len(v) >= self.params["min_size"]}

    def update(self, event: Event) -> Sequence[Finding]:
        read = COLUMNS.get(event.kind)
        key = getattr(event, "key", "")
        if read is None or not self.match(key):
            return ()
        groups = self.groups(read(event))
        if not groups or len(groups) < self.params["min_groups"]:
            return ()
        self.note_read(key)
        tol = self.params["tolerance"]
        flat = {g: v[0] for g, v in groups.items() if max(v) - min(v) <= tol}
        if key not in self.recent and len(self.recent) >= MAX_KEYS:
            return ()  # (bounded: a run with more sample keys is judged on its first ones)
        recent = self.recent.setdefault(key, [])
        recent.append((event.step, len(flat), len(groups)))
        line = self.params["share"]
        history = self.history.setdefault(key, [0, 0, []])
        run: list[tuple[int, int, int]] = history[2]
        sudden = False
        if len(flat) >= line * len(groups):  # one more of a run of flat batches
            if len(run) < 64:
                run.append((event.step, len(flat), len(groups)))
            sudden = self._sudden(history, line)
        else:  # the run ended: its batches join those a usual batch is read from
            for _, f, g in (*run, (event.step, len(flat), len(groups))):
                history[0], history[1] = history[0] + f, history[1] + g
            run.clear()
        del recent[:-self.params["window"]]
        pooled = sum(r[1] for r in recent) / sum(r[2] for r in recent)
        latch = self.latches.setdefault(key, Latch(self.params["persist"]))
        onset = run[0][0] if sudden else \
            next((r[0] for r in recent if r[1] >= line * r[2]), event.step)
        if not latch.check(pooled >= line or sudden, onset, sudden):
            return ()
        levels: dict[float, int] = {}
        for value in flat.values():
            levels[round(value, 6)] = levels.get(round(value, 6), 0) + 1
        how = ", ".join(f"{count} all at {fmt(value)}" for value, count in
                        sorted(levels.items(), key=lambda item: -item[1])[:3])
        steps = [r[0] for r in recent]
        where = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
        message = (f"{pooled:.0%} of the GRPO groups in {key} carry no learning signal "
                   f"over {where} (every sample of a group got the same reward, so its "
                   f"advantages are zero), since step {latch.onset}: {len(flat)} of "
                   f"{len(groups)} groups at step {event.step} ({how}; groups "
                   f"{names(list(flat))}); the prompts are too easy or too hard for the "
                   f"policy, or its samples of a prompt no longer differ (collapsed)")
        return [self.finding(latch.onset, [key], message, time=event.time)]


class ComponentDivergence(Detector):
    """A reward component moves against the total reward: over the last ``recent``
    batches against the ``window`` before them, one rises while the other falls (each by
    ``sigmas`` standard errors and ``min_change`` of its level), or the component's
    per-sample correlation with the total flips sign (from ``min_corr`` or more over the
    first ``early`` batches to ``-min_corr`` or less), ``persist`` batches in a row."""

    rule = "component_divergence"
    params_spec = {
        "keys": Param(["*", "!val*"], "patterns", "sample and table keys to read"),
        "reward_columns": Param(["reward", "score"], "patterns",
                                "the total reward: the first of these a batch has"),
        "components": Param(["reward/*", "rewards/*", "reward_*", "!reward/mean",
                             "!reward/std"], "patterns", "reward component columns"),
        "window": Param(20, "count", "batches in the level"),
        "recent": Param(5, "count", "batches in the recent median"),
        "sigmas": Param(4.0, "positive", "a move in units of its standard error (from the "
                        "noise of the batch means)"),
        "min_change": Param(0.1, "fraction", "a move as a share of the larger of its level "
                            "and its recent median"),
        "early": Param(10, "count", "batches of the early correlation"),
        "min_corr": Param(0.3, "fraction", "how strong the correlation is on both sides "
                          "of a flip"),
        "persist": Param(3, "count", "batches in a row"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.kinds = frozenset(COLUMNS)  # read now: a kind added to COLUMNS counts
        self.match = KeyMatcher(self.params["keys"])
        self.components = KeyMatcher(self.params["components"])
        size = self.params["window"] + self.params["recent"]
        self.size = size
        self.means: dict[tuple[str, str], Series] = {}
        self.corrs: dict[tuple[str, str], Series] = {}
        self.latches: dict[tuple[str, str, str], Latch] = {}

    def latch(self, key: str, column: str, what: str) -> Latch:
        latch = self.latches.get((key, column, what))
        if latch is None:
            latch = self.latches[(key, column, what)] = Latch(self.params["persist"])
        return latch

    def update(self, event: Event) -> Sequence[Finding]:
        read = COLUMNS.get(event.kind)
        key = getattr(event, "key", "")
        if read is None or not self.match(key):
            return ()
        columns = read(event)
        total_name = first_column(columns, self.params["reward_columns"])
        if total_name is None:
            return ()
        total = numeric(columns[total_name])
        if total is None:
            return ()
        self.note_read(key)
        out: list[Finding] = []
        self.add(key, total_name, total, event.step)
        for name in columns:
            if name == total_name or not self.components(name):
                continue
            values = numeric(columns[name])
            if values is None:
                continue
            self.add(key, name, values, event.step)
            r = correlation(values, total)
            if r is not None and ((key, name) in self.corrs or len(self.corrs) < MAX_KEYS):
                self.corrs.setdefault((key, name), Series(self.params["recent"])).add(
                    event.step, r, self.params["early"])
            found = self.check_trend(key, name, total_name) or \
                self.check_flip(key, name, total_name)
            if found is not None:
                found.time = event.time
                out.append(found)
        return out

    def add(self, key: str, name: str, values: Sequence[float | None], step: int) -> None:
        kept = [v for v in values if v is not None]
        if kept and ((key, name) in self.means or len(self.means) < MAX_KEYS):
            mean = math.fsum(v / len(kept) for v in kept)  # (no overflow on 1e308 cells)
            self.means.setdefault((key, name), Series(self.size)).add(step, mean)

    def move(self, s: Series) -> tuple[int, float, float]:
        """(+1 rose, -1 fell, 0 neither; the level; the recent median)."""
        recent_n = self.params["recent"]
        before = s.before_tail(recent_n, self.params["window"])
        level, recent = median(before), median(s.tail(recent_n))
        change = recent - level
        # the noise of one batch mean, from the steps between batches: a trend (or the
        # move itself) inside the level's window does not inflate it as a spread would
        steps = [b - a for a, b in itertools.pairwise(before)]
        noise = robust_sigma(steps) / math.sqrt(2) if len(steps) >= 2 else 0.0
        # the standard error of the difference of the two medians
        noise *= 1.2533 * math.sqrt(1 / recent_n + 1 / max(1, len(before)))
        big = abs(change) >= self.params["sigmas"] * noise and \
            abs(change) >= self.params["min_change"] * max(abs(level), abs(recent)) and \
            abs(change) > 1e-12
        return (1 if change > 0 else -1) if big else 0, level, recent

    def check_trend(self, key: str, name: str, total_name: str) -> Finding | None:
        comp, total = self.means.get((key, name)), self.means.get((key, total_name))
        need = self.params["window"] + self.params["recent"]
        if comp is None or total is None or comp.count < need or total.count < need or \
                comp.steps[-1] != total.steps[-1]:
            return None
        c_dir, c_level, c_recent = self.move(comp)
        t_dir, t_level, t_recent = self.move(total)
        steps = list(comp.steps)
        onset = steps[-self.params["recent"]]
        latch = self.latch(key, name, "trend")
        if not latch.check(c_dir * t_dir < 0, onset) or self.latch(key, name, "flip").active:
            return None  # (a component already found turning against the total: once)
        word = {1: "rose", -1: "fell"}
        since = f"steps {steps[0]}-{steps[-self.params['recent'] - 1]}"
        return self.finding(latch.onset, [key], (
            f"the reward component {name} in {key} {word[c_dir]} from {fmt(c_level)} to "
            f"{fmt(c_recent)} while {the_total(total_name)} {word[t_dir]} from "
            f"{fmt(t_level)} to {fmt(t_recent)} (level over {since}, since step "
            f"{latch.onset}): the policy gains on one term of the reward at the cost of "
            f"the others"))

    def check_flip(self, key: str, name: str, total_name: str) -> Finding | None:
        s = self.corrs.get((key, name))
        recent_n, early_n = self.params["recent"], self.params["early"]
        if s is None or len(s.first) < early_n or s.count < early_n + recent_n:
            return None
        early, recent = median(s.first), median(s.tail(recent_n))
        line = self.params["min_corr"]
        flipped = (early >= line and recent <= -line) or (early <= -line and recent >= line)
        sign = 1.0 if early > 0 else -1.0
        onset = first_past(s, recent_n, lambda v: v * sign <= -line)
        latch = self.latch(key, name, "flip")
        if not latch.check(flipped, onset) or self.latch(key, name, "trend").active:
            return None
        return self.finding(latch.onset, [key], (
            f"the reward component {name} in {key} turned against "
            f"{the_total(total_name)}: their correlation over the samples of a batch flipped from "
            f"{early:+.2f} (the first {early_n} batches) to {recent:+.2f} (the last "
            f"{recent_n}, since step {latch.onset}): samples that score higher on it now "
            f"score lower in total"))


BUILTIN: tuple[type[Detector], ...] = (FlatGroups, ComponentDivergence)
