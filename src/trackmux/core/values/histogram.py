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
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from trackmux.core.events import HistogramEvent

#: wandb keeps at most 512 bins; the same limit everywhere keeps every backend native.
MAX_BINS = 512
#: the largest count of one bin a (counts, edges) pair may give (stores keep 64-bit ints),
#: and the largest int an edge may be (beyond it, float() overflows)
MAX_COUNT = (1 << 63) - 1
MAX_FLOAT_INT = int(1.7976931348623157e308)
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

    def event(self, key: str, step: int, time: float) -> HistogramEvent:
        """This histogram as the event the spool keeps."""
        return HistogramEvent(key, self.counts, self.edges, self.count, self.min, self.max,
                              self.mean, self.std, step, time, self.nan, self.inf,
                              self.neginf)


def check_bins(bins: object) -> int:
    if isinstance(bins, bool) or not isinstance(bins, int):
        raise TypeError(f"bins must be an int, got {type(bins).__name__}")
    if not 1 <= bins <= MAX_BINS:
        raise ValueError(f"bins must be between 1 and {MAX_BINS}, got {bins}")
    return bins


#: Values are processed in slices of this many: each slice's scratch buffers stay in the
#: CPU cache and nothing of the input's size is allocated (fresh pages cost more than
#: the arithmetic, and much more on a loaded machine).
CHUNK = 1 << 16
#: Ranges for which the bin index of float32 values is computed in float32.
_F32_SPAN = (1e-30, 1e30)


def _as_numpy(values: object) -> tuple[Any, bool]:
    """The values as a flat numpy array, and whether it holds bfloat16 bit patterns
    (uint16; numpy has no bfloat16, they are widened to float32 slice by slice)."""
    import numpy as np

    module = type(values).__module__.split(".")[0]
    if module == "torch":
        tensor = values.detach()  # type: ignore[attr-defined]
        if tensor.is_complex():
            raise TypeError("values is a complex tensor; histograms take real numbers")
        import torch

        if tensor.dtype == torch.bfloat16:
            bits = tensor.cpu().reshape(-1).view(torch.int16).numpy()
            return bits.view(np.uint16), True
        if tensor.is_floating_point() and tensor.dtype.itemsize < 2:  # fp8
            tensor = tensor.to(dtype=torch.float32)
        return tensor.cpu().reshape(-1).numpy(), False
    try:
        array = np.asarray(values)
    except (ValueError, TypeError) as exc:
        raise TypeError(f"values must be a list of numbers, a numpy array or a torch tensor: "
                        f"{exc}") from exc
    if array.dtype.kind not in "biuf":
        raise TypeError(f"values must hold real numbers, got dtype {array.dtype} "
                        f"({type(values).__name__})")
    return array.reshape(-1), False


class _Slices:
    """The values slice by slice as float32 or float64, through reused buffers."""

    def __init__(self, array: Any, bf16: bool) -> None:
        import numpy as np

        self.array = array
        self.bf16 = bf16
        self.size = int(array.size)
        n = min(self.size, CHUNK)
        self.dtype: Any
        if bf16:
            self.dtype = np.dtype(np.float32)
            self._bits = np.empty(n, dtype=np.uint32)
        elif array.dtype in (np.float32, np.float64):
            self.dtype = array.dtype
        elif array.dtype == np.float16:
            self.dtype = np.dtype(np.float32)
        else:  # integers and bools: float64 holds every int up to 2**53 exactly
            self.dtype = np.dtype(np.float64)
        self._buffer = None if self.dtype == array.dtype else np.empty(n, dtype=self.dtype)

    def __iter__(self) -> Iterator[Any]:
        import numpy as np

        array = self.array
        for start in range(0, self.size, CHUNK):
            part = array[start:start + CHUNK]
            if self.bf16:  # bfloat16 is the top half of a float32
                bits = self._bits[:part.size]
                np.copyto(bits, part)
                np.left_shift(bits, 16, out=bits)
                yield bits.view(np.float32)
            elif self._buffer is not None:
                out = self._buffer[:part.size]
                with np.errstate(over="ignore"):  # beyond float64: inf, counted apart
                    np.copyto(out, part, casting="unsafe")
                yield out
            else:
                yield part


def bin_values(values: object, bins: int) -> Binned:
    """Bin ``values`` into ``bins`` equal-width bins over their finite range.

    Two passes over the values, a slice at a time: the first finds min and max (a NaN or
    inf shows there, and only then are the non-finite ones counted and left out) and the
    moments, the second the bin of each value. Mean and std are accumulated in float64
    (per slice, merged with Chan's formula); the bin index is computed in float32 for
    float32 values (float64 otherwise)."""
    array, bf16 = _as_numpy(values)
    if array.size == 0:
        raise ValueError("values is empty; a histogram needs at least one value")
    slices = _Slices(array, bf16)
    first = _first_pass(slices)
    if first is None:  # NaN or inf among the values
        return _bin_finite(slices, bins)
    return _binned(slices, bins, *first)


def _first_pass(slices: _Slices) -> tuple[float, float, float, float] | None:
    """min, max, mean and sum of squared deviations; None if a value is NaN or inf."""
    import numpy as np

    scratch = np.empty(min(slices.size, CHUNK), dtype=np.float64)
    low, high = math.inf, -math.inf
    seen, mean, m2 = 0, 0.0, 0.0
    for part in slices:
        part_low, part_high = float(part.min()), float(part.max())  # NaN propagates
        if not (math.isfinite(part_low) and math.isfinite(part_high)):
            return None
        low, high = min(low, part_low), max(high, part_high)
        m = part.size
        deviation = scratch[:m]
        if part.dtype == np.float64:
            part_mean = float(part.sum()) / m
            np.subtract(part, part_mean, out=deviation)
        else:
            np.copyto(deviation, part)
            part_mean = float(deviation.sum()) / m
            np.subtract(deviation, part_mean, out=deviation)
        part_m2 = float(np.einsum("i,i->", deviation, deviation))  # no BLAS threads
        total = seen + m
        delta = part_mean - mean
        mean += delta * m / total
        m2 += part_m2 + delta * delta * seen * m / total
        seen = total
    return low, high, mean, m2


