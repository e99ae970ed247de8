"""verl stops when the doctor asks (issue 45): ``+trainer.trackmux.doctor.stop_on=critical``.

The real SFT trainer on CPU ends its loop at the step where the flag is seen, saving its
checkpoint with its own saver; PPO's ``_save_checkpoint`` (verl's own code, with its workers
stood in, as the verl checkpoint tests do) writes ``global_step_N`` on the step after it,
where verl's loop ends. The run ends ``stopped``; without ``stop_on`` nothing changes."""

from __future__ import annotations

import math
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import sft_command, sft_env
from spool_support import spool_meta

pytest.importorskip("verl")

NAN_FROM = 6  # the stand-in PPO loop logs a NaN policy loss from this step on
MAX_STEPS = 3000  # the loop's own end: only the doctor's stop ends it sooner


def only_run(root: Path, project: str) -> Path:
    (run_dir,) = sorted(p.parent for p in (root / project).glob("*/spool.db"))
    return run_dir


# -- PPO: verl's own saver, the loop's order as in RayPPOTrainer.fit ------------------------
def ppo_trainer(tmp_path: Path, save_freq: int, stop_on: Any) -> Any:
    from omegaconf import OmegaConf
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    class Workers:  # the actor's worker group: verl asks it to write the model
        def __init__(self) -> None:
            self.saved: list[int] = []

        def save_checkpoint(self, local_path: str, hdfs_path: str | None, global_step: int,
                            max_ckpt_to_keep: int | None = None) -> None:
            Path(local_path).mkdir(parents=True, exist_ok=True)
            self.saved.append(global_step)

    class Loader:
        def state_dict(self) -> dict[str, int]:
            return {"position": 1}

    class Trainer(RayPPOTrainer):  # type: ignore[misc]
        """verl's RayPPOTrainer with its workers, rollout and data stood in; ``fit`` keeps
        the order of verl 0.9.1's loop: is_last_step before the step, the save, the log at
        its end, then the step count and the return."""

        def __init__(self) -> None:
            doctor = {"stop_on": stop_on} if stop_on is not None else {}
            self.config = OmegaConf.create({
                "trainer": {"project_name": "ppo-stop", "experiment_name": "nan",
                            "logger": ["file"], "save_freq": save_freq,
                            "default_local_dir": str(tmp_path / "ckpt"),
                            "default_hdfs_dir": None, "trackmux": {"doctor": doctor}},
                "actor_rollout_ref": {"actor": {"checkpoint": {"async_save": False}}}})
            self.actor_rollout_wg = Workers()
            self.use_critic = False
            self.train_dataloader = Loader()
            self.total_training_steps = MAX_STEPS

        def fit(self) -> None:
            from omegaconf import OmegaConf
            from verl.utils.tracking import Tracking

            logger = Tracking(project_name=self.config.trainer.project_name,
                              experiment_name=self.config.trainer.experiment_name,
                              default_backend=self.config.trainer.logger,
                              config=OmegaConf.to_container(self.config, resolve=True))
            self.global_steps = 0
            self.global_steps += 1
            while True:
                is_last_step = self.global_steps >= self.total_training_steps
                time.sleep(0.01)  # a training step takes time
                if self.config.trainer.save_freq > 0 and (
                        is_last_step or self.global_steps % self.config.trainer.save_freq == 0):
                    self._save_checkpoint()
                loss = math.nan if self.global_steps >= NAN_FROM else 0.1
                logger.log(data={"actor/pg_loss": loss, "critic/score/mean": 0.5},
                           step=self.global_steps)
                self.global_steps += 1
                if is_last_step:
                    logger.finish()
                    return

    return Trainer()


