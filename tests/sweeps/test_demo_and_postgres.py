"""The demo's reward hacking as a sweep in the shape of issue 36's bar: the collapsing
trials are pruned with the doctor's reason while the healthy ones complete and the best is
healthy; and two agents sharing a sweep in a private PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_support import agent, cli, create, run_config, run_meta, show

from trackmux.sweeps import study
from trackmux.sweeps.spec import WRONG_RULES
from trackmux.sweeps.storage import default_url

pytest.importorskip("numpy")



#: (learning rate, kl_coef) of the reduced bar: three that go wrong early in the demo's
#: reward hacking (the samples repeat a digit, the repeat bonus turns against the digits,
#: from step 29-48) and three healthy settings (no finding in 150 steps, seeds 0-2)
COLLAPSING = ((0.03, 0.01), (0.0487, 0.01), (0.06, 0.05))
HEALTHY = ((0.0049, 0.05), (0.0075, 0.01), (0.0061, 0.2))


def test_a_bayes_sweep_of_two_agents_prunes_the_collapsing_trials_by_default(
        root: Path) -> None:
    """The shape of issue 36's acceptance bar, reduced to run in seconds: a wandb-format
    file (bayes, log-uniform learning rate, kl_coef values, no ``prune:`` key), two agents
    at once, 100 steps instead of 150. The trials' parameters are enqueued (TPE still asks
    for each) so the test knows which go wrong; the full bar, with TPE sampling freely, is
    benchmark B13c (benchmarks/sweep.py --bar)."""
    steps = 100
    sweep_id = create(root, f"""
        method: bayes
        metric: {{name: reward/mean_last10, goal: maximize}}
        command: ["${{interpreter}}", "-m", "trackmux.demo.sweep_trial",
                  "--failure=reward-hacking", "--steps={steps}", "--step_seconds=0.05",
                  "${{args}}"]
        parameters:
          learning_rate: {{distribution: log_uniform_values, min: 0.004, max: 0.06}}
          kl_coef: {{values: [0.01, 0.05, 0.2]}}
        run_cap: {len(COLLAPSING) + len(HEALTHY)}
    """)
    sweeps = study.load(sweep_id, default_url(root))
    for lr, kl in (*COLLAPSING, *HEALTHY):
        sweeps.study.enqueue_trial({"learning_rate": lr, "kl_coef": kl})
    agents = [agent(root, sweep_id) for _ in range(2)]
    outputs = [a.communicate(timeout=600) for a in agents]
    assert [a.returncode for a in agents] == [0, 0], outputs
    data = show(root, sweep_id)
    trials = {(t["params"]["learning_rate"], t["params"]["kl_coef"]): t
              for t in data["trials"]}
    assert len(trials) == 6 and len({t["agent"] for t in data["trials"]}) == 2
    for key in COLLAPSING:
        t = trials[key]
        assert t["state"] == "pruned" and t["pruned_by"] == "doctor", (key, t["reason"])
        rule = t["finding"]["rule"]
        assert t["reason"].startswith(f"{rule} ({t['finding']['severity']}) at step ")
        assert rule in WRONG_RULES or t["finding"]["severity"] == "critical"
        # the bar's "by step 100 of 150", at the bar's 0.05 s a step (0.02 s once: a loaded
        # machine's second of delay was 50 steps)
        assert t["steps"] <= 90, (key, t["steps"], t["found_at_step"], t["reason"])
        assert run_meta(t["run_dir"])["state"] == "pruned"
    for key in HEALTHY:
        t = trials[key]
        assert t["state"] == "complete" and t["steps"] == steps, (key, t["reason"])
        assert t["value"] > 0.55
    best = data["best"]
    assert (best["params"]["learning_rate"], best["params"]["kl_coef"]) in HEALTHY
    for t in data["trials"]:  # every trial is a trackmux run that joined the sweep
        config = run_config(t["run_dir"])
        assert config["sweep"]["id"] == sweep_id, config.get("sweep")


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
