"""The doctor on a real TRL GRPO run through TrackmuxCallback (issue 32).

A format reward the policy can never satisfy (every completion scores 0) makes every GRPO
group flat: TRL itself logs ``frac_reward_zero_std = 1`` and a zero gradient norm. The
doctor must say so from TRL's own key names, live (in the spool, on the file backend) and
offline (``trackmux doctor RUN --json``), with evidence a reader can check against the
Trainer's log history.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from conftest import spool_runs
from trackmux.doctor.read import load_stored_findings

pytest.importorskip("trl")

STEPS, EVERY = 10, 2  # five logged points, one every two steps


def logged(history: list[dict[str, float]], name: str) -> dict[int, float]:
    """TRL's own value of ``name`` at each logged step (the Trainer's log history)."""
    return {int(h["step"]): h[name] for h in history if name in h}


def test_flat_grpo_groups_found_live_on_the_file_backend_and_by_the_cli(
        tmp_path: Path, tracker_env: dict[str, Path]) -> None:
    from tiny_hf import grpo_trainer, reward_answer_tag

    from trackmux.integrations.transformers import TrackmuxCallback

    start = time.monotonic()
    trainer = grpo_trainer(tmp_path / "out", STEPS, reward_funcs=[reward_answer_tag],
                           logging_steps=EVERY, run_name="never-rewarded")
    trainer.add_callback(TrackmuxCallback(trainer, project="hf-doctor", backends=["file"]))
    trainer.train()
    print(f"faulty GRPO run: {time.monotonic() - start:.1f} s")
    history = trainer.state.log_history
    zero_std = logged(history, "frac_reward_zero_std")
    assert sorted(zero_std) == list(range(EVERY, STEPS + 1, EVERY))
    assert set(zero_std.values()) == {1.0}  # the fault is real: TRL saw only flat groups
    grad = logged(history, "grad_norm")
    (run_dir,) = spool_runs(tracker_env["spool"], "hf-doctor")

    # live: the delivery process's doctor appended the findings to the spool
    stored = load_stored_findings(run_dir)
    assert stored is not None, "the live doctor did not watch the run"
    by_rule = {f["rule"]: f for f in stored}
    flat = by_rule.get("zero_std_groups")
    assert flat is not None, stored
    assert flat["severity"] == "warning" and flat["keys"] == ["train/frac_reward_zero_std"]
    assert flat["step"] == EVERY  # flat from the first logged point on
    assert flat["evidence"], flat
    for item in flat["evidence"]:  # each quoted number is TRL's value at that step
        assert item["key"] == "train/frac_reward_zero_std"
        assert item["value"] == zero_std[item["step"]]
    # the gradient norm TRL logs is exactly 0 from the start: nothing learns
    frozen = by_rule.get("frozen_start")
    assert frozen is not None and frozen["severity"] == "critical", stored
    assert frozen["keys"] == ["train/grad_norm"]
    assert all(e["key"] == "train/grad_norm" and e["value"] == grad[e["step"]] == 0
               for e in frozen["evidence"]), frozen

    # a backend: the file backend's findings file holds the same findings
    path = tracker_env["file_root"] / "hf-doctor" / "never-rewarded.findings.jsonl"
    filed = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert {(f["rule"], f["step"]) for f in filed} == {(f["rule"], f["step"]) for f in stored}
    assert next(f for f in filed if f["rule"] == "zero_std_groups")["evidence"] \
        == flat["evidence"]

    # offline: `trackmux doctor RUN --json --explain` over the spool, in a new process
    proc = subprocess.run([sys.executable, "-m", "trackmux", "doctor", run_dir.name, "--json",
                           "--explain", "--dir", str(tracker_env["spool"])],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr  # 1: a warning or critical finding
    (record,) = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert record["run"] == run_dir.name
    offline = {f["rule"]: f for f in record["findings"]}
    assert offline["zero_std_groups"]["evidence"] == flat["evidence"]
    assert offline["frozen_start"]["keys"] == ["train/grad_norm"]
    explain = record["explain"]
    assert explain["dialects"] == ["trl"]  # recognised from its own keys, and only it
    fed = {k["key"]: k["dialect"] for k in explain["signals"]["zero_std_frac"]}
    assert "trl" in fed["train/frac_reward_zero_std"].split("/")
    print(f"whole test: {time.monotonic() - start:.1f} s")
