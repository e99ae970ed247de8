"""Which hyperparameters moved a metric across runs, with how sure we can be.

Method (numpy only, stated in the UI): the target is each run's final value of the
metric (the mean of its last 10% of points, steadier than the last noisy point of an RL
reward). For each config key that differs between the runs:

- a numeric key gets Spearman's rank correlation with the target (-1..1; the sign says
  in which direction it moved the metric);
- a key with text or mixed values gets the correlation ratio (eta, 0..1) of the target's
  ranks over the key's values: how much of the rank variance the groups explain.

Importance is the absolute value. Uncertainty: a 90% percentile bootstrap interval over
runs (1,000 resamples of the runs with replacement, seeded, so the page is stable). With
a handful of runs the intervals are wide, and the page says so rather than hiding it. A
random forest's permutation importance would need scikit-learn and many more runs than a
sweep of RL runs usually has; a rank statistic is honest at n = 5..100.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # numpy.typing costs 0.1-0.2 s of `trackmux ui`'s start
    import numpy.typing as npt

METHOD = ("Target: each run's final value of the metric (mean of its last 10% of points). "
          "Numeric hyperparameters: Spearman's rank correlation with the target (signed); "
          "others: the correlation ratio eta of the target's ranks over their values. "
          "Importance is the absolute value; the interval is a 90% percentile bootstrap "
          "over runs (1,000 resamples). Few runs give wide intervals.")
BOOTSTRAP = 1000
LEVEL = 0.90
SEED = 20260


@dataclass(frozen=True)
class Importance:
    key: str
    method: str  # "spearman" or "eta"
    value: float  # rho (signed) or eta
    low: float
    high: float
    n: int

    @property
    def importance(self) -> float:
        return abs(self.value)

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "method": self.method, "value": self.value,
                "low": self.low, "high": self.high, "n": self.n,
                "importance": self.importance}


def ranks(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Ranks with ties given their average rank (as Spearman's rho needs)."""
    order = np.argsort(values, kind="mergesort")
    ranked = np.empty(values.size)
    sorted_values = values[order]
    i = 0
    while i < values.size:
        j = i
        while j + 1 < values.size and sorted_values[j + 1] == sorted_values[i]:
            j += 1
        ranked[order[i:j + 1]] = (i + j) / 2.0
        i = j + 1
    return ranked


def spearman(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> float:
    rx, ry = ranks(x), ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / denom) if denom > 0 else 0.0


def eta(groups: npt.NDArray[np.int64], y: npt.NDArray[np.float64]) -> float:
    """Correlation ratio of the ranks of ``y`` over group labels ``groups``."""
    r = ranks(y)
    total = float(((r - r.mean()) ** 2).sum())
    if total <= 0:
        return 0.0
    between = 0.0
    for g in np.unique(groups):
        member = r[groups == g]
        between += member.size * float((member.mean() - r.mean()) ** 2)
    return math.sqrt(between / total)


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
               for v in values)


def importances(configs: list[dict[str, Any]], targets: list[float | None]
                ) -> list[Importance]:
    """Every differing config key's importance for ``targets``, most important first.

    ``configs`` are flat (``a.b.c`` keys), one per run; runs without a finite target and
    keys a run lacks are left out of that key's statistic."""
    keys: list[str] = []
    for config in configs:
        keys.extend(k for k in config if k not in keys)
    rng = np.random.default_rng(SEED)
    out = []
    for key in keys:
        pairs = [(c[key], t) for c, t in zip(configs, targets, strict=True)
                 if key in c and t is not None and math.isfinite(t)]
        if len(pairs) < 3:
            continue
        values = [p[0] for p in pairs]
        y = np.array([p[1] for p in pairs], dtype=np.float64)
        if _numeric(values):
            x = np.array(values, dtype=np.float64)
            if np.unique(x).size < 2:
                continue
            out.append(_bootstrap(key, "spearman", lambda i, x=x, y=y: spearman(x[i], y[i]),
                                  y.size, rng))
        else:
            labels = [repr(v) for v in values]
            if len(set(labels)) < 2:
                continue
            codes = np.unique(np.array(labels), return_inverse=True)[1].astype(np.int64)
            out.append(_bootstrap(key, "eta", lambda i, c=codes, y=y: eta(c[i], y[i]), y.size,
                                  rng))
    out.sort(key=lambda imp: -imp.importance)
    return out


def _bootstrap(key: str, method: str, stat: Any, n: int,
               rng: np.random.Generator) -> Importance:
    full = stat(np.arange(n))
    draws = np.array([stat(rng.integers(0, n, n)) for _ in range(BOOTSTRAP)])
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return Importance(key, method, full, float(low), float(high), n)
