"""The demo's reward hacking as a sweep: the collapsing trial is pruned with the doctor's
reason while the healthy one completes and is the best; and two agents sharing a sweep in
a private PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_support import agent, cli, create, show

from trackmux.core.spool.reader import SpoolReader

pytest.importorskip("numpy")


def test_the_collapsing_demo_trial_is_pruned_with_the_doctors_reason(root: Path) -> None:
    sweep_id = create(root, """
        method: grid
        metric: {name: reward/mean_last10, goal: maximize}
        command: ["${interpreter}", "-m", "trackmux.demo.sweep_trial",
                  "--failure=reward-hacking", "--steps=150", "--step_seconds=0.04",
                  "${args}"]
        parameters:
          learning_rate: {values: [0.03, 0.008]}
          kl_coef: {value: 0.01}
    """)
    cli(root, "agent", sweep_id)
    data = show(root, sweep_id)
    by_lr = {t["params"]["learning_rate"]: t for t in data["trials"]}
    collapsing, healthy = by_lr[0.03], by_lr[0.008]
    assert collapsing["state"] == "pruned" and collapsing["pruned_by"] == "doctor"
    assert collapsing["finding"]["rule"] == "reward_collapse"
    assert collapsing["reason"].startswith("reward_collapse (critical) at step ")
    assert collapsing["steps"] <= 120  # of 150: stopped soon after the finding
    assert collapsing["steps"] - 1 - collapsing["found_at_step"] <= 30
    reader = SpoolReader(Path(collapsing["run_dir"]))
    try:
        meta = reader.meta()
        findings = [e.rule for e in reader.events_of_kind("finding")]  # type: ignore[attr-defined]
    finally:
        reader.close()
    assert meta["state"] == "pruned" and "reward_collapse" in str(meta["pruned_reason"])
    assert "reward_collapse" in findings
    assert healthy["state"] == "complete" and healthy["steps"] == 150
    assert data["best"]["number"] == healthy["number"]
    assert healthy["value"] > 0.6 and (collapsing["value"] or 0) < healthy["value"]


def test_two_agents_share_a_sweep_in_postgres(root: Path, program: Path) -> None:
    pytest.importorskip("psycopg")
    from trackmux.testing.postgres import postgres_available, private_postgres

    if not postgres_available():
        pytest.skip("PostgreSQL is not installed")
    with private_postgres() as pg:
        sweep_id = create(root, f"""
            program: {program}
            command: ["${{interpreter}}", "${{program}}", "--pause=0.05", "${{args}}"]
            method: random
            metric: {{name: score, goal: maximize}}
            parameters:
              lr: {{min: 0.0, max: 1.0}}
        """, "--storage", pg.dsn)
        assert not (root / ".sweeps" / "sweeps.db").exists()
        agents = [agent(root, sweep_id, "--count", "2", "--storage", pg.dsn)
                  for _ in range(2)]
        outputs = [a.communicate(timeout=300) for a in agents]
        assert [a.returncode for a in agents] == [0, 0], outputs
        trials = show(root, sweep_id, "--storage", pg.dsn)["trials"]
        assert [t["number"] for t in trials] == [0, 1, 2, 3]
        assert all(t["state"] == "complete" for t in trials)
        assert len({t["agent"] for t in trials}) == 2
        text = cli(root, "sweep", "show", sweep_id, "--storage", pg.dsn).stdout
        assert "4 complete" in text
