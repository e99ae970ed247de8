"""``+trainer.trackmux.watch``: verl's own SFT trainer (3 steps on CPU, FSDP2, a tiny
Qwen2) watches the model its engine built; histograms and norms reach the spool, and
provenance records the run (issue 25)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import sft_command, sft_env
from trackmux.core.events import HistogramEvent, MetricsEvent, ProvenanceEvent
from trackmux.core.spool.reader import SpoolReader

pytest.importorskip("verl")


@pytest.mark.slow
def test_sft_trainer_watches_its_model(tiny_assets: dict[str, Path], tmp_path: Path,
                                       tracker_env: dict[str, Path]) -> None:
    command = sft_command(tiny_assets, tmp_path, ["+trainer.trackmux.watch=all",
                                                  "+trainer.trackmux.watch_every=2"])
    command[command.index("trainer.logger=[console,file,tensorboard,mlflow]")] = \
        "trainer.logger=[console]"
    proc = subprocess.run(command, env=sft_env(tracker_env, TRACKMUX_PROVENANCE="1"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    (run_dir,) = [p.parent for p in tracker_env["spool"].rglob("spool.db")]
    reader = SpoolReader(run_dir)
    try:
        found = list(reader.iter_events())
    finally:
        reader.close()
    hists = [e for e in found if isinstance(e, HistogramEvent)]
    keys = {e.key for e in hists}
    assert any(k.startswith("gradients/") and "embed_tokens" in k for k in keys), sorted(keys)
    assert any(k.startswith("parameters/") for k in keys)
    # one watched step (optimizer step 2 of 3), filed at the step of the log() call that
    # follows it, as wandb.watch files it: verl logs that optimizer step as step 2
    assert {e.step for e in hists} == {2}
    norms = [e for e in found if isinstance(e, MetricsEvent)
             and any(k.startswith("grad_norm/") for k in e.data)]
    assert norms
    (provenance,) = [e for e in found if isinstance(e, ProvenanceEvent)]
    assert provenance.data["packages"]["verl"] == "0.9.1"


def _tensorboard_histograms(log_dir: Path) -> dict[str, list[int]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"histograms": 0, "tensors": 0})
    acc.Reload()
    return {tag: [e.step for e in acc.Histograms(tag)] for tag in acc.Tags()["histograms"]}


#: a bound for a hung Ray job, not a duration: beside a second full suite (load 12-16) the
#: job took 283 s in one suite and went past 400 s, the old bound, in the other
HANG_GUARD = 1200


@pytest.mark.slow
def test_ray_workers_watch_their_model_with_trackmux_watch(
        tiny_assets: dict[str, Path], tmp_path: Path, tracker_env: dict[str, Path]) -> None:
    """The PPO path (models in Ray workers, Tracking in the driver), through verl's own Ray
    trainer: two ``TrainingWorker`` processes in a ``RayWorkerGroup`` (FSDP2 over gloo, the
    worker class PPO's actor and critic are), ``TRACKMUX_WATCH`` in the launch environment.
    The engine hook registers the model in each worker; the worker of rank 0 attaches to
    the driver's run and watches it; rank 1 watches nothing. Read back from the spool and
    from tensorboard's event files. (verl's PPO rollout itself needs vLLM/SGLang: see
    docs/provenance.md.)"""
    command = [arg for arg in sft_command(tiny_assets, tmp_path, [
        "trainer.n_gpus_per_node=2", "trainer.nnodes=1", "trainer.total_training_steps=2",
        "trainer.save_freq=-1", "trainer.test_freq=-1", "trainer.logger=[console,tensorboard]",
        "trainer.experiment_name=ray-run"])
        if not arg.startswith(("trainer.logger=[console,file", "trainer.total_training_steps=3",
                               "trainer.experiment_name=run1"))]
    driver = [sys.executable, str(Path(__file__).with_name("ray_sft_driver.py")), "2"]
    command = driver + command[command.index("verl.trainer.sft_trainer") + 1:]
    # Ray refuses a temp dir inside the virtualenv (tox's TMPDIR is) and its socket paths
    # must stay short: a fresh folder under /tmp, removed afterwards
    ray_tmp = tempfile.mkdtemp(prefix="tm-ray-", dir="/tmp")
    try:
        proc = subprocess.run(command, env=sft_env(tracker_env, TRACKMUX_WATCH="all:1",
                                                   RAY_USAGE_STATS_ENABLED="0",
                                                   RAY_DISABLE_DOCKER_CPU_WARNING="1",
                                                   TMPDIR=ray_tmp),
                              cwd=tmp_path, capture_output=True, text=True,
                              timeout=HANG_GUARD)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "stopped answering" not in proc.stderr, proc.stderr[-3000:]
    (run_dir,) = [p.parent for p in tracker_env["spool"].rglob("spool.db")]
    reader = SpoolReader(run_dir)
    try:
        found = list(reader.iter_events())
    finally:
        reader.close()
    hists = [e for e in found if isinstance(e, HistogramEvent)]
    keys = {e.key for e in hists}
    assert any(k.startswith("actor/gradients/") and "embed_tokens" in k for k in keys), keys
    assert any(k.startswith("actor/parameters/") for k in keys)
    # one watching worker (rank 0), every optimizer step (steps 1 and 2), once each
    per_key: dict[str, list[int]] = {}
    for event in hists:
        per_key.setdefault(event.key, []).append(event.step)
    assert all(sorted(steps) == [1, 2] for steps in per_key.values()), per_key
    norms = {k for e in found if isinstance(e, MetricsEvent) for k in e.data
             if k.startswith("actor/grad_norm/")}
    assert norms
    board = _tensorboard_histograms(tracker_env["tensorboard"])
    embed = next(k for k in keys if k.startswith("actor/gradients/") and "embed_tokens" in k)
    assert board[embed] == [1, 2], sorted(board)
