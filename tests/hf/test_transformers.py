"""TrackmuxCallback with real transformers/TRL: a GRPO run on CPU, read back from each
backend's own storage, and a SIGKILL + ``resume_from_checkpoint`` that leaves one run."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from tiny_hf import grpo_trainer

import trackmux
from conftest import (
    HERE,
    mlflow_history,
    mlflow_run,
    mlflow_table,
    spool_events,
    spool_runs,
    tensorboard_scalars,
    tensorboard_texts,
)
from trackmux.integrations import hf_common, trl_samples
from trackmux.samples.read import iter_samples, list_sample_keys
from trackmux.testing.pacer import HeldCommits

pytest.importorskip("trl")
BACKENDS = ["file", "tensorboard", "mlflow"]


# -- pure helpers ----------------------------------------------------------------------------
def test_trainer_keys_match_transformers_rewrite_logs() -> None:
    from transformers.integrations.integration_utils import rewrite_logs

    logs = {"loss": 1.0, "eval_loss": 2.0, "test_acc": 0.5, "rewards/f/mean": 0.1,
            "eval_rewards/f/mean": 0.2, "learning_rate": 1e-3}
    assert hf_common.trainer_keys(logs) == rewrite_logs(logs)


def test_conversations_become_text() -> None:
    prompt = [{"role": "user", "content": "hi"},
              {"role": "assistant", "content": [{"type": "text", "text": "a "},
                                                {"type": "image"}]}]
    assert trl_samples.as_text(prompt) == "user: hi\nassistant: a <image>"
    assert trl_samples.as_text("plain") == "plain"


# -- a real GRPO run -------------------------------------------------------------------------
def test_grpo_run_reaches_every_backend_with_samples_per_step(
        tmp_path: Path, tracker_env: dict[str, Path]) -> None:
    from trackmux.integrations.transformers import TrackmuxCallback

    trainer = grpo_trainer(tmp_path / "out", 4, eval_strategy="steps", eval_steps=2,
                           per_device_eval_batch_size=4, run_name="tiny-grpo")
    callback = TrackmuxCallback(trainer, project="hf-grpo", backends=BACKENDS)  # samples on
    trainer.add_callback(callback)
    trainer.train()
    assert callback.run is None  # finished at train end
    (run_dir,) = spool_runs(tracker_env["spool"], "hf-grpo")
    events = spool_events(run_dir)

    metrics: dict[str, dict[int, float]] = {}
    for event in events:
        if isinstance(event, trackmux.MetricsEvent):
            for key, value in event.data.items():
                metrics.setdefault(key, {})[event.step] = value
    # the Trainer's keys, at global_step, as transformers' own wandb callback names them
    assert sorted(metrics["train/loss"]) == [1, 2, 3, 4]
    assert sorted(metrics["train/reward"]) == [1, 2, 3, 4]
    assert sorted(metrics["train/rewards/reward_colour/mean"]) == [1, 2, 3, 4]
    assert sorted(metrics["eval/loss"]) == [2, 4]
    assert "train/train_runtime" in metrics
    history = trainer.state.log_history
    assert metrics["train/loss"][2] == pytest.approx(
        next(h["loss"] for h in history if h.get("step") == 2 and "loss" in h))

    config = next(e for e in events if isinstance(e, trackmux.ConfigEvent)).config
    assert config["learning_rate"] == pytest.approx(1e-3)  # TrainingArguments
    assert config["num_generations"] == 4  # GRPOConfig
    assert config["hidden_size"] == 32 and config["model_type"] == "llama"  # model config
    assert config["model/num_parameters"] > 0

    # completions: one batch of samples per logging step (train) and per evaluation, in
    # the rollout ledger with their step
    keys = list_sample_keys(run_dir)
    assert keys == {"completions": [1, 2, 3, 4], "eval/completions": [2, 4]}
    assert not [e for e in events if isinstance(e, trackmux.TableEvent)]
    rows = list(iter_samples(run_dir, key="completions", step=3))
    assert len(rows) == 4 and [r["sample"] for r in rows] == [0, 1, 2, 3]
    assert set(rows[0]) >= {"prompt", "response", "reward", "reward/reward_length",
                            "reward/reward_colour", "advantage", "group"}
    for row in rows:  # the weighted sum TRL logs as `reward`
        assert row["reward"] == pytest.approx(row["reward/reward_length"]
                                              + row["reward/reward_colour"])
        assert isinstance(row["prompt"], str) and isinstance(row["response"], str)
    assert {r["group"] for r in rows} == {0}  # one GRPO group of 4: one prompt
    assert len({r["prompt"] for r in rows}) == 1
    mean_colour = sum(r["reward/reward_colour"] for r in rows) / 4
    assert mean_colour == pytest.approx(metrics["train/rewards/reward_colour/mean"][3])
    assert len(list(iter_samples(run_dir, key="eval/completions", step=4))) == 4

    # tensorboard: the scalars per step, and each step's samples as a markdown table
    board = tensorboard_scalars(tracker_env["tensorboard"])
    assert board["train/loss"] == pytest.approx(metrics["train/loss"])
    assert board["eval/loss"] == pytest.approx(metrics["eval/loss"])
    texts = tensorboard_texts(tracker_env["tensorboard"], "completions")
    train_text = texts[next(t for t in texts if not t.startswith("eval"))]
    assert sorted(train_text) == [1, 2, 3, 4]
    assert sorted(texts[next(t for t in texts if t.startswith("eval"))]) == [2, 4]
    assert "reward/reward_colour" in train_text[3] and "group" in train_text[3]
    # mlflow: the same series, and each step's samples as a table artifact
    client, ml_run = mlflow_run(tracker_env["mlflow_db"], "hf-grpo")
    assert ml_run.info.status == "FINISHED" and ml_run.info.run_name == "tiny-grpo"
    assert {s: v[-1] for s, v in mlflow_history(client, ml_run, "train/loss").items()} \
        == pytest.approx(metrics["train/loss"])
    artifacts = {a.path for a in client.list_artifacts(ml_run.info.run_id,
                                                       "tables/completions")}
    assert artifacts == {f"tables/completions/step_{s}.json" for s in (1, 2, 3, 4)}
    shown = mlflow_table(client, ml_run, "tables/completions/step_3.json", tmp_path / "dl")
    assert [(r["step"], r["sample"], r["prompt"], r["response"], r["group"]) for r in shown] \
        == [(3, r["sample"], r["prompt"], r["response"], r["group"]) for r in rows]
    assert [r["reward"] for r in shown] == pytest.approx([r["reward"] for r in rows])
    assert ml_run.data.params["num_generations"] == "4"

    # a healthy run: the live doctor stored no warning or critical finding
    from trackmux.doctor.read import load_stored_findings

    stored = load_stored_findings(run_dir)
    assert stored is not None, "the live doctor did not watch the run"
    assert not [f for f in stored if f["severity"] != "info"], stored

    # an evaluation after train() continues the same run (one attempt more, no rewind)
    trainer.evaluate()
    assert callback.run is not None and callback.run.id == run_dir.name
    callback.finish()
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run_dir)
    try:
        assert [(a.number, a.rewind_to) for a in reader.attempts()] == [(1, None), (2, None)]
        evals = [e.step for e in reader.iter_events()
                 if isinstance(e, trackmux.MetricsEvent) and "eval/loss" in e.data]
    finally:
        reader.close()
    assert evals == [2, 4, 4]


def test_samples_follow_log_completions_and_an_error_finishes_the_run(
        tmp_path: Path, tracker_env: dict[str, Path]) -> None:
    """samples=False logs no completions; a reward function that raises ends train() and
    the bound callback finishes the run as failed."""
    from tiny_hf import reward_length

    from trackmux.integrations.transformers import track

    calls = []

    def flaky(completions: list[str], **kwargs: Any) -> list[float]:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("reward server down")
        return [0.0] * len(completions)

    trainer = grpo_trainer(tmp_path / "out", 3, reward_funcs=[reward_length, flaky])
    callback = track(trainer, project="hf-fail", backends=["file"], samples=False)
    assert track(trainer) is callback  # idempotent
    with pytest.raises(RuntimeError, match="reward server down"):
        trainer.train()
    assert callback.run is None
    (run_dir,) = spool_runs(tracker_env["spool"], "hf-fail")
    events = spool_events(run_dir)
    assert list_sample_keys(run_dir) == {}
    assert [e.step for e in events if isinstance(e, trackmux.MetricsEvent)] == [1]
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run_dir)
    try:
        meta = reader.meta()
    finally:
        reader.close()
    assert meta["state"] == "failed" and meta.get("exit_code") == 1, meta


def test_a_checkpoint_is_written_after_the_steps_before_it_are_in_the_spool(
        tmp_path: Path, tracker_env: dict[str, Path], held_commits: HeldCommits) -> None:
    """The Trainer asks the callback for its state while it writes checkpoint N; the spool
    has committed steps 1..N by then (a kill after the checkpoint could otherwise take the
    last of them, and the resumed run, rewound to N, never logs them again)."""
    from transformers import TrainerCallback

    from trackmux.integrations.transformers import TrackmuxCallback

    # held_commits: nothing commits by time alone, only the callback's flush at each save
    at_save: dict[int, list[int]] = {}

    class Look(TrainerCallback):  # type: ignore[misc]
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            (run_dir,) = spool_runs(tracker_env["spool"], "hf-ckpt")
            at_save[state.global_step] = sorted(
                e.step for e in spool_events(run_dir)
                if isinstance(e, trackmux.MetricsEvent) and "train/loss" in e.data)

    trainer = grpo_trainer(tmp_path / "out", 4, save_strategy="steps", save_steps=2)
    trainer.add_callback(TrackmuxCallback(trainer, project="hf-ckpt", backends=[]))
    trainer.add_callback(Look())
    trainer.train()
    assert at_save == {2: [1, 2], 4: [1, 2, 3, 4]}


# -- kill and resume_from_checkpoint ---------------------------------------------------------
def _env(paths: dict[str, Path]) -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS="1")


@pytest.mark.slow
def test_killed_and_resumed_from_checkpoint_is_one_run_with_each_step_once(
        tmp_path: Path, tracker_env: dict[str, Path]) -> None:
    script = [sys.executable, str(HERE / "grpo_script.py"), str(tmp_path / "out"), "6"]
    first = subprocess.Popen([*script, "--hang-at", "3"], env=_env(tracker_env),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
    marker = tmp_path / "out" / "hanging"

    def delivered_step_3() -> bool:  # mlflow's default artifact root is ./mlruns (cwd)
        return any(p.parent.name == "completions" and p.parent.parent.name == "tables"
                   for p in (tmp_path / "mlruns").rglob("step_3.json"))

    deadline = time.monotonic() + 240
    try:  # killed once step 3's samples reached mlflow: the resume must replace them
        while not (marker.exists() and delivered_step_3()):
            assert first.poll() is None, first.stdout.read().decode()[-5000:]  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the first attempt did not deliver step 3"
            time.sleep(0.2)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(first.pid, signal.SIGKILL)
        first.wait(30)
    (run_dir,) = spool_runs(tracker_env["spool"], "hf-resume")
    state = orjson.loads((tmp_path / "out" / "checkpoint-2" / "trainer_state.json")
                         .read_bytes())
    record = state["stateful_callbacks"]["TrackmuxCallback"]["attributes"]["trackmux_run"]
    assert record["run_id"] == run_dir.name
    killed = [e.step for e in spool_events(run_dir)
              if isinstance(e, trackmux.MetricsEvent) and "train/loss" in e.data]
    assert killed == [1, 2, 3]

    proc = subprocess.run([*script, "--resume"], env=_env(tracker_env), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]

    assert spool_runs(tracker_env["spool"], "hf-resume") == [run_dir]
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run_dir)
    try:
        attempts = [(a.number, a.rewind_to) for a in reader.attempts()]
        live = list(reader.iter_events())
    finally:
        reader.close()
    assert attempts == [(1, None), (2, 2)]
    steps = [e.step for e in live if isinstance(e, trackmux.MetricsEvent)
             and "train/loss" in e.data]
    assert steps == [1, 2, 3, 4, 5, 6]  # step 3 of the killed attempt is superseded
    # samples: each step once; the killed attempt's step 3 is superseded by the re-done one
    assert list_sample_keys(run_dir) == {"completions": [1, 2, 3, 4, 5, 6]}
    samples = list(iter_samples(run_dir, key="completions"))
    assert [r["step"] for r in samples] == [s for s in (1, 2, 3, 4, 5, 6) for _ in range(4)]
    spooled_samples = {s: [r for r in samples if r["step"] == s] for s in (1, 2, 3, 4, 5, 6)}
    spooled = {e.step: e.data["train/loss"] for e in live
               if isinstance(e, trackmux.MetricsEvent) and "train/loss" in e.data}
    # tensorboard: one event file, one point per step, the live values
    assert len(list(tracker_env["tensorboard"].rglob("*tfevents*"))) == 1
    assert tensorboard_scalars(tracker_env["tensorboard"])["train/loss"] == pytest.approx(
        spooled)
    (text,) = tensorboard_texts(tracker_env["tensorboard"], "completions").values()
    assert sorted(text) == [1, 2, 3, 4, 5, 6]
    # mlflow: one run, finished; the latest value of each step is the live one
    client, ml_run = mlflow_run(tracker_env["mlflow_db"], "hf-resume")
    assert ml_run.info.status == "FINISHED"
    history = mlflow_history(client, ml_run, "train/loss")
    assert sorted(history) == [1, 2, 3, 4, 5, 6]
    assert {s: v[-1] for s, v in history.items()} == pytest.approx(spooled)
    artifacts = {a.path for a in client.list_artifacts(ml_run.info.run_id,
                                                       "tables/completions")}
    assert artifacts == {f"tables/completions/step_{s}.json" for s in (1, 2, 3, 4, 5, 6)}
    for step in (2, 3, 4):  # step 3's table holds the live samples only, not both attempts'
        shown = mlflow_table(client, ml_run, f"tables/completions/step_{step}.json",
                             tmp_path / f"dl{step}")
        assert [(r["sample"], r["response"]) for r in shown] == [
            (r["sample"], r["response"]) for r in spooled_samples[step]], step
    # the file backend appends (docs/backends/file.md): the last line of each step is live
    lines = [orjson.loads(line) for line in
             (tracker_env["file_root"] / "hf-resume" / "grpo-resume.jsonl").read_bytes()
             .splitlines()]
    last = {r["step"]: r["data"]["train/loss"] for r in lines if "train/loss" in r["data"]}
    assert last == pytest.approx(spooled)


def test_samples_go_to_the_ledger_and_never_stop_training(
        tracker_env: dict[str, Path]) -> None:
    """``hf_common.log_samples`` on a real run: the batch lands in the rollout ledger; a
    sample with a bad cell is dropped alone; a finished run is named, not raised."""
    run = trackmux.init(project="hf-ledger", backends=["file"], delivery="thread")
    samples = {"prompt": ["p", "p", "q"], "response": ["a", "b", "c"],
               "reward": [1.0, 0.0, 0.5], "group": [0, 0, 1],
               "meta": ["ok", "ok", {"not": "a cell"}]}
    hf_common.log_samples(run, "completions", samples, step=3)
    run.finish()
    hf_common.log_samples(run, "completions", samples, step=4)  # finished: no raise
    assert list_sample_keys(run.dir) == {"completions": [3]}
    rows = list(iter_samples(run.dir, key="completions", step=3))
    assert [(r["prompt"], r["response"], r["reward"], r["group"]) for r in rows] == [
        ("p", "a", 1.0, 0), ("p", "b", 0.0, 0)]


def test_the_trainers_own_log_lines_are_not_printed_twice(
        tmp_path: Path, tracker_env: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 33.19: with report_to="none" the Trainer prints each log dict (PrinterCallback,
    or ProgressCallback under its bar), and trackmux's default console printed it again.
    The callback's default leaves console out while the Trainer prints; asked, it is in."""
    from transformers.trainer_callback import PrinterCallback

    from trackmux.core.spool.reader import SpoolReader
    from trackmux.integrations.transformers import TrackmuxCallback

    def train(project: str, printing: bool, **options: Any) -> tuple[str, dict[str, Any]]:
        trainer = grpo_trainer(tmp_path / project, 2)  # disable_tqdm: PrinterCallback
        if not printing:
            trainer.remove_callback(PrinterCallback)
        trainer.add_callback(TrackmuxCallback(trainer, project=project, samples=False,
                                              **options))
        trainer.train()
        (run_dir,) = spool_runs(tracker_env["spool"], project)
        reader = SpoolReader(run_dir)
        try:
            meta = reader.meta()
            assert [e.step for e in reader.events_of_kind("metrics")][:2] == [1, 2]
        finally:
            reader.close()
        return capsys.readouterr().out, meta

    out, meta = train("hf-print", printing=True)
    assert out.count("'loss'") >= 2  # the Trainer's own dict at each logging step
    assert "step:1 - " not in out and meta["backends"] == []  # once, not twice
    out, meta = train("hf-print-asked", printing=True, backends=["console"])
    assert "step:1 - " in out and meta["backends"] == ["console"]  # asked for: honoured
    out, meta = train("hf-quiet", printing=False)
    assert "'loss'" not in out and "step:1 - " in out  # nobody else prints: console is in
    assert meta["backends"] == ["console"]
