"""The doctor acts on a real Trainer (issue 45): with ``stop_on`` the callback has the Trainer
save ``checkpoint-N`` and leave ``train()`` at the end of the step where it sees the flag;
the run ends ``stopped``. Without ``stop_on`` nothing changes."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import spool_runs
from spool_support import spool_meta

pytest.importorskip("transformers")

MAX_STEPS = 100_000  # the run would go on for hours: only the doctor's stop ends it early
NAN_AFTER = 5  # the weights go NaN at the end of this step: the loss of the next is NaN
# the test's own guard: a run that never stops fails, it does not hang. The doctor stops it
# within seconds; 600 s is a bound only a run that never stops reaches (not a speed claim)
DEADLINE = 600.0


def _causal_lm_trainer(output_dir: Path, **args: Any) -> Any:
    """A transformers Trainer over a tiny Llama built from a config (no hub), a language
    modelling loss on a few fixed token rows, a log every step, no saving by strategy."""
    import torch
    from tiny_hf import build_model
    from transformers import Trainer, TrainingArguments

    class Rows(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 64

        def __getitem__(self, i: int) -> dict[str, Any]:
            ids = torch.tensor([3 + (i + j) % 20 for j in range(8)])
            return {"input_ids": ids, "labels": ids.clone()}

    options: dict[str, Any] = dict(
        output_dir=str(output_dir), max_steps=MAX_STEPS, per_device_train_batch_size=4,
        logging_steps=1, report_to="none", use_cpu=True, learning_rate=1e-3,
        disable_tqdm=True, seed=0, save_strategy="no",
        logging_nan_inf_filter=False)  # the loss logged as it is (the default hides a NaN)
    return Trainer(model=build_model(30), args=TrainingArguments(**{**options, **args}),
                   train_dataset=Rows())


class _Faults:
    """A TrainerCallback that turns the weights NaN after a step, and the test's guard."""

    def __new__(cls, nan_after: int | None) -> Any:
        from transformers import TrainerCallback

        class Faults(TrainerCallback):  # type: ignore[misc]
            def __init__(self) -> None:
                self.deadline = time.monotonic() + DEADLINE

            def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None,
                            **kwargs: Any) -> None:
                if nan_after is not None and state.global_step == nan_after:
                    import torch

                    with torch.no_grad():
                        for parameter in model.parameters():
                            parameter.fill_(math.nan)
                if time.monotonic() > self.deadline:
                    control.should_training_stop = True  # the guard: the test then fails

        return Faults()


def test_a_trainer_whose_loss_goes_nan_saves_a_checkpoint_and_stops(
        tmp_path: Path, tracker_env: dict[str, Path]) -> None:
    from trackmux.integrations.transformers import TrackmuxCallback

    out = tmp_path / "out"
    trainer = _causal_lm_trainer(out)
    callback = TrackmuxCallback(trainer, project="hf-stop", backends=[],
                                doctor={"stop_on": "critical"})
    trainer.add_callback(callback)
    trainer.add_callback(_Faults(NAN_AFTER))
    start = time.monotonic()
    trainer.train()
    took = time.monotonic() - start
    stopped_at = trainer.state.global_step
    assert stopped_at < MAX_STEPS and took < DEADLINE, (stopped_at, took)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert math.isnan(losses[NAN_AFTER]), losses[:NAN_AFTER + 2]  # the fault is real
    print(f"NaN loss at step {NAN_AFTER + 1}, stopped at step {stopped_at} ({took:.1f} s)")
    assert (out / f"checkpoint-{stopped_at}" / "trainer_state.json").is_file()
    assert (out / f"checkpoint-{stopped_at}" / "model.safetensors").is_file()
    [run_dir] = spool_runs(tracker_env["spool"], "hf-stop")
    meta = spool_meta(run_dir)
    assert meta["state"] == "stopped", meta.get("state")
    reason = meta["stop_reason"]
    assert reason["rule"] == "nonfinite" and reason["severity"] == "critical"
    assert reason["step"] == NAN_AFTER + 1 and "train/loss" in reason["keys"]
    assert callback.run is None  # finished at on_train_end


