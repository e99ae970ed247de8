"""A trial's run is named after its trial and parameters (issue 43 item 7): a list of runs
says which trial each one is, where it said only timestamps before."""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_support import cli, create, run_meta, show

import trackmux
from trackmux.sweeps.join import MAX_TRIAL_NAME, RUN_NAME, trial_name


def test_each_trial_run_is_named_by_its_trial_and_parameters(root: Path,
                                                              program: Path) -> None:
    sweep_id = create(root, f"""
        program: {program}
        method: random
        metric: {{name: score, goal: maximize}}
        parameters:
          lr: {{distribution: log_uniform_values, min: 0.001, max: 0.01}}
          mode: {{value: ok}}
        sampler: {{seed: 5}}
    """)
    cli(root, "agent", sweep_id, "--count", "2")
    trials = show(root, sweep_id)["trials"]
    assert len(trials) == 2
    for t in trials:
        lr = f"{t['params']['lr']:.3g}"
        assert run_meta(t["run_dir"])["name"] == f"trial-{t['number']} lr={lr} mode=ok"


def test_a_trial_name_is_short_and_the_programs_own_name_wins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert trial_name(5, {"lr": 0.0069312, "kl_coef": 0.05, "opt": "adam",
                          "layers": [2, 3]}) == \
        "trial-5 lr=0.00693 kl_coef=0.05 opt=adam layers=[2,3]"
    long = trial_name(1, {f"p{i}": 0.123456 for i in range(40)})
    assert len(long) == MAX_TRIAL_NAME and long.endswith("…")
    monkeypatch.setenv(RUN_NAME, "trial-2 lr=0.1")
    named = trackmux.init(project="p", backends=[], dir=tmp_path, name="mine")
    unnamed = trackmux.init(project="p", backends=[], dir=tmp_path)
    try:
        assert (named.name, unnamed.name) == ("mine", "trial-2 lr=0.1")
    finally:
        named.finish()
        unnamed.finish()


def test_the_sweeps_run_name_template_names_the_trials_and_is_checked() -> None:
    from trackmux.sweeps.spec import SweepSpecError, parse

    spec = parse({"program": "train.py", "method": "random",
                  "run_name": "grpo-${trial} lr${optim.lr} ${kl_coef}",
                  "parameters": {"optim": {"parameters": {"lr": {"values": [0.001]}}},
                                 "kl_coef": {"values": [0.05]}}})
    assert spec.run_name is not None
    assert trial_name(3, {"optim.lr": 0.0012345, "kl_coef": 0.05}, spec.run_name) == \
        "grpo-3 lr0.00123 0.05"
    with pytest.raises(SweepSpecError, match=r"run_name: unknown placeholder\(s\) \['\$\{lr\}'\]"):
        parse({"program": "train.py", "method": "random", "run_name": "x-${lr}",
               "parameters": {"kl_coef": {"values": [0.05]}}})
