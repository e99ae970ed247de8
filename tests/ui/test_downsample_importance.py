"""The numeric pieces of the UI: min/max downsampling and importance, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from trackmux.ui import downsample, importance


def test_minmax_keeps_a_one_point_spike_and_both_ends() -> None:
    x = np.arange(10_000, dtype=np.float64)
    y = np.zeros(10_000)
    y[4321] = 50.0
    y[0], y[-1] = -3.0, 7.0
    out = downsample.sample(x, y, None, None, buckets=100)
    assert not out.exact and out.x.size == 200
    assert np.nanmax(out.y) == 50.0 and np.nanmin(out.y) == -3.0 and 7.0 in out.y


def test_a_narrow_window_is_exact_and_non_finite_values_are_gaps() -> None:
    x = np.arange(100, dtype=np.float64)
    y = np.arange(100, dtype=np.float64)
    y[15] = np.inf
    out = downsample.sample(x, y, 10, 20, buckets=50)
    assert out.exact and out.x.tolist() == list(range(10, 21))
    assert np.isnan(out.y[5]) and out.y[4] == 14.0


def test_align_puts_runs_on_one_x_with_gaps() -> None:
    a = downsample.Sampled(np.array([0.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0]), True)
    b = downsample.Sampled(np.array([1.0, 3.0]), np.array([5.0, 6.0]), True)
    xs, ys = downsample.align([a, b])
    assert xs.tolist() == [0, 1, 2, 3]
    assert np.array_equal(ys[1], [np.nan, 5.0, np.nan, 6.0], equal_nan=True)


def test_spearman_and_eta_by_hand() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert importance.spearman(x, np.array([10.0, 20.0, 30.0, 40.0])) == pytest.approx(1.0)
    assert importance.spearman(x, np.array([4.0, 3.0, 2.0, 1.0])) == pytest.approx(-1.0)
    assert importance.ranks(np.array([5.0, 1.0, 5.0])).tolist() == [1.5, 0.0, 1.5]
    groups = np.array([0, 0, 1, 1])
    assert importance.eta(groups, np.array([1.0, 2.0, 3.0, 4.0])) == pytest.approx(
        np.sqrt(0.8))


def test_importance_ranks_the_hyperparameter_that_moved_the_metric() -> None:
    rng = np.random.default_rng(0)
    configs, targets = [], []
    for i in range(30):
        lr, batch, opt = 10 ** rng.uniform(-6, -4), int(rng.choice([64, 128])), ["a", "b"][i % 2]
        configs.append({"lr": lr, "batch": batch, "opt": opt})
        targets.append(float(np.log10(lr) + rng.normal(0, 0.1)))
    found = importance.importances(configs, targets)
    assert found[0].key == "lr" and found[0].value > 0.9 and found[0].low > 0.8
    others = {f.key: f for f in found[1:]}
    assert others["opt"].method == "eta" and others["batch"].low < 0.3
