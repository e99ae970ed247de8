"""`trackmux agent` for real: trial programs in subprocesses, their runs joined to the sweep,
the metric read from the run's spool, crashes as failed trials, two agents on one sweep,
and trials stopped by the doctor and by the median pruner."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweep_support import agent, cli, create, run_config, run_meta, show

from trackmux.sweeps import study
from trackmux.sweeps.storage import default_url


def test_trials_run_the_program_with_wandb_args_and_report_the_metric_from_the_run(
        root: Path, program: Path) -> None:
    sweep_id = create(root, f"""
        program: {program}
        method: random
        metric: {{name: score, goal: maximize}}
        parameters:
          lr: {{distribution: log_uniform_values, min: 0.01, max: 1.0}}
          mode: {{value: ok}}
        sampler: {{seed: 7}}
    """)
    done = cli(root, "agent", sweep_id, "--count", "3")
    assert "agent done: 3 trial(s) 3 complete" in done.stderr
    data = show(root, sweep_id)
    trials = data["trials"]
    assert [t["number"] for t in trials] == [0, 1, 2]
    for t in trials:
        assert t["state"] == "complete" and t["steps"] == 8
        assert f"--lr={t['params']['lr']}" in done.stderr  # wandb's `--name=value`
        # the metric is the run's last `score`: lr * 7, as the program logged it
        assert math.isclose(t["value"], t["params"]["lr"] * 7, rel_tol=1e-9)
        config = run_config(t["run_dir"])
        assert config["sweep"] == {"id": sweep_id, "trial": t["number"],
                                   "params": t["params"]}
        assert config["lr"] == t["params"]["lr"]
        meta = run_meta(t["run_dir"])
        assert meta["tags"] == [f"sweep:{sweep_id}", f"trial:{t['number']}"]
        assert meta["state"] == "finished" and meta["run_id"] == t["run_id"]
    best = max(trials, key=lambda t: t["value"])
    assert data["best"]["number"] == best["number"]
    text = cli(root, "sweep", "show", sweep_id).stdout
    assert f"best: trial {best['number']}" in text
    assert not list((root / ".sweeps" / "agents").iterdir())  # the agent cleans up


def test_a_crashing_program_is_a_failed_trial_and_the_agent_goes_on(
        root: Path, program: Path) -> None:
    sweep_id = create(root, f"""
        program: {program}
        method: grid
        metric: {{name: score, goal: maximize}}
        parameters:
          mode: {{values: [crash, ok, none, nan]}}
        prune: false
    """)
    done = cli(root, "agent", sweep_id)
    assert "agent done: 4 trial(s)" in done.stderr
    by_mode = {t["params"]["mode"]: t for t in show(root, sweep_id)["trials"]}
    crash = by_mode["crash"]
    assert crash["state"] == "failed"
    # the code alone says nothing: the reason ends with the program's last stderr line
    assert crash["reason"] == ("the program exited with code 1: RuntimeError: the trainer "
                               "broke")
    assert any(line.startswith("Traceback") for line in crash["stderr"])
    assert crash["steps"] == 3 and crash["run_id"]
    assert run_meta(crash["run_dir"])["state"] == "failed"
    assert by_mode["none"]["state"] == "failed"
    assert "started no trackmux run" in by_mode["none"]["reason"]
    assert by_mode["ok"]["state"] == "complete"
    # NaN is no result: the last finite value counts (pruning is off in this sweep)
    assert by_mode["nan"]["state"] == "complete"
    assert math.isclose(by_mode["nan"]["value"], 0.1 * 4)


def test_an_agent_whose_trials_all_failed_exits_non_zero_and_keeps_their_stderr(
        root: Path, program: Path) -> None:
    sweep_id = create(root, f"""
        program: {program}
        method: random
        metric: {{name: score, goal: maximize}}
        parameters:
          lr: {{values: [0.1, 0.2]}}
          mode: {{value: crash}}
        prune: false
    """)
    done = cli(root, "agent", sweep_id, "--count", "2", check=False)
    assert done.returncode == 1, done.stderr
    assert "agent done: 2 trial(s) 2 failed" in done.stderr
    assert "every trial failed" in done.stderr
    assert "RuntimeError: the trainer broke" in done.stderr  # still passed on as it came
    trials = show(root, sweep_id)["trials"]
    assert [t["state"] for t in trials] == ["failed", "failed"]
    for t in trials:
        assert t["stderr"][-1] == "RuntimeError: the trainer broke", t["stderr"]
    text = cli(root, "sweep", "show", sweep_id).stdout
    assert "its stderr ended with:" in text
    assert "| RuntimeError: the trainer broke" in text


def test_two_agents_share_one_sweep_in_sqlite(root: Path, program: Path) -> None:
    sweep_id = create(root, f"""
        program: {program}
        command: ["${{interpreter}}", "${{program}}", "--pause=0.05", "${{args}}"]
        method: bayes
        metric: {{name: score, goal: maximize}}
        parameters:
          lr: {{min: 0.0, max: 1.0}}
        sampler: {{n_startup_trials: 2}}
    """)
    agents = [agent(root, sweep_id, "--count", "3") for _ in range(2)]
    outputs = [a.communicate(timeout=300) for a in agents]
    assert [a.returncode for a in agents] == [0, 0], outputs
    trials = show(root, sweep_id)["trials"]
    assert [t["number"] for t in trials] == list(range(6))
    assert all(t["state"] == "complete" for t in trials)
    assert len({t["agent"] for t in trials}) == 2
    assert len({t["run_id"] for t in trials}) == 6  # every trial its own run


def test_a_critical_finding_prunes_the_trial_and_marks_its_run_pruned(
        root: Path, program: Path) -> None:
    sweep_id = create(root, f"""
        program: {program}
        command: ["${{interpreter}}", "${{program}}", "--steps=400", "--hold-nan",
                  "${{args}}"]
        method: grid
        metric: {{name: score, goal: maximize}}
        parameters:
          mode: {{values: [nan]}}
        prune: {{grace_seconds: 20}}
    """)
    cli(root, "agent", sweep_id)
    (trial,) = show(root, sweep_id)["trials"]
    assert trial["state"] == "pruned" and trial["pruned_by"] == "doctor"
    assert trial["reason"].startswith("nonfinite (critical) at step 5")
    assert trial["finding"]["rule"] == "nonfinite"
    assert 5 < trial["steps"] < 400  # stopped, not run to the end
    meta = run_meta(trial["run_dir"])
    assert meta["state"] == "pruned" and meta["pruned_reason"] == trial["reason"]
    assert str(meta["pruned_by"]).startswith(f"sweep {sweep_id} trial 0")
    listing = cli(root, "runs").stdout
    assert "  pruned  " in listing and "pruned by sweep" in listing
    sweeps = study.load(sweep_id, default_url(root))
    (frozen,) = sweeps.trials()
    assert frozen.state.name == "PRUNED"  # TPE ranks it below every complete trial


def test_the_median_pruner_stops_a_trial_behind_the_others(
        root: Path, program: Path) -> None:
    sweep_id = create(root, f"""
        program: {program}
        command: ["${{interpreter}}", "${{program}}", "--steps=60", "--lockstep",
                  "${{args}}"]
        method: random
        metric: {{name: score, goal: maximize}}
        parameters:
          lr: {{values: [1.0, 0.9, 0.001]}}
        early_terminate: {{type: median, n_startup_trials: 2, n_warmup_steps: 3}}
    """)
    sweeps = study.load(sweep_id, default_url(root))
    for lr in (1.0, 0.9, 0.001):  # this order: two trials set the median, the third is behind
        sweeps.study.enqueue_trial({"lr": lr})
    cli(root, "agent", sweep_id, "--count", "3")
    trials = show(root, sweep_id)["trials"]
    assert [t["state"] for t in trials] == ["complete", "complete", "pruned"]
    slow = trials[2]
    assert slow["pruned_by"] == "median" and "the median pruner" in slow["reason"]
    assert slow["steps"] < 60
    assert run_meta(slow["run_dir"])["state"] == "pruned"


def test_hyperband_stops_a_trial_behind_its_bracket_beside_the_doctor(
        root: Path, program: Path) -> None:
    """wandb's ``early_terminate: {type: hyperband}`` through a real agent: Optuna's
    HyperbandPruner (brackets of successive halving) fed with the metric as the agent reads
    it. Five trials, each worse than the one before, over three brackets: a later
    trial shares a bracket with a better one and is stopped at a rung. A NaN trial in the
    same sweep is stopped by the doctor (a NaN is never reported to the pruner). The trials
    run in lockstep with the agent (each step waits until the pruner has it): a loaded machine
    once let a trial log all 30 steps before the agent read its rung (issue 46)."""
    sweep_id = create(root, f"""
        program: {program}
        command: ["${{interpreter}}", "${{program}}", "--steps=30", "--lockstep", "--hold-nan",
                  "${{args}}"]
        method: random
        metric: {{name: score, goal: maximize}}
        parameters:
          lr: {{min: 0.0, max: 2.0}}
          mode: {{values: [ok, nan]}}
        early_terminate: {{type: hyperband, min_iter: 2, max_iter: 30, eta: 3}}
    """)
    sweeps = study.load(sweep_id, default_url(root))
    lrs = (1.0, 0.7, 0.5, 0.3, 0.1)
    for lr in lrs:
        sweeps.study.enqueue_trial({"lr": lr, "mode": "ok"})
    sweeps.study.enqueue_trial({"lr": 2.0, "mode": "nan"})  # ahead until its NaN
    cli(root, "agent", sweep_id, "--count", str(len(lrs) + 1))
    trials = show(root, sweep_id)["trials"]
    by_hyperband = [t for t in trials if t["pruned_by"] == "hyperband"]
    assert by_hyperband, [(t["state"], t["steps"], t["reason"]) for t in trials]
    for t in by_hyperband:
        assert t["state"] == "pruned" and t["steps"] < 30
        assert t["reason"].startswith("the hyperband pruner: score ")
        assert "behind the other trials" in t["reason"]
        assert t["params"]["mode"] == "ok" and t["number"] > 0  # the first leads its rungs
        assert run_meta(t["run_dir"])["state"] == "pruned"
    assert trials[0]["state"] == "complete" and trials[0]["steps"] == 30
    nan = trials[-1]
    assert nan["state"] == "pruned" and nan["pruned_by"] == "doctor"  # not "behind"
    assert nan["reason"].startswith("nonfinite (critical)")


def test_show_json_lists_a_running_trial(root: Path, program: Path) -> None:
    sweep_id = create(root, f"""
        program: {program}
        command: ["${{interpreter}}", "${{program}}", "--steps=20000", "--pause=0.01",
                  "${{args}}"]
        method: grid
        metric: {{name: score, goal: maximize}}
        parameters: {{lr: {{values: [0.5]}}}}
    """)
    proc = agent(root, sweep_id)
    try:
        for _ in range(600):  # until the agent found the trial's run
            trials = show(root, sweep_id)["trials"]
            if trials and trials[0]["run_id"]:
                break
        assert trials[0]["state"] == "running" and trials[0]["params"] == {"lr": 0.5}
        assert run_meta(trials[0]["run_dir"])["state"] == "running"
    finally:
        proc.terminate()  # SIGTERM to the agent: the trial is stopped and failed
        proc.communicate(timeout=120)
    assert proc.returncode == 128 + 15
    (trial,) = show(root, sweep_id)["trials"]
    assert trial["state"] == "failed"
    assert trial["reason"].startswith("the agent was stopped (SystemExit")
    assert run_meta(trial["run_dir"])["state"] == "failed"  # the program got SIGTERM too


def test_import_trackmux_stays_without_optuna_and_yaml() -> None:
    code = ("import trackmux, sys; print(sorted(m for m in sys.modules if m.split('.')[0] "
            "in {'optuna', 'yaml', 'sqlalchemy', 'psycopg'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert json.loads(done.stdout.replace("'", '"')) == []


def test_a_killed_agent_takes_its_trial_down_and_the_next_agent_fails_it(
        root: Path, program: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKMUX_SWEEP_HEARTBEAT", "1")  # stale after 4 s without one
    sweep_id = create(root, f"""
        program: {program}
        command: ["${{interpreter}}", "${{program}}", "--steps=3000", "--pause=0.01",
                  "${{args}}"]
        method: random
        metric: {{name: score, goal: maximize}}
        parameters: {{lr: {{values: [0.5]}}}}
    """)
    first = agent(root, sweep_id)
    try:
        for _ in range(600):
            trials = show(root, sweep_id)["trials"]
            if trials and trials[0]["run_id"]:
                break
    finally:
        first.kill()  # SIGKILL: no handler runs in the agent
        first.communicate(timeout=60)
    run_dir = trials[0]["run_dir"]
    for _ in range(600):  # the kernel sends the trial SIGTERM (PR_SET_PDEATHSIG)
        if run_meta(run_dir)["state"] != "running":
            break
        time.sleep(0.1)
    assert run_meta(run_dir)["state"] == "failed"
    assert show(root, sweep_id)["trials"][0]["state"] == "running"  # nobody told Optuna
    time.sleep(5)  # past the grace period of 4 heartbeats
    cli(root, "agent", sweep_id, "--count", "1")
    first_trial, second_trial = show(root, sweep_id)["trials"]
    assert first_trial["state"] == "failed" and "stopped answering" in first_trial["reason"]
    assert second_trial["state"] == "complete"
