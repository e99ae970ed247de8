"""Binning at the door: a distribution becomes counts, edges and a few moments, once.

The trainer's values (often a million per step) never reach the spool; only ``bins``
counts, ``bins + 1`` edges and count/min/max/mean/std do. NaN and +/-inf cannot be
binned, so they are counted apart (``nan``, ``inf``, ``neginf``) and kept with the event,
never dropped silently. numpy (and torch, for tensors) is imported only when a histogram
is logged, so ``import trackmux`` stays light.

Accepted (documented in docs/values.md): a list/tuple of numbers, a numpy array, a torch
tensor on any device and of any dtype (bfloat16 included; it is read as float32), or a
precomputed ``(counts, edges)`` pair with ``len(edges) == len(counts) + 1``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: wandb keeps at most 512 bins; the same limit everywhere keeps every backend native.
MAX_BINS = 512
#: the quantiles core derives from a histogram (fallback and mlflow scalars).
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


@dataclass(frozen=True)
class Binned:
    """One histogram: ``counts[i]`` finite values fell in ``[edges[i], edges[i + 1])``."""

    counts: tuple[int, ...]
    edges: tuple[float, ...]
    count: int
    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    nan: int = 0
    inf: int = 0
    neginf: int = 0


def check_bins(bins: object) -> int:
    if isinstance(bins, bool) or not isinstance(bins, int):
        raise TypeError(f"bins must be an int, got {type(bins).__name__}")
    if not 1 <= bins <= MAX_BINS:
        raise ValueError(f"bins must be between 1 and {MAX_BINS}, got {bins}")
    return bins


def _as_numpy(values: object) -> Any:
    import numpy as np

    module = type(values).__module__.split(".")[0]
    if module == "torch":
        tensor = values.detach()  # type: ignore[attr-defined]
        if tensor.is_complex():
            raise TypeError("values is a complex tensor; histograms take real numbers")
        if tensor.is_floating_point() and tensor.dtype.itemsize < 4:  # bf16/fp16/fp8
            import torch

            tensor = tensor.to(dtype=torch.float32)
        return tensor.cpu().reshape(-1).numpy()
    try:
        array = np.asarray(values)
    except (ValueError, TypeError) as exc:
        raise TypeError(f"values must be a list of numbers, a numpy array or a torch tensor: "
                        f"{exc}") from exc
    if array.dtype == np.bool_:
        array = array.astype(np.uint8)
    if array.dtype.kind not in "iuf":
        raise TypeError(f"values must hold real numbers, got dtype {array.dtype} "
                        f"({type(values).__name__})")
    return array.reshape(-1)


def bin_values(values: object, bins: int) -> Binned:
    """Bin ``values`` into ``bins`` equal-width bins over their finite range."""
    import numpy as np

    array = _as_numpy(values)
    if array.size == 0:
        raise ValueError("values is empty; a histogram needs at least one value")
    nan = inf = neginf = 0
    if array.dtype.kind == "f":
        finite = np.isfinite(array)
        if not finite.all():
            nan = int(np.isnan(array).sum())
            inf = int(np.isposinf(array).sum())
            neginf = int(np.isneginf(array).sum())
            array = array[finite]
        work = array if array.dtype.itemsize >= 4 else array.astype(np.float32)
    else:
        work = array
    if work.size == 0:
        return Binned((), (), 0, None, None, None, None, nan, inf, neginf)
    low, high = float(work.min()), float(work.max())
    lo, hi = (low - 0.5, high + 0.5) if low == high else (low, high)
    counts = _equal_width_counts(work, lo, hi, bins)
    edges = np.linspace(lo, hi, bins + 1)
    mean = float(work.mean(dtype=np.float64))
    calc = work.dtype if work.dtype.kind == "f" else np.dtype(np.float64)
    deviation = work.astype(calc, copy=False) - calc.type(mean)
    std = math.sqrt(float(np.square(deviation).sum()) / work.size)  # pairwise summation
    return Binned(tuple(counts.tolist()), tuple(edges.tolist()), int(work.size), low, high,
                  mean, std, nan, inf, neginf)


def _equal_width_counts(work: Any, lo: float, hi: float, bins: int) -> Any:
    """np.histogram's counts for equal bins (last bin closed), at about half its cost: one
    scaled index per value in the values' own float precision, then a bincount. A value
    within float rounding of an inner edge may land in the neighbouring bin."""
    import numpy as np

    calc = work.dtype if work.dtype.kind == "f" else np.dtype(np.float64)
    scale = calc.type(bins / (hi - lo))
    index = ((work.astype(calc, copy=False) - calc.type(lo)) * scale).astype(np.intp)
    np.clip(index, 0, bins - 1, out=index)
    return np.bincount(index, minlength=bins)


def from_counts(counts: object, edges: object) -> Binned:
    """A histogram the caller binned already; moments are estimated from bin centres."""
    if isinstance(counts, (str, bytes)) or isinstance(edges, (str, bytes)):
        raise TypeError("values as (counts, edges) must hold numbers, not strings")
    count_list = [_count(c, i) for i, c in enumerate(_listed(counts, "counts"))]
    edge_list = [_edge(e, i) for i, e in enumerate(_listed(edges, "edges"))]
    if not count_list:
        raise ValueError("counts is empty; a histogram needs at least one bin")
    if len(count_list) > MAX_BINS:
        raise ValueError(f"counts has {len(count_list)} bins; the limit is {MAX_BINS}")
    if len(edge_list) != len(count_list) + 1:
        raise ValueError(f"edges must have len(counts) + 1 = {len(count_list) + 1} values, "
                         f"got {len(edge_list)}")
    if any(b <= a for a, b in itertools.pairwise(edge_list)):
        raise ValueError("edges must be strictly increasing")
    total = sum(count_list)
    if total == 0:
        return Binned(tuple(count_list), tuple(edge_list), 0, None, None, None, None)
    centres = [(a + b) / 2 for a, b in itertools.pairwise(edge_list)]
    mean = sum(c * x for c, x in zip(count_list, centres, strict=True)) / total
    var = sum(c * (x - mean) ** 2 for c, x in zip(count_list, centres, strict=True)) / total
    used = [i for i, c in enumerate(count_list) if c]
    return Binned(tuple(count_list), tuple(edge_list), total, edge_list[used[0]],
                  edge_list[used[-1] + 1], mean, math.sqrt(var))


def _listed(value: object, name: str) -> list[Any]:
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        value = tolist()
    if not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of numbers, got {type(value).__name__}")
    return list(value)


def _count(value: object, i: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"counts[{i}] must be a number, got {type(value).__name__}")
    if value < 0 or not math.isfinite(value) or value != int(value):
        raise ValueError(f"counts[{i}] must be a whole number >= 0, got {value!r}")
    return int(value)


def _edge(value: object, i: int) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"edges[{i}] must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"edges[{i}] must be finite, got {value!r}")
    return float(value)


def histogram(values: object, bins: object = 64) -> Binned:
    """``values`` as the caller passed them to ``log_histogram``: raw values or a pair."""
    nbins = check_bins(bins)
    if isinstance(values, tuple) and len(values) == 2 and all(
            _is_sequence(part) for part in values):
        return from_counts(*values)
    if isinstance(values, (str, bytes, dict)) or values is None or isinstance(
            values, (int, float)):
        raise TypeError(f"values must be a list of numbers, a numpy array, a torch tensor or "
                        f"(counts, edges), got {type(values).__name__}")
    return bin_values(values, nbins)


def _is_sequence(value: object) -> bool:
    return (isinstance(value, Sequence) and not isinstance(value, (str, bytes))) or hasattr(
        value, "tolist")


def quantile(counts: Sequence[int], edges: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile, interpolated linearly inside its bin (exact to one bin width)."""
    total = sum(counts)
    if total == 0:
        return None
    target = q * total
    seen = 0.0
    for i, c in enumerate(counts):
        if c and seen + c >= target:
            frac = (target - seen) / c
            return edges[i] + frac * (edges[i + 1] - edges[i])
        seen += c
    return edges[-1]


def summary_scalars(key: str, counts: Sequence[int], edges: Sequence[float], count: int,
                    stats: dict[str, float | None], nonfinite: dict[str, int]) -> dict[
                        str, float | int]:
    """The scalars that stand for a histogram where it cannot be shown (names documented):
    ``key/count``, ``key/mean``, ``key/std``, ``key/min``, ``key/max``, ``key/p05`` ...
    ``key/p95``, and ``key/nan``, ``key/inf``, ``key/neginf`` when any were seen."""
    out: dict[str, float | int] = {f"{key}/count": count}
    for name in ("mean", "std", "min", "max"):
        value = stats.get(name)
        if value is not None:
            out[f"{key}/{name}"] = value
    low, high = stats.get("min"), stats.get("max")
    for q in QUANTILES:
        value = quantile(counts, edges, q)
        if value is not None:  # never outside the values seen (bins may be wider)
            value = min(max(value, low if low is not None else value),
                        high if high is not None else value)
            out[f"{key}/p{round(q * 100):02d}"] = value
    for name, n in nonfinite.items():
        if n:
            out[f"{key}/{name}"] = n
    return out
