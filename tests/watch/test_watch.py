"""run.watch on a small real model on CPU: histograms and norms every N optimizer steps,
a NaN gradient counted as non-finite, a frozen layer without gradient histograms."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import trackmux  # noqa: E402
from trackmux.core.events import HistogramEvent, MetricsEvent  # noqa: E402
from trackmux.core.spool.reader import SpoolReader  # noqa: E402
from trackmux.core.values.histogram import bin_values  # noqa: E402
from trackmux.watch import binning  # noqa: E402


def events(run_dir: Path) -> list[Any]:
    reader = SpoolReader(run_dir)
    try:
        return list(reader.iter_events())
    finally:
        reader.close()


def model_and_optimizer() -> tuple[Any, Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    model[0].weight.requires_grad_(False)  # a frozen layer
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01)
    return model, optimizer


def train(run: Any, model: Any, optimizer: Any, steps: int, nan_at: int | None = None
          ) -> None:
    for step in range(steps):
        run.log({"step_marker": float(step)}, step=step)
        optimizer.zero_grad()
        model(torch.randn(4, 8)).pow(2).mean().backward()
        if step == nan_at:
            model[2].weight.grad[0, :3] = float("nan")
        optimizer.step()


def test_every_n_steps_with_nan_and_frozen_layer(tmp_path: Path) -> None:
    run = trackmux.init(project="w", backends="none", dir=tmp_path, provenance=False)
    model, optimizer = model_and_optimizer()
    watcher = run.watch(model, log="all", every=3)
    train(run, model, optimizer, steps=7, nan_at=5)
    run.finish()
    assert watcher.steps == 7 and watcher.logged == 2
    found = events(run.dir)
    hists = [e for e in found if isinstance(e, HistogramEvent)]
    # optimizer steps 3 and 6 come after the logs of steps 2 and 5: their gradients go to
    # the next log() call's step, as wandb.watch files them
    assert sorted({e.step for e in hists}) == [3, 6]
    keys = {e.key for e in hists}
    assert "gradients/0.weight" not in keys  # frozen: no gradient
    assert {"parameters/0.weight", "gradients/0.bias", "gradients/2.weight",
            "parameters/2.weight"} <= keys
    (nan_grad,) = [e for e in hists if e.key == "gradients/2.weight" and e.step == 6]
    assert nan_grad.nan == 3 and nan_grad.count == 13 and sum(nan_grad.counts) == 13
    norms = [e for e in found if isinstance(e, MetricsEvent) and "grad_norm/2.weight" in e.data]
    assert math.isnan(norms[-1].data["grad_norm/2.weight"])
    assert norms[0].data["param_norm/0.weight"] == pytest.approx(
        float(model[0].weight.norm()), rel=1e-6)  # frozen: unchanged since step 3


def test_a_gradient_spike_lines_up_with_its_loss_spike(tmp_path: Path) -> None:
    """The usual loop: forward, backward, optimizer.step(), then log the loss. Each
    optimizer step's gradients land at the step of the loss logged after it."""
    run = trackmux.init(project="w", backends="none", dir=tmp_path, provenance=False)
    model, _ = model_and_optimizer()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # the spike stays in its step
    run.watch(model, log="gradients", every=1)
    spike = 3
    for step in range(5):
        optimizer.zero_grad()
        loss = model(torch.randn(4, 8)).pow(2).mean() * (1e4 if step == spike else 1.0)
        loss.backward()
        optimizer.step()
        run.log({"loss": loss.item()})  # steps 0..4, no explicit step
    run.finish()
    found = events(run.dir)
    losses = {e.step: e.data["loss"] for e in found
              if isinstance(e, MetricsEvent) and "loss" in e.data}
    norms = [e for e in found if isinstance(e, MetricsEvent) and "grad_norm/2.weight" in e.data]
    grad_steps = [e.step for e in found
                  if isinstance(e, HistogramEvent) and e.key == "gradients/2.weight"]
    assert sorted(losses) == [0, 1, 2, 3, 4]
    assert grad_steps == [0, 1, 2, 3, 4]  # one point per optimizer step, none doubled
    peak = max(norms, key=lambda e: e.data["grad_norm/2.weight"])
    assert peak.step == max(losses, key=lambda k: losses[k]) == spike


def test_a_step_not_followed_by_a_log_lands_after_the_last(tmp_path: Path) -> None:
    run = trackmux.init(project="w", backends="none", dir=tmp_path, provenance=False)
    model, optimizer = model_and_optimizer()
    run.watch(model, log="gradients", every=1)
    run.log({"loss": 1.0}, step=7)
    optimizer.zero_grad()
    model(torch.randn(4, 8)).pow(2).mean().backward()
    optimizer.step()
    optimizer.step()  # two steps before the next log(): the later one is kept
    run.finish()
    grads = [e for e in events(run.dir)
             if isinstance(e, HistogramEvent) and e.key == "gradients/2.weight"]
    assert [e.step for e in grads] == [8]