def test_a_trainer_without_stop_on_goes_on(tmp_path: Path, tracker_env: dict[str, Path],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The same NaN run without a stop policy: the doctor finds the NaN, the Trainer goes on
    to its last step, no checkpoint is written, the run ends finished."""
    from trackmux.core.spool.runs import summarize
    from trackmux.doctor.read import load_stored_findings
    from trackmux.integrations.transformers import TrackmuxCallback

    monkeypatch.delenv("TRACKMUX_DOCTOR_STOP_ON", raising=False)
    out = tmp_path / "out"
    steps = NAN_AFTER + 15
    trainer = _causal_lm_trainer(out, max_steps=steps)
    trainer.add_callback(TrackmuxCallback(trainer, project="hf-nostop", backends=[]))
    trainer.add_callback(_Faults(NAN_AFTER))
    trainer.train()
    assert trainer.state.global_step == steps
    assert not list(out.glob("checkpoint-*"))
    [run_dir] = spool_runs(tracker_env["spool"], "hf-nostop")
    assert summarize(run_dir).state == "finished"
    stored = load_stored_findings(run_dir) or []
    assert any(f["rule"] == "nonfinite" for f in stored), stored
    assert "stop_reason" not in spool_meta(run_dir)


def test_trl_grpo_stops_on_a_named_warning_rule(tmp_path: Path,
                                                tracker_env: dict[str, Path]) -> None:
    """TRL GRPO whose every group is flat (a reward nothing can earn): stop_on names the
    warning rule ``zero_std_groups``; GRPO saves its checkpoint and stops."""
    pytest.importorskip("trl")
    from tiny_hf import grpo_trainer, reward_answer_tag

    from trackmux.integrations.transformers import TrackmuxCallback

    steps = 200
    out = tmp_path / "out"
    trainer = grpo_trainer(out, steps, reward_funcs=[reward_answer_tag])
    trainer.add_callback(TrackmuxCallback(trainer, project="grpo-stop", backends=[],
                                          doctor={"stop_on": ["zero_std_groups"]}))
    trainer.add_callback(_Faults(None))
    trainer.train()
    stopped_at = trainer.state.global_step
    assert stopped_at < steps
    assert (out / f"checkpoint-{stopped_at}" / "trainer_state.json").is_file()
    [run_dir] = spool_runs(tracker_env["spool"], "grpo-stop")
    meta = spool_meta(run_dir)
    assert meta["state"] == "stopped"
    assert meta["stop_reason"]["rule"] == "zero_std_groups"
    assert meta["stop_reason"]["severity"] == "warning"



def test_resumed_from_the_stop_checkpoint_it_is_the_same_run_with_its_stop_in_history(
        tmp_path: Path, tracker_env: dict[str, Path]) -> None:
    """A NaN only in what is logged at step 6 (the weights stay sound): the Trainer stops
    with checkpoint-N; resumed from it, the same run goes on (attempt 2) to its end and
    ends finished, the stop of attempt 1 kept in its history."""
    from transformers import TrainerCallback

    from trackmux.integrations.transformers import TrackmuxCallback

    class NanInTheLog(TrainerCallback):  # type: ignore[misc]
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
                   **kwargs: Any) -> None:
            if logs is not None and state.global_step == NAN_AFTER + 1:
                logs["loss"] = math.nan

    out = tmp_path / "out"
    first = _causal_lm_trainer(out)
    first.add_callback(NanInTheLog())  # before the tracker: it logs the changed dict
    first.add_callback(TrackmuxCallback(first, project="hf-resume", backends=[],
                                        doctor={"stop_on": "critical"}))
    first.add_callback(_Faults(None))
    first.train()
    stopped_at = first.state.global_step
    assert stopped_at < MAX_STEPS
    [run_dir] = spool_runs(tracker_env["spool"], "hf-resume")
    assert spool_meta(run_dir)["state"] == "stopped"

    again = _causal_lm_trainer(out, max_steps=stopped_at + 3)
    again.add_callback(TrackmuxCallback(again, project="hf-resume", backends=[],
                                        doctor={"stop_on": "critical"}))
    again.train(resume_from_checkpoint=str(out / f"checkpoint-{stopped_at}"))
    assert again.state.global_step == stopped_at + 3
    assert spool_runs(tracker_env["spool"], "hf-resume") == [run_dir]  # the same run
    meta = spool_meta(run_dir)
    assert meta["state"] == "finished" and meta["attempt"] == 2
    assert meta["stop_reason"] is None
    [stop] = meta["stops"]
    assert stop["attempt"] == 1 and stop["finding"]["rule"] == "nonfinite"
