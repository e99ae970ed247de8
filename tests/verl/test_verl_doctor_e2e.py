"""The doctor on the verl path (issue 32), end to end: a finding in the spool, on the file
backend and from ``trackmux doctor RUN --json``, read from verl's own key names.

- A real verl SFT run (``verl.trainer.sft_trainer`` on CPU, as in test_verl.py) with a
  learning rate so large that the first update wrecks the weights: verl itself logs a
  non-finite ``train/loss`` and ``train/grad_norm``.
- PPO cannot run here (its rollout needs a GPU engine), so a GRPO run's metrics, under the
  names verl 0.9.1's ``RayPPOTrainer.fit`` logs (``critic/score/mean``, ``actor/kl_loss``,
  ``actor/ppo_kl``, ``actor/entropy``, ``response_length/mean``, ... from
  verl/trainer/ppo/metric_utils.py and core_algos.py), are replayed through
  ``verl.utils.tracking.Tracking`` as trackmux's plugin replaces it: the KL to the
  reference runs away. Its healthy twin (the same stream, no runaway) raises nothing.
"""

from __future__ import annotations

import gc
import math
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from conftest import sft_command, sft_env
from trackmux.doctor.read import load_stored_findings

pytest.importorskip("verl")

#: a bound for a hung verl run, not a duration (the time is printed): a run takes well under
#: 2 minutes alone, and the tests of this bound's shape ran to 1.4x their old bounds beside
#: a second full suite (tests/verl/test_verl_watch.py)
SFT_BUDGET_S = 600


