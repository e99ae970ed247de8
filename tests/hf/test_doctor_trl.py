"""The doctor on TRL's path end to end (issue 32): a real GRPO run on CPU through
TrackmuxCallback whose reward cannot tell its samples apart (every group flat) yields a
finding live, read from TRL's own ``train/...`` keys by the TRL dialect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import spool_runs

pytest.importorskip("trl")


def constant_reward(completions: list[str], **kwargs: Any) -> list[float]:
    """A broken reward: the same score for every completion, so no group has a spread."""
    return [1.0 for _ in completions]


def test_grpo_with_flat_groups_is_found_live_and_offline(
        tmp_path: Path, tracker_env: dict[str, Path]) -> None:
    from tiny_hf import build_dataset, build_model, build_tokenizer
    from trl import GRPOConfig, GRPOTrainer

    from trackmux.doctor.offline import diagnose_explained
    from trackmux.integrations.transformers import TrackmuxCallback

    tok = build_tokenizer()
    args = GRPOConfig(output_dir=str(tmp_path / "out"), max_steps=5,
                      per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=6, logging_steps=1, report_to="none",
                      use_cpu=True, learning_rate=1e-3, disable_tqdm=True, seed=0,
                      save_strategy="no")
    trainer = GRPOTrainer(model=build_model(len(tok)), args=args, processing_class=tok,
                          reward_funcs=[constant_reward], train_dataset=build_dataset())
    callback = TrackmuxCallback(trainer, project="hf-doctor", backends=["file"],
                                doctor=True)
    trainer.add_callback(callback)
    trainer.train()
    (run_dir,) = spool_runs(tracker_env["spool"], "hf-doctor")
    found, why = diagnose_explained(run_dir)
    rules = {f.rule for f in found if f.severity in ("warning", "critical")}
    assert "zero_std_groups" in rules, [f.message for f in found]
    assert why["dialects"][0] == "trl"
    assert [k["key"] for k in why["signals"]["zero_std_frac"]] == ["train/frac_reward_zero_std"]
    flat = next(f for f in found if f.rule == "zero_std_groups")
    assert flat.evidence and flat.evidence[0][0] == "train/frac_reward_zero_std"
    # the live doctor (in the delivery process) stored the same finding in the spool
    from trackmux.doctor.read import load_stored_findings

    stored = load_stored_findings(run_dir) or []
    assert "zero_std_groups" in {f["rule"] for f in stored}