@pytest.mark.parametrize("save_freq", [0, 1000])
def test_ppo_saves_its_checkpoint_on_the_next_step_and_ends_stopped(
        tmp_path: Path, tracker_env: dict[str, Path], save_freq: int) -> None:
    trainer = ppo_trainer(tmp_path, save_freq, "critical")
    trainer.fit()
    last = trainer.global_steps - 1  # the loop's last step
    assert NAN_FROM < last < MAX_STEPS
    # verl's own saver wrote the last step's checkpoint, once: verl's (save_freq > 0) or,
    # where verl saves nothing on its last step, the drop-in's call of it
    assert trainer.actor_rollout_wg.saved == [last]
    assert (tmp_path / "ckpt" / f"global_step_{last}" / "data.pt").is_file()
    assert (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").read_text() == str(last)
    meta = spool_meta(only_run(tracker_env["spool"], "ppo-stop"))
    assert meta["state"] == "stopped"
    assert meta["stop_reason"]["rule"] == "nonfinite"
    [stop] = meta["stops"]
    # asked after step stop["step"] was logged, seen at a log() by step last - 1 at the
    # latest: the step after that one is the last
    assert NAN_FROM <= stop["step"] <= last - 1


def test_ppo_without_stop_on_runs_to_its_end(tmp_path: Path, tracker_env: dict[str, Path],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACKMUX_DOCTOR_STOP_ON", raising=False)
    trainer = ppo_trainer(tmp_path, 0, None)
    trainer.total_training_steps = NAN_FROM + 20
    trainer.fit()
    assert trainer.global_steps - 1 == NAN_FROM + 20
    assert trainer.actor_rollout_wg.saved == []
    meta = spool_meta(only_run(tracker_env["spool"], "ppo-stop"))
    assert meta["state"] == "finished" and "stop_reason" not in meta


# -- the real SFT trainer on CPU -------------------------------------------------------------
#: enough steps that the doctor's flag (about 0.5 s after the finding with the delivery
#: process, more on a loaded machine) arrives before verl's own last step: CI at load 6 saw
#: the 7 steps of a tiny model end before the flag came (the stop then fell on step 7)
SFT_STEPS = 60


def stop_command(assets: dict[str, Path], work: Path, extra: list[str]) -> list[str]:
    """The SFT command for SFT_STEPS steps of batches of 2, no periodic save, and a tiny threshold
    the loss passes at once (a user's own rule: ``kl_blowup`` on ``train/loss`` with an
    absolute ``bound``), so the doctor finds it from the first step."""
    overrides = {"trainer.total_training_steps": str(SFT_STEPS), "trainer.total_epochs": "40",
                 "data.train_batch_size": "2", "trainer.save_freq": "-1",
                 "checkpoint.save_contents": "[model,optimizer,extra]"}
    command = [arg for arg in sft_command(assets, work)
               if arg.split("=", 1)[0] not in overrides]
    return command + [f"{key}={value}" for key, value in overrides.items()] + [
        "+trainer.trackmux.doctor.kl_blowup.keys=[train/loss]",
        "+trainer.trackmux.doctor.kl_blowup.bound=0.001", *extra]


@pytest.mark.slow
def test_sft_trainer_saves_and_leaves_fit_at_the_step_it_sees_the_stop(
        tiny_assets: dict[str, Path], tmp_path: Path, tracker_env: dict[str, Path]) -> None:
    command = stop_command(tiny_assets, tmp_path, ["+trainer.trackmux.doctor.stop_on=critical"])
    proc = subprocess.run(command, env=sft_env(tracker_env), cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    run_dir = only_run(tracker_env["spool"], "tiny-sft")
    meta = spool_meta(run_dir)
    assert meta["state"] == "stopped", meta.get("state")
    assert meta["stop_reason"]["rule"] == "kl_blowup"
    assert meta["stop_reason"]["severity"] == "critical"
    [stop] = meta["stops"]
    saved = sorted(int(p.name.split("_")[-1]) for p in (tmp_path / "ckpt").glob("global_step_*"))
    assert len(saved) == 1, saved  # verl's own save of its last step (no periodic save)
    last = saved[0]  # the step whose log() saw the flag: the SFT loop's last
    assert stop["step"] <= last < SFT_STEPS, proc.stdout[-2000:]
    assert (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").read_text() == str(last)
    assert f"verl's SFTTrainer stops at step {last}" in proc.stderr + proc.stdout


@pytest.mark.slow
def test_sft_trainer_of_two_ranks_stops_on_every_rank_at_the_same_step(
        tiny_assets: dict[str, Path], tmp_path: Path, tracker_env: dict[str, Path]) -> None:
    """torchrun with two CPU ranks (gloo): only rank 0 logs; both ranks agree at the start
    of each step (one all-reduce) and end the loop together, verl saving that step."""
    steps = SFT_STEPS  # 12 once: as for one rank, the flag must come before verl's own end
    command = stop_command(tiny_assets, tmp_path, ["+trainer.trackmux.doctor.stop_on=critical"])
    overrides = {"trainer.total_training_steps": str(steps), "trainer.total_epochs": "200",
                 "data.train_batch_size": "4"}
    command = [arg.replace("--nproc_per_node=1", "--nproc_per_node=2") for arg in command
               if arg.split("=", 1)[0] not in overrides]
    command += [f"{key}={value}" for key, value in overrides.items()]
    proc = subprocess.run(command, env=sft_env(tracker_env), cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    meta = spool_meta(only_run(tracker_env["spool"], "tiny-sft"))
    assert meta["state"] == "stopped", meta.get("state")
    saved = sorted(int(p.name.split("_")[-1]) for p in (tmp_path / "ckpt").glob("global_step_*"))
    assert len(saved) == 1 and saved[0] < steps, saved
    assert f"(every rank) stops at step {saved[0]}" in proc.stderr + proc.stdout