def findings_file(root: Path, project: str, experiment: str) -> list[dict[str, Any]]:
    path = root / project / f"{experiment}.findings.jsonl"
    if not path.exists():  # the file backend writes it at the first finding
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def cli_findings(run_dir: Path) -> tuple[int, dict[str, Any]]:
    """``trackmux doctor RUN --json --explain`` in a new process: (exit code, its record)."""
    proc = subprocess.run([sys.executable, "-m", "trackmux", "doctor", str(run_dir), "--json",
                           "--explain"], capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    (record,) = [orjson.loads(line) for line in proc.stdout.splitlines()]
    return proc.returncode, record


def run_dir_of(spool: Path, project: str) -> Path:
    (run_dir,) = [p for p in (spool / project).iterdir() if (p / "spool.db").exists()]
    return run_dir


# -- a real verl SFT run whose learning rate wrecks the weights -------------------------------
@pytest.mark.slow
def test_sft_run_with_a_wrecking_learning_rate_is_found_non_finite(
        tiny_assets: dict[str, Path], tmp_path: Path, tracker_env: dict[str, Path]) -> None:
    command = [arg for arg in sft_command(tiny_assets, tmp_path)
               if not arg.startswith(("trainer.logger=", "trainer.project_name=",
                                      "trainer.experiment_name="))]
    command += ["trainer.logger=[console,file]", "trainer.project_name=sft-doctor",
                "trainer.experiment_name=lr1e30", "optim.lr=1e30"]
    start = time.monotonic()
    proc = subprocess.run(command, env=sft_env(tracker_env), cwd=tmp_path,
                          capture_output=True, text=True, timeout=SFT_BUDGET_S)
    print(f"faulty verl SFT run: {time.monotonic() - start:.1f} s")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    run_dir = run_dir_of(tracker_env["spool"], "sft-doctor")
    logged = [orjson.loads(line) for line in (tracker_env["file_root"] / "sft-doctor"
                                              / "lr1e30.jsonl").read_bytes().splitlines()]
    losses = {r["step"]: r["data"].get("train/loss") for r in logged if "train/loss" in r["data"]}
    assert losses[1] is not None and math.isfinite(losses[1])  # the first step is sane
    # the fault is real: verl's own loss is non-finite after the first update
    broken = sorted(s for s, v in losses.items() if v is None or not math.isfinite(v))
    assert broken, losses

    stored = load_stored_findings(run_dir)
    assert stored is not None, "the live doctor did not watch the run"
    found = [f for f in stored if f["rule"] == "nonfinite"]
    assert found, stored
    assert found[0]["severity"] == "critical" and found[0]["step"] == broken[0]
    assert "train/loss" in found[0]["keys"]
    filed = findings_file(tracker_env["file_root"], "sft-doctor", "lr1e30")
    assert [(f["rule"], f["step"], f["keys"]) for f in filed if f["rule"] == "nonfinite"] \
        == [(f["rule"], f["step"], f["keys"]) for f in found]
    code, record = cli_findings(run_dir)
    assert code == 1
    assert [(f["step"], f["keys"]) for f in record["findings"] if f["rule"] == "nonfinite"] \
        == [(f["step"], f["keys"]) for f in found]
    # verl's SFT keys (train/loss, train/grad_norm, train/lr ...) are verl's, though
    # other trainers share some of the names; the evidence quotes the non-finite values
    assert record["explain"]["dialects"] == ["verl"], record["explain"]
    assert {k["dialect"] for keys in record["explain"]["signals"].values() for k in keys} \
        == {"verl"}
    proof = [(f, e) for f in record["findings"] if f["rule"] == "nonfinite"
             for e in f["evidence"]]
    assert proof and all(e["value"] in ("nan", "inf", "-inf") and e["step"] == f["step"]
                         and e["key"] in f["keys"] for f, e in proof), proof
    assert {e["key"] for f, e in proof if f["step"] == broken[0]} >= {"train/loss"}


# -- verl's PPO metric names, replayed through verl's Tracking --------------------------------
STEPS = 120
RUNAWAY_FROM = 70  # the KL to the reference starts to climb here


def grpo_metrics(step: int, rng: random.Random, runaway: bool) -> dict[str, float]:
    """One step of a verl GRPO run (use_kl_loss=True), with verl 0.9.1's key names."""
    noise = rng.gauss
    kl = 0.004 + 0.0005 * noise(0, 1)
    if runaway and step > RUNAWAY_FROM:
        kl *= 1.09 ** (step - RUNAWAY_FROM)  # about 0.3 by step 120
    score = 0.2 + 0.4 * (1 - math.exp(-step / 40)) + 0.02 * noise(0, 1)
    length = 300 + 0.5 * step + 8 * noise(0, 1)
    return {
        "critic/score/mean": score, "critic/score/max": 1.0, "critic/score/min": 0.0,
        "critic/rewards/mean": score, "critic/rewards/max": 1.0, "critic/rewards/min": 0.0,
        "critic/advantages/mean": 0.01 * noise(0, 1), "critic/advantages/max": 1.8,
        "critic/advantages/min": -1.8, "critic/returns/mean": 0.01 * noise(0, 1),
        "response_length/mean": length, "response_length/max": 512.0,
        "response_length/min": 40.0, "response_length/clip_ratio": 0.01 + 0.003 * noise(0, 1),
        "prompt_length/mean": 120.0, "prompt_length/clip_ratio": 0.0,
        "actor/pg_loss": 0.01 * noise(0, 1), "actor/kl_loss": kl, "actor/kl_coef": 0.001,
        "actor/ppo_kl": 0.0005 + 0.0001 * noise(0, 1),
        "actor/pg_clipfrac": 0.002 + 0.0004 * noise(0, 1),
        "actor/pg_clipfrac_lower": 0.0001 + 0.00002 * noise(0, 1),
        "actor/entropy": 0.9 - 0.001 * step + 0.02 * noise(0, 1),
        "actor/grad_norm": 0.3 + 0.05 * noise(0, 1), "actor/lr": 1e-6,
        "training/global_step": float(step), "training/epoch": 0.0,
        "timing_s/gen": 30 + noise(0, 1), "timing_s/update_actor": 20 + noise(0, 1),
        "timing_s/step": 60 + noise(0, 1), "perf/throughput": 900 + 20 * noise(0, 1),
    }


@pytest.mark.parametrize("runaway", [True, False], ids=["kl-runaway", "healthy"])
def test_verl_ppo_metrics_through_tracking_kl_runaway(
        runaway: bool, tracker_env: dict[str, Path]) -> None:
    import verl.utils.tracking as vt

    start = time.monotonic()
    experiment = "kl-runaway" if runaway else "healthy"
    tracking = vt.Tracking(project_name="ppo-doctor", experiment_name=experiment,
                           default_backend=["file"], config={"trainer": {}})
    run_dir = tracking.run.dir
    rng = random.Random(7)
    sent: dict[int, dict[str, float]] = {}
    for step in range(1, STEPS + 1):
        sent[step] = grpo_metrics(step, rng, runaway)
        tracking.log(data=sent[step], step=step)
    assert tracking.finish(exit_code=0).complete
    del tracking
    gc.collect()

    stored = load_stored_findings(run_dir)
    assert stored is not None, "the live doctor did not watch the run"
    serious = [f for f in stored if f["severity"] != "info"]
    filed = findings_file(tracker_env["file_root"], "ppo-doctor", experiment)
    code, record = cli_findings(run_dir)
    print(f"verl PPO replay ({experiment}): {time.monotonic() - start:.1f} s")
    if not runaway:
        assert not serious, serious
        assert code == 0 and not [f for f in record["findings"] if f["severity"] != "info"]
        return
    kl = [f for f in serious if f["rule"] == "kl_blowup"]
    assert kl, stored
    (found,) = kl
    assert found["keys"] == ["actor/kl_loss"]
    assert RUNAWAY_FROM < found["step"] <= STEPS
    assert found["evidence"], found
    for item in found["evidence"]:  # every number quoted is what verl logged at that step
        assert item["key"] == "actor/kl_loss"
        assert item["value"] == sent[item["step"]]["actor/kl_loss"]
    # the file backend appends each event of the finding (its updates too: issue 42);
    # the last is the state the readers show
    kl_filed = [f for f in filed if f["rule"] == "kl_blowup"]
    assert kl_filed and {f["id"] for f in kl_filed} == {found["id"]}
    shown = ("step", "rule", "severity", "keys", "message", "evidence", "revision")
    assert {k: kl_filed[-1][k] for k in shown} == {k: found[k] for k in shown}
    assert code == 1
    offline = [f for f in record["findings"] if f["rule"] == "kl_blowup"]
    assert [(f["step"], f["keys"], f["evidence"]) for f in offline] == [
        (found["step"], found["keys"], found["evidence"])]
    assert record["explain"]["dialects"][0] == "verl"
    fed = {k["key"]: k["dialect"] for k in record["explain"]["signals"]["kl"]}
    assert "verl" in fed["actor/kl_loss"].split("/")