def test_modes_and_unwatch(tmp_path: Path) -> None:
    run = trackmux.init(project="w", backends="none", dir=tmp_path, provenance=False)
    model, optimizer = model_and_optimizer()
    run.watch(model, log="gradients", every=1)
    train(run, model, optimizer, steps=2)
    run.unwatch(model)
    train(run, model, optimizer, steps=2)
    run.watch(model, log="parameters", every=2)
    train(run, model, optimizer, steps=2)
    run.unwatch()
    run.finish()
    hists = [e for e in events(run.dir) if isinstance(e, HistogramEvent)]
    grads = [e for e in hists if e.key.startswith("gradients/")]
    params = [e for e in hists if e.key.startswith("parameters/")]
    # the last parameters step (the 2nd of the 3rd loop) had no log() after it: the step
    # after the last
    assert {e.step for e in grads} == {0, 1} and {e.step for e in params} == {2}


@pytest.mark.parametrize("path", ["cpu", "device"])
def test_binning_agrees_with_log_histogram(path: str) -> None:
    """The CPU path is core's binning; the device path (GPU ops, run here on the CPU)
    must agree with it."""
    torch.manual_seed(1)
    values = torch.randn(300_000) * 3
    values[7] = float("inf")
    values[9] = float("-inf")
    result = (binning.on_device(values, 32) if path == "cpu"
              else binning.in_torch(values, 32))
    hist, norm = binning.binned(binning.fetch([result])[0], 32)
    reference = bin_values(values.numpy(), 32)
    assert (hist.nan, hist.inf, hist.neginf) == (0, 1, 1)
    assert hist.count == reference.count and hist.min == reference.min
    assert hist.max == reference.max
    assert hist.mean == pytest.approx(reference.mean, abs=1e-9)
    assert hist.std == pytest.approx(reference.std, rel=1e-9)
    assert np.allclose(hist.edges, reference.edges)
    moved = sum(abs(a - b) for a, b in zip(hist.counts, reference.counts, strict=True))
    assert moved <= 4  # only values within float rounding of an inner edge may differ
    assert math.isinf(norm)


@pytest.mark.parametrize("path", ["cpu", "device"])
def test_one_repeated_value_and_bfloat16(path: str) -> None:
    bin_on = binning.on_device if path == "cpu" else binning.in_torch
    hist, _ = binning.binned(binning.fetch([bin_on(torch.full((10,), 2.0), 4)])[0], 4)
    assert hist.count == 10 and hist.min == hist.max == 2.0 and sum(hist.counts) == 10
    bf = torch.randn(1000).to(torch.bfloat16)
    hist, norm = binning.binned(binning.fetch([bin_on(bf, 16)])[0], 16)
    assert hist.count == 1000 and norm == pytest.approx(float(bf.float().norm()), rel=1e-5)


def test_dtensor_local_shard_without_collectives(tmp_path: Path) -> None:
    """A DTensor on a one-rank gloo group: the local shard is binned, no collective runs."""
    import os

    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        full = torch.arange(12, dtype=torch.float32)
        sharded = distribute_tensor(full, mesh, [Shard(0)])
        assert binning.local(sharded) is not sharded
        hist, norm = binning.binned(binning.fetch([binning.on_device(sharded, 4)])[0], 4)
        assert hist.count == 12 and norm == pytest.approx(float(full.norm()))
        device_path = binning.binned(binning.fetch([binning.in_torch(
            binning.local(sharded).reshape(-1), 4)])[0], 4)[0]
        assert device_path.counts == hist.counts
    finally:
        dist.destroy_process_group()


def test_bad_arguments_are_named_on_every_rank(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    model, _ = model_and_optimizer()
    run = trackmux.init(project="w", backends="none", dir=tmp_path, provenance=False)
    with pytest.raises(ValueError, match="log must be one of"):
        run.watch(model, log="weights")
    with pytest.raises(ValueError, match="every"):
        run.watch(model, every=0)
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module"):
        run.watch(object())
    run.finish()
    monkeypatch.setenv("RANK", "1")
    disabled = trackmux.init(project="w", backends="none", dir=tmp_path)
    assert isinstance(disabled, trackmux.DisabledRun)
    with pytest.raises(ValueError, match="every"):
        disabled.watch(model, every=-1)
    assert disabled.watch(model) is None
    disabled.unwatch(model)
