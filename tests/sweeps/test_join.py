"""A trial's run joins its sweep by itself (trackmux/sweeps/join.py): the agent's variables
put the sweep in the run's config and tags, and the first run of the trial claims it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import trackmux
from trackmux.core.spool.reader import SpoolReader


def _read(run: trackmux.Run) -> tuple[dict[str, object], dict[str, object]]:
    reader = SpoolReader(run.dir)
    try:
        config: dict[str, object] = {}
        for event in reader.events_of_kind("config"):
            config.update(event.config)  # type: ignore[attr-defined]
        return reader.meta(), config
    finally:
        reader.close()


@pytest.fixture
def trial_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    claim = tmp_path / "claim.json"
    monkeypatch.setenv("TRACKMUX_SWEEP_ID", "abc123xy")
    monkeypatch.setenv("TRACKMUX_SWEEP_TRIAL", "4")
    monkeypatch.setenv("TRACKMUX_SWEEP_PARAMS", json.dumps({"lr": 0.01, "a.b": [1, 2]}))
    monkeypatch.setenv("TRACKMUX_SWEEP_CLAIM", str(claim))
    return claim


def test_the_runs_of_a_trial_carry_the_sweep_and_the_first_claims_it(
        tmp_path: Path, trial_env: Path) -> None:
    first = trackmux.init(project="p", backends=[], dir=tmp_path / "r", config={"lr": 0.01},
                          tags=["mine"], delivery="thread", doctor=False)
    second = trackmux.init(project="p", backends=[], dir=tmp_path / "r", delivery="thread",
                           config={"sweep": "the user's own"}, doctor=False)
    assert isinstance(first, trackmux.Run) and isinstance(second, trackmux.Run)
    first.finish()
    second.finish()
    meta, config = _read(first)
    assert meta["tags"] == ["mine", "sweep:abc123xy", "trial:4"]
    assert config == {"lr": 0.01, "sweep": {"id": "abc123xy", "trial": 4,
                                            "params": {"lr": 0.01, "a.b": [1, 2]}}}
    _, config2 = _read(second)  # the program's own `sweep` key is kept
    assert config2["sweep"] == "the user's own"
    assert config2["trackmux_sweep"] == config["sweep"]
    claimed = json.loads(trial_env.read_text())
    assert claimed["run_id"] == first.id and Path(claimed["run_dir"]) == first.dir


def test_without_an_agent_nothing_changes(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACKMUX_SWEEP_ID", raising=False)
    run = trackmux.init(project="p", backends=[], dir=tmp_path, config={"x": 1},
                        delivery="thread", doctor=False)
    assert isinstance(run, trackmux.Run)
    run.finish()
    meta, config = _read(run)
    assert meta["tags"] == [] and config == {"x": 1}


def test_bad_params_json_is_named_and_the_run_starts(
        tmp_path: Path, trial_env: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("TRACKMUX_SWEEP_PARAMS", "{not json")
    run = trackmux.init(project="p", backends=[], dir=tmp_path, delivery="thread",
                        doctor=False)
    assert isinstance(run, trackmux.Run)
    run.finish()
    assert "TRACKMUX_SWEEP_PARAMS is not JSON" in caplog.text
    assert _read(run)[1]["sweep"] == {"id": "abc123xy", "trial": 4, "params": {}}


def test_mark_pruned_keeps_the_reason_and_runs_show_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    run = trackmux.init(project="p", backends=[], dir=tmp_path, delivery="thread",
                        doctor=False)
    assert isinstance(run, trackmux.Run)
    run.log({"a": 1.0})
    run.finish(exit_code=143)
    reader = SpoolReader(run.dir)
    try:
        assert reader.mark_pruned("kl_blowup (critical) at step 9: ...", "sweep s trial 1"
                                  ) == "failed"
        meta = reader.meta()
    finally:
        reader.close()
    assert meta["state"] == "pruned" and meta["state_before_pruned"] == "failed"
    for command in (["runs", str(tmp_path)], ["show", str(run.dir)]):
        out = subprocess.run([sys.executable, "-m", "trackmux", *command],
                             capture_output=True, text=True, check=True, timeout=60).stdout
        assert "pruned" in out
        assert "pruned by sweep s trial 1: kl_blowup (critical) at step 9" in out


def test_an_init_hook_that_raises_is_named_and_the_run_starts(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from trackmux.core.lifecycle import run as run_mod

    def broken(tags: list[str], config: dict[str, object] | None) -> None:
        tags.append("half-done")
        raise RuntimeError("boom")

    run_mod.on_run_init(broken)
    try:
        run = trackmux.init(project="p", backends=[], dir=tmp_path, tags=["t"],
                            delivery="thread", doctor=False)
    finally:
        run_mod._init_hooks.remove(broken)
    assert isinstance(run, trackmux.Run)
    run.finish()
    assert "run init hook" in caplog.text and "RuntimeError: boom" in caplog.text
    assert _read(run)[0]["tags"] == ["t"]  # what the broken hook half-did is not kept
