"""TrackmuxTracker in a real accelerate loop on CPU, read back from tensorboard and mlflow;
by name through accelerate's register_tracker_class; resume through save_state/load_state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import trackmux
from conftest import mlflow_history, mlflow_run, spool_events, spool_runs, tensorboard_scalars
from trackmux.testing.pacer import HeldCommits

pytest.importorskip("accelerate")


def train_loop(accelerator: Any, steps: range, seed: int = 0) -> list[float]:
    import torch

    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    losses = []
    for step in steps:
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss))
        accelerator.log({"train/loss": loss.item(), "train": {"lr": 0.1}, "note": f"s{step}"},
                        step=step)
    return losses


def test_accelerate_loop_reaches_every_backend(tracker_env: dict[str, Path]) -> None:
    import numpy as np
    from accelerate import Accelerator

    from trackmux.integrations.accelerate import TrackmuxTracker

    tracker = TrackmuxTracker("acc-loop", name="linear",
                              backends=["file", "tensorboard", "mlflow"])
    accelerator = Accelerator(log_with=tracker, cpu=True)
    accelerator.init_trackers("ignored-for-objects", config={"lr": 0.1, "model": {"in": 4}})
    assert accelerator.get_tracker("trackmux") is tracker
    losses = train_loop(accelerator, range(1, 6))
    run = accelerator.get_tracker("trackmux", unwrap=True)
    assert isinstance(run, trackmux.Run)
    run.log_histogram("weights", np.arange(10.0), step=5)
    tracker.log_table("preds", columns=["x", "y"], data=[[1, 2.0], [3, 4.0]], step=5)
    tracker.log_images({"img": [np.zeros((4, 4, 3), dtype=np.uint8)]}, step=5)
    accelerator.end_training()
    assert tracker.run is None

    (run_dir,) = spool_runs(tracker_env["spool"], "acc-loop")
    events = spool_events(run_dir)
    config = next(e for e in events if isinstance(e, trackmux.ConfigEvent)).config
    assert config == {"lr": 0.1, "model": {"in": 4}}
    spooled = {e.step: e.data["train/loss"] for e in events
               if isinstance(e, trackmux.MetricsEvent) and "train/loss" in e.data}
    assert spooled == pytest.approx(dict(zip(range(1, 6), losses, strict=True)))
    assert {e.step: e.text for e in events if isinstance(e, trackmux.TextEvent)} == {
        s: f"s{s}" for s in range(1, 6)}
    kinds = {type(e).__name__ for e in events}
    assert {"HistogramEvent", "TableEvent", "ImageEvent"} <= kinds
    board = tensorboard_scalars(tracker_env["tensorboard"])
    assert board["train/loss"] == pytest.approx(spooled)
    assert board["train/lr"] == pytest.approx(dict.fromkeys(range(1, 6), 0.1))
    client, ml_run = mlflow_run(tracker_env["mlflow_db"], "acc-loop")
    assert ml_run.info.status == "FINISHED" and ml_run.info.run_name == "linear"
    assert {s: v[-1] for s, v in mlflow_history(client, ml_run, "train/loss").items()} \
        == pytest.approx(spooled)
    assert ml_run.data.params["lr"] == "0.1"


def test_by_name_and_resume_through_save_and_load_state(tmp_path: Path,
                                                        tracker_env: dict[str, Path]) -> None:
    """log_with="trackmux" (accelerate's register_tracker_class); the run id and step go
    into save_state; a new Accelerator that load_state()s continues that run rewound to the
    saved step, and the re-done steps replace the first attempt's."""
    from accelerate import Accelerator
    from accelerate.tracking import LOGGER_TYPE_TO_CLASS

    from trackmux.integrations.accelerate import TrackmuxTracker

    assert LOGGER_TYPE_TO_CLASS["trackmux"] is TrackmuxTracker
    kwargs = {"trackmux": {"name": "resumed", "backends": ["tensorboard", "mlflow"]}}
    first = Accelerator(log_with="trackmux", cpu=True, project_dir=str(tmp_path))
    first.init_trackers("acc-resume", config={"lr": 0.1}, init_kwargs=kwargs)
    tracker = first.get_tracker("trackmux")
    first.register_for_checkpointing(tracker)
    train_loop(first, range(1, 4))
    first.save_state(str(tmp_path / "ckpt"))
    train_loop(first, range(4, 6), seed=1)  # steps 4-5 are lost with the "crash"
    run_id = tracker.run.id
    tracker.run.finish(exit_code=1)  # as a crashed attempt leaves it
    tracker.run = None

    second = Accelerator(log_with="trackmux", cpu=True, project_dir=str(tmp_path))
    second.init_trackers("acc-resume", config={"lr": 0.1}, init_kwargs=kwargs)
    tracker2 = second.get_tracker("trackmux")
    second.register_for_checkpointing(tracker2)
    second.load_state(str(tmp_path / "ckpt"))
    redone = train_loop(second, range(4, 7), seed=2)
    assert tracker2.run.id == run_id
    second.end_training()

    assert [p.name for p in spool_runs(tracker_env["spool"], "acc-resume")] == [run_id]
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(spool_runs(tracker_env["spool"], "acc-resume")[0])
    try:
        attempts = [(a.number, a.rewind_to) for a in reader.attempts()]
        live = {e.step: e.data["train/loss"] for e in reader.iter_events()
                if isinstance(e, trackmux.MetricsEvent) and "train/loss" in e.data}
    finally:
        reader.close()
    assert attempts == [(1, None), (2, 3)]
    assert sorted(live) == [1, 2, 3, 4, 5, 6]
    assert [live[s] for s in (4, 5, 6)] == pytest.approx(redone)
    assert tensorboard_scalars(tracker_env["tensorboard"])["train/loss"] == pytest.approx(live)
    client, ml_run = mlflow_run(tracker_env["mlflow_db"], "acc-resume")
    assert {s: v[-1] for s, v in mlflow_history(client, ml_run, "train/loss").items()} \
        == pytest.approx(live)


def test_save_state_commits_the_steps_logged_before_it(
        tmp_path: Path, tracker_env: dict[str, Path], held_commits: HeldCommits) -> None:
    """accelerator.save_state asks the tracker for its state: the spool has committed every
    step logged so far by then, so the checkpoint never holds steps a kill could take."""
    from accelerate import Accelerator

    from trackmux.integrations.accelerate import TrackmuxTracker

    tracker = TrackmuxTracker("acc-ckpt", backends=[])
    accelerator = Accelerator(log_with=tracker, cpu=True, project_dir=str(tmp_path))
    accelerator.init_trackers("acc-ckpt")
    accelerator.register_for_checkpointing(tracker)
    assert tracker.tracker is not None  # the run opens at its first use (a load_state may
    held_commits.settle()               # resume it); then no wake is pending: nothing
                                        # commits by itself
    train_loop(accelerator, range(1, 4))

    def steps() -> list[int]:
        (run_dir,) = spool_runs(tracker_env["spool"], "acc-ckpt")
        return sorted(e.step for e in spool_events(run_dir)
                      if isinstance(e, trackmux.MetricsEvent) and "train/loss" in e.data)

    assert steps() == []  # in memory until the commit interval: what a kill would lose
    accelerator.save_state(str(tmp_path / "ckpt"))
    assert steps() == [1, 2, 3]
    accelerator.end_training()


def test_two_processes_one_run_from_the_main_process(tmp_path: Path,
                                                    tracker_env: dict[str, Path]) -> None:
    """Two CPU processes (torch.distributed.run, gloo): only the main one opens a run; the
    other's calls do nothing and its ``tracker`` is a DisabledRun."""
    import os
    import subprocess
    import sys

    from conftest import HERE

    out = tmp_path / "ranks"
    out.mkdir()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc_per_node=2", str(HERE / "accelerate_script.py"), str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert (out / "rank0.txt").read_text() == "Run"
    assert (out / "rank1.txt").read_text() == "DisabledRun"
    (run_dir,) = spool_runs(tracker_env["spool"], "acc-ddp")
    events = spool_events(run_dir)
    assert [e.text for e in events if isinstance(e, trackmux.TextEvent)] == ["rank 0"] * 3
    steps = [e.step for e in events if isinstance(e, trackmux.MetricsEvent)]
    assert steps == [1, 1, 2, 2, 3, 3]  # accelerator.log and tracker.log, main process only
    config = next(e for e in events if isinstance(e, trackmux.ConfigEvent)).config
    assert config == {"world": 2}
    assert sorted(tensorboard_scalars(tracker_env["tensorboard"])["loss"]) == [1, 2, 3]