def _bin_finite(slices: _Slices, bins: int) -> Binned:
    """Count NaN, +inf and -inf apart, then bin the finite values."""
    import numpy as np

    finite_parts = []
    nan = inf = neginf = 0
    for part in slices:
        finite = np.isfinite(part)
        odd = part[~finite]
        if odd.size:
            nan += int(np.count_nonzero(np.isnan(odd)))
            inf += int(np.count_nonzero(odd > 0))
            neginf += int(np.count_nonzero(odd < 0))
        finite_parts.append(part[finite])  # a copy: the buffer behind ``part`` is reused
    values = np.concatenate(finite_parts)
    if values.size == 0:
        return Binned((), (), 0, None, None, None, None, nan, inf, neginf)
    rest = _Slices(values, False)
    first = _first_pass(rest)
    assert first is not None
    binned = _binned(rest, bins, *first)
    return Binned(binned.counts, binned.edges, binned.count, binned.min, binned.max,
                  binned.mean, binned.std, nan, inf, neginf)


def _binned(slices: _Slices, bins: int, low: float, high: float, mean: float,
            m2: float) -> Binned:
    import numpy as np

    if low == high:  # one repeated value: a range around it (wider than rounding)
        half = max(0.5, abs(low) * 2.0**-20)
        lo, hi = low - half, high + half
    else:
        lo, hi = low, high
    counts = _equal_width_counts(slices, lo, hi, bins, exact_ends=low != high)
    if math.isfinite(hi - lo):
        edges = np.linspace(lo, hi, bins + 1)
    else:  # the range overflows float64: the same edges, from halves
        edges = np.linspace(lo / 2, hi / 2, bins + 1) * 2
    n = slices.size
    return Binned(tuple(counts.tolist()), tuple(edges.tolist()), n, low, high, mean,
                  math.sqrt(m2 / n))


def _equal_width_counts(slices: _Slices, lo: float, hi: float, bins: int, *,
                        exact_ends: bool) -> Any:
    """np.histogram's counts for equal bins (last bin closed), at a fraction of its cost:
    a scaled index per value, then a bincount, a slice at a time. A value within float
    rounding of an inner edge may land in the neighbouring bin. ``exact_ends``: ``lo``
    is one of the values (so exact in their precision)."""
    import numpy as np

    halve = not math.isfinite(hi - lo)
    if halve:
        lo, hi = lo / 2, hi / 2
    span = hi - lo
    f32 = (slices.dtype == np.float32 and exact_ends and not halve
           and _F32_SPAN[0] < span < _F32_SPAN[1])
    calc = np.dtype(np.float32) if f32 else np.dtype(np.float64)
    n = min(slices.size, CHUNK)
    scaled = np.empty(n, dtype=calc)
    index = np.empty(n, dtype=np.intp)
    start, scale = calc.type(lo), calc.type(bins / span)
    counts = np.zeros(bins, dtype=np.int64)
    for part in slices:
        m = part.size
        out, idx = scaled[:m], index[:m]
        if halve:
            np.multiply(part, 0.5, out=out)
            np.subtract(out, start, out=out)
        else:
            np.subtract(part, start, out=out)  # >= 0: every value is >= lo
        np.multiply(out, scale, out=out)
        np.copyto(idx, out, casting="unsafe")  # truncates: [k, k+1) -> k
        found = np.bincount(idx, minlength=bins)
        counts += found[:bins]
        if found.size > bins:  # the maximum (and rounding just below it): the last bin
            counts[-1] += found[bins:].sum()
    return counts


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
    if type(value) is not int and not (math.isfinite(value) and value == int(value)):
        raise ValueError(f"counts[{i}] must be a whole number >= 0, got {value!r}")
    count = int(value)
    if not 0 <= count <= MAX_COUNT:
        raise ValueError(f"counts[{i}] must be a whole number in 0..{MAX_COUNT}, got "
                         f"{_short(count)}")
    return count


def _edge(value: object, i: int) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"edges[{i}] must be a number, got {type(value).__name__}")
    if type(value) is not float and isinstance(value, int) and not (
            -MAX_FLOAT_INT <= value <= MAX_FLOAT_INT):
        raise ValueError(f"edges[{i}] must be finite, got an int beyond the float range "
                         f"({_short(value)})")
    if not math.isfinite(value):
        raise ValueError(f"edges[{i}] must be finite, got {value!r}")
    return float(value)


def _short(value: int) -> str:
    """A huge int named by its size, not printed whole."""
    text = str(value)
    return text if len(text) <= 30 else f"an int of {len(text.lstrip('-'))} digits"


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


def warn_nonfinite(key: str, binned: Binned, warned: set[str]) -> None:
    """Say once per key (``warned`` remembers) that NaN/inf were counted apart."""
    if (binned.nan or binned.inf or binned.neginf) and key not in warned:
        warned.add(key)
        logging.getLogger("trackmux").warning(
            "trackmux: histogram %r had %d NaN and %d infinite values; they are counted "
            "apart (%s/nan, %s/inf, %s/neginf) and not binned (reported once per key)",
            key, binned.nan, binned.inf + binned.neginf, key, key, key)


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
