"""accelerate and the doctor's stop (issue 45): the loop reads ``tracker.should_stop``,
saves its state and leaves; with two processes both stop at the same step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HERE, spool_runs
from spool_support import spool_meta

pytest.importorskip("accelerate")


@pytest.mark.parametrize("processes", [1, 2])
def test_the_loop_saves_its_state_and_stops_on_every_process(
        tmp_path: Path, tracker_env: dict[str, Path], processes: int) -> None:
    out = tmp_path / "out"
    out.mkdir()
    script = str(HERE / "accelerate_stop_script.py")
    command = ([sys.executable, script, str(out)] if processes == 1 else
               [sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc_per_node={processes}", script, str(out)])
    proc = subprocess.run(command, env=dict(os.environ, OMP_NUM_THREADS="1"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    seen = [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(processes)]
    stopped_at = seen[0]["stopped_at"]
    assert stopped_at is not None, "the loop never saw should_stop"
    assert all(s["stopped_at"] == stopped_at for s in seen), seen  # the same step everywhere
    assert seen[0]["reason"]["rule"] == "nonfinite"
    assert all(s["reason"] is None for s in seen[1:])  # the reason lives on the main process
    assert (out / f"ckpt-{stopped_at}").is_dir()
    [run_dir] = spool_runs(tracker_env["spool"], "acc-stop")
    meta = spool_meta(run_dir)
    assert meta["state"] == "stopped"
    assert meta["stop_reason"] == seen[0]["reason"]


def test_without_stop_on_should_stop_is_false_and_costs_nothing(
        tracker_env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from accelerate import Accelerator

    from trackmux.integrations.accelerate import TrackmuxTracker

    monkeypatch.delenv("TRACKMUX_DOCTOR_STOP_ON", raising=False)
    tracker = TrackmuxTracker("acc-nostop", backends=[])
    accelerator = Accelerator(log_with=tracker, cpu=True)
    accelerator.init_trackers("acc-nostop")
    accelerator.log({"train/loss": float("nan")}, step=1)
    assert tracker.should_stop is False and tracker.stop_reason is None
    assert tracker._stopping is False  # no policy: the property returns before any sharing
    accelerator.end_training()
