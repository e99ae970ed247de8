"""log_histogram: binning at the door, NaN/inf counted apart, spool round trip, fallback,
and the file and console backends reading it back."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

import trackmux
from trackmux.core.delivery.fallbacks import adapt, histogram_metrics
from trackmux.core.events import HistogramEvent, MetricsEvent
from trackmux.core.spool import codec
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.values.histogram import MAX_BINS, bin_values, histogram, quantile
from trackmux.testing.memory import MemoryBackend


def test_counts_match_numpy_and_moments_are_exact() -> None:
    rng = np.random.default_rng(0)
    values = rng.normal(3.0, 2.0, 100_000)
    b = histogram(values, bins=40)
    counts, edges = np.histogram(values, bins=40)
    assert list(b.counts) == counts.tolist()
    assert np.allclose(b.edges, edges)
    assert b.count == 100_000
    assert b.min == values.min() and b.max == values.max()
    assert math.isclose(b.mean, values.mean(), rel_tol=1e-12)
    assert math.isclose(b.std, values.std(), rel_tol=1e-9)


def test_float32_counts_differ_from_numpy_only_at_edges() -> None:
    values = np.random.default_rng(1).normal(size=200_000).astype(np.float32)
    b = histogram(values)
    counts, _ = np.histogram(values, bins=64, range=(float(values.min()), float(values.max())))
    assert sum(b.counts) == values.size
    assert np.abs(np.array(b.counts) - counts).sum() <= 20  # float32 rounding at edges


def test_nan_and_inf_are_counted_apart_not_binned() -> None:
    values = [1.0, 2.0, math.nan, math.inf, -math.inf, -math.inf, 3.0]
    b = histogram(values, bins=2)
    assert (b.nan, b.inf, b.neginf) == (1, 1, 2)
    assert b.count == 3 and sum(b.counts) == 3
    assert (b.min, b.max) == (1.0, 3.0)


def test_all_nan_gives_an_empty_histogram_with_its_counts() -> None:
    b = histogram([math.nan, math.nan])
    assert b.count == 0 and b.counts == () and b.nan == 2 and b.mean is None


def test_constant_values_get_one_unit_wide_range() -> None:
    b = histogram([5, 5, 5], bins=4)
    assert b.edges[0] == 4.5 and b.edges[-1] == 5.5 and sum(b.counts) == 3
    assert b.std == 0.0
    scalars = histogram_metrics(_event(b))
    assert scalars.data["h/p05"] == 5.0 and scalars.data["h/p95"] == 5.0  # clamped


def test_integers_and_bools_are_binned() -> None:
    assert sum(histogram(np.arange(10, dtype=np.int16), bins=5).counts) == 10
    assert histogram([True, False, True], bins=2).counts == (1, 2)


def test_precomputed_counts_and_edges() -> None:
    b = histogram(([1, 0, 3], [0.0, 1.0, 2.0, 3.0]))
    assert b.counts == (1, 0, 3) and b.count == 4
    assert (b.min, b.max) == (0.0, 3.0)
    assert math.isclose(b.mean, (0.5 + 3 * 2.5) / 4)
    b2 = histogram((np.array([2, 2]), np.array([0.0, 0.5, 1.0])))
    assert b2.counts == (2, 2)


@pytest.mark.parametrize(("values", "error", "match"), [
    ("abc", TypeError, "values"),
    (None, TypeError, "values"),
    (3.0, TypeError, "values"),
    ({"a": 1}, TypeError, "values"),
    ([], ValueError, "values is empty"),
    (["a", "b"], TypeError, "values"),
    ([1j, 2j], TypeError, "values"),
    (([1, 2], [0.0, 1.0]), ValueError, "edges"),
    (([1, -2], [0.0, 1.0, 2.0]), ValueError, "counts"),
    (([1, 2], [0.0, 2.0, 1.0]), ValueError, "increasing"),
    (([1, 2], [0.0, math.inf, 2.0]), ValueError, "edges"),
    (([1, "x"], [0.0, 1.0, 2.0]), TypeError, "counts"),
])
def test_bad_values_name_the_argument(values: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        histogram(values)


@pytest.mark.parametrize("bins", [0, -1, MAX_BINS + 1, 2.5, True, "64"])
def test_bad_bins_name_bins(bins: Any) -> None:
    with pytest.raises((TypeError, ValueError), match="bins"):
        histogram([1.0, 2.0], bins=bins)


def test_quantile_interpolates_within_bins() -> None:
    assert quantile([10], [0.0, 1.0], 0.5) == 0.5
    assert quantile([5, 5], [0.0, 1.0, 2.0], 0.75) == 1.5
    assert quantile([0, 0], [0.0, 1.0, 2.0], 0.5) is None


def _event(b: Any, key: str = "h", step: int = 3) -> HistogramEvent:
    return HistogramEvent(key, b.counts, b.edges, b.count, b.min, b.max, b.mean, b.std, step,
                          1.0, b.nan, b.inf, b.neginf, seq=7)


def test_codec_round_trip_keeps_every_field() -> None:
    event = _event(histogram([1.0, 2.0, 2.5, math.nan, math.inf], bins=3))
    (kind, step, time, body), blob = codec.encode(event)
    assert blob is None and kind == "histogram"
    assert codec.decode(7, kind, step, time, body) == event
    empty = _event(histogram([math.nan]))
    (kind, step, time, body), _ = codec.encode(empty)
    assert codec.decode(7, kind, step, time, body) == empty


def test_fallback_gives_documented_scalars_at_the_same_step() -> None:
    event = _event(histogram([float(i) for i in range(101)] + [math.nan], bins=100))
    out = adapt([event], MemoryBackend(), lambda *_: None)
    assert len(out) == 1 and isinstance(out[0], MetricsEvent)
    data = out[0].data
    assert out[0].step == 3 and out[0].seq == 7
    assert set(data) == {"h/count", "h/mean", "h/std", "h/min", "h/max", "h/p05", "h/p25",
                         "h/p50", "h/p75", "h/p95", "h/nan"}
    assert data["h/count"] == 101 and data["h/nan"] == 1
    assert abs(data["h/p50"] - 50) <= 1 and abs(data["h/p95"] - 95) <= 1


def test_run_spools_counts_never_values(tmp_path: Path) -> None:
    run = trackmux.init(project="h", backends=[], dir=tmp_path)
    values = np.linspace(-1, 1, 50_000)
    run.log_histogram("adv", values, step=4, bins=10)
    run.log_histogram("pre", ([1, 2], [0, 1, 2]))
    run.finish()
    reader = SpoolReader(run.dir)
    events = [e for e in reader.iter_events() if isinstance(e, HistogramEvent)]
    reader.close()
    # like log_table, the default step is the last log() step
    assert [(e.key, e.step) for e in events] == [("adv", 4), ("pre", 0)]
    assert sum(events[0].counts) == 50_000 and len(events[0].counts) == 10
    assert (run.dir / "spool.db").stat().st_size < 200_000  # 50k float64 values are 400 kB


def test_nonfinite_values_are_reported_in_the_log(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    run = trackmux.init(project="h", backends=[], dir=tmp_path)
    run.log_histogram("r", [1.0, math.nan])
    run.log_histogram("r", [1.0, math.nan])
    run.finish()
    warnings = [r for r in caplog.records if "histogram 'r' had 1 NaN" in r.getMessage()]
    assert len(warnings) == 1


def test_disabled_run_checks_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    run = trackmux.init(project="h", strict=True)
    with pytest.raises(ValueError, match="bins"):
        run.log_histogram("x", [1.0], bins=0)
    with pytest.raises(TypeError, match="key"):
        run.log_histogram(3, [1.0])  # type: ignore[arg-type]
    lenient = trackmux.init(project="h")  # by default: dropped and counted, as on rank 0
    lenient.log_histogram("x", [1.0], bins=0)
    lenient.log_histogram(3, [1.0])  # type: ignore[arg-type]
    assert {(p.kind, p.count) for p in lenient.problems()} == {
        ("histogram 'x'", 1), ("histogram 3 (int)", 1)}


def test_file_and_console_backends_show_histograms(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run = trackmux.init(project="h", name="hist", backends=["file", "console"], dir=tmp_path,
                        backend_options={"file": {"root": str(tmp_path / "files")}})
    run.log_histogram("reward/dist", [0.0, 0.5, 1.0, math.nan], step=2, bins=4)
    summary = run.finish()
    assert summary.complete
    lines = (tmp_path / "files" / "h" / "hist.histograms.jsonl").read_bytes().splitlines()
    record = orjson.loads(lines[0])
    assert record["key"] == "reward/dist" and record["step"] == 2
    assert record["counts"] == [1, 0, 1, 1] and record["nan"] == 1
    out = capsys.readouterr().out
    assert "[reward/dist @ step 2] n=3 mean=0.5" in out and "nan=1" in out


def test_bin_values_takes_torch_bfloat16_when_available() -> None:
    torch = pytest.importorskip("torch")
    tensor = torch.linspace(0, 1, 1000, dtype=torch.bfloat16)
    b = bin_values(tensor, 10)
    assert b.count == 1000 and b.min == 0.0 and b.max == 1.0


# -- the sliced binning (several CHUNKs, float32 index, float64 moments) -----------------

def test_many_slices_with_nonfinite_in_a_later_slice_match_numpy() -> None:
    from trackmux.core.values.histogram import CHUNK

    rng = np.random.default_rng(7)
    values = rng.normal(10.0, 3.0, 3 * CHUNK + 123)
    values[2 * CHUNK + 5] = math.nan
    values[3 * CHUNK + 7] = math.inf
    values[11] = -math.inf
    b = histogram(values, bins=50)
    finite = values[np.isfinite(values)]
    counts, edges = np.histogram(finite, bins=50)
    assert (b.nan, b.inf, b.neginf) == (1, 1, 1)
    assert list(b.counts) == counts.tolist() and np.allclose(b.edges, edges)
    assert b.count == finite.size
    assert math.isclose(b.mean, finite.mean(), rel_tol=1e-12)
    assert math.isclose(b.std, finite.std(), rel_tol=1e-9)


def test_float32_moments_are_accumulated_in_float64() -> None:
    # a large offset with a small spread: float32 accumulation would lose the std
    values = (1e4 + np.random.default_rng(3).normal(0, 0.05, 1_000_000)).astype(np.float32)
    exact = values.astype(np.float64)
    b = histogram(values)
    assert math.isclose(b.mean, exact.mean(), rel_tol=1e-12)
    assert math.isclose(b.std, exact.std(), rel_tol=1e-9)
    assert sum(b.counts) == values.size
    assert b.counts[0] >= 1 and b.counts[-1] >= 1  # min in the first bin, max in the last


def test_float32_and_float16_counts_differ_from_numpy_only_at_edges() -> None:
    values = np.random.default_rng(4).uniform(-3, 5, 300_000).astype(np.float32)
    for array in (values, values.astype(np.float16)):
        b = histogram(array, bins=128)
        wide = array.astype(np.float64)
        counts, _ = np.histogram(wide, bins=128, range=(wide.min(), wide.max()))
        assert sum(b.counts) == array.size
        assert np.abs(np.array(b.counts) - counts).sum() <= 20
        assert math.isclose(b.mean, wide.mean(), rel_tol=1e-12)


def test_one_large_repeated_value_gets_a_range_around_it() -> None:
    b = histogram(np.full(10, 1e20), bins=4)
    assert b.edges[0] < 1e20 < b.edges[-1] and sum(b.counts) == 10
    assert b.counts[1] + b.counts[2] == 10 and b.std == 0.0


def test_a_range_wider_than_float64_still_bins() -> None:
    b = histogram([-1.5e308, 0.0, 1.5e308], bins=2)
    assert b.counts == (1, 2) and all(math.isfinite(e) for e in b.edges)
    assert b.edges[0] == -1.5e308 and b.edges[-1] == 1.5e308


def test_large_integers_are_binned_as_float64() -> None:
    values = np.arange(2**40, 2**40 + 1000, dtype=np.int64)
    b = histogram(values, bins=10)
    assert b.counts == (100,) * 10 and b.min == 2**40 and b.max == 2**40 + 999


def test_torch_bfloat16_and_float16_bin_like_their_float32_values() -> None:
    torch = pytest.importorskip("torch")
    from trackmux.core.values.histogram import CHUNK

    base = torch.randn(2 * CHUNK + 17, generator=torch.Generator().manual_seed(0))
    base[5] = math.nan
    base[CHUNK + 3] = -math.inf
    for dtype in (torch.bfloat16, torch.float16):
        low = base.to(dtype)
        got, want = bin_values(low, 64), bin_values(low.float().numpy(), 64)
        assert got == want
        assert (got.nan, got.neginf) == (1, 1)
        if dtype == torch.bfloat16:  # a non-contiguous view too
            assert bin_values(low[::2], 16) == bin_values(low.float()[::2].numpy(), 16)
