"""Every number a finding quotes at a step is in its ``evidence`` and equals the value
logged at that step (issue 32); no rule raises, switches off or cries wolf on extreme
numbers (issue 34 items 11-12); the doctor's caches stay bounded on changing key sets."""

from __future__ import annotations

import math

from synthetic import healthy, metrics, run_doctor

from trackmux.core.events import FindingEvent, MetricsEvent
from trackmux.doctor.config import resolve
from trackmux.doctor.engine import Doctor
from trackmux.doctor.rules.series import fmt


def _broken_runs() -> list[dict[str, list[float]]]:
    runs = []
    run = healthy(200, 1)
    run["actor/ppo_kl"] = [0.02] * 120 + [0.02 * 1.25 ** i for i in range(80)]
    runs.append(run)
    run = healthy(200, 2)
    run["critic/score/mean"] = run["critic/score/mean"][:120] + [0.05] * 80
    runs.append(run)
    run = healthy(200, 3)
    run["actor/entropy"] = run["actor/entropy"][:100] + [0.01] * 100
    runs.append(run)
    run = healthy(300, 4)
    run["response_length/mean"] = [300 + (0 if i < 100 else 4 * (i - 100)) for i in range(300)]
    runs.append(run)
    return runs


def _check(found: list[FindingEvent], logged: dict[tuple[str, int], float]) -> int:
    checked = 0
    for f in found:
        for key, step, value in f.evidence:
            assert logged[(key, step)] == value, (f.message, key, step, value)
            assert fmt(value) in f.message and f"step {step}" in f.message, f.message
            checked += 1
    return checked


def test_evidence_is_the_logged_value_at_its_step() -> None:
    checked = 0
    for run in _broken_runs():
        events = list(metrics(run))
        logged = {(k, e.step): v for e in events for k, v in e.data.items()}
        found = run_doctor(events)
        assert found
        assert all(f.evidence for f in found), [f.message for f in found]
        checked += _check(found, logged)
    assert checked >= 4


def test_nonfinite_evidence_names_each_key_step_and_value_as_a_string(tmp_path) -> None:
    """NaN, inf and -inf are quoted as "nan", "inf", "-inf" (strict JSON has no NaN), in
    the finding, through the spool and in ``trackmux doctor --json``."""
    import json

    from click.testing import CliRunner

    import trackmux
    from trackmux.cli.main import cli

    events = [MetricsEvent({"loss": 1.0, "grad_norm": 1.0, "lr": 1e-5}, s, float(s))
              for s in range(5)]
    events.append(MetricsEvent({"loss": float("nan"), "grad_norm": float("inf"),
                                "lr": -float("inf")}, 5, 5.0))
    [found] = [f for f in run_doctor(events) if f.rule == "nonfinite"]
    assert found.evidence == (("loss", 5, "nan"), ("grad_norm", 5, "inf"), ("lr", 5, "-inf"))
    for key, step, value in found.evidence:
        assert f"{key} ({value})" in found.message and f"step {step}" in found.message

    run = trackmux.init(project="p", name="nan", backends=[], dir=tmp_path,
                        provenance=False, system_metrics=False, delivery="thread")
    for event in events:
        run.log(dict(event.data), step=event.step)
    run.finish()
    result = CliRunner().invoke(cli, ["doctor", str(run.dir), "--json"])
    assert result.exit_code == 1, result.output
    [record] = [json.loads(line) for line in result.output.splitlines()]  # strict JSON
    [nonfinite] = [f for f in record["findings"] if f["rule"] == "nonfinite"]
    assert nonfinite["evidence"] == [{"key": "loss", "step": 5, "value": "nan"},
                                     {"key": "grad_norm", "step": 5, "value": "inf"},
                                     {"key": "lr", "step": 5, "value": "-inf"}]


def test_evidence_of_the_failure_demo(tmp_path) -> None:
    from click.testing import CliRunner

    import trackmux
    from trackmux.cli.demo import demo  # noqa: F401  (the demo's own curves)
    from trackmux.cli.main import cli
    from trackmux.core.spool.reader import SpoolReader

    result = CliRunner().invoke(cli, ["demo", "--failure", "reward-hacking", "--steps", "120",
                                      "--dir", str(tmp_path), "--no-default-backends",
                                      "--no-report"])
    assert result.exit_code in (0, 1), result.output
    [run_dir] = [p.parent for p in tmp_path.rglob("spool.db")] or [None]
    assert run_dir is not None
    reader = SpoolReader(run_dir)
    try:
        events = list(reader.iter_events(page=5000))
    finally:
        reader.close()
    logged = {(k, e.step): v for e in events if isinstance(e, MetricsEvent)
              for k, v in e.data.items()}
    found = [e for e in events if isinstance(e, FindingEvent)]
    assert found and _check(found, logged) >= 1
    del trackmux


EXTREMES = [1e308, -1e308, 1e-320, -1e-320, 10 ** 30, 2 ** 1100, float("nan"), float("inf"),
            -float("inf"), 0.0, 1e200]


def test_extremes_reach_every_rule_without_error_or_false_alarm() -> None:
    keys = ["critic/score/mean", "actor/ppo_kl", "actor/entropy", "actor/grad_norm",
            "response_length/mean", "response_length/clip_ratio", "reward",
            "rewards/a/mean", "rewards/b/mean", "frac_reward_zero_std",
            "rollout_corr/rollout_is_eff_sample_size", "train/avg_trajectory_age",
            "clip_ratio/low_mean", "clip_ratio/high_mean", "val-core/x/reward/mean@1"]
    for value in EXTREMES:
        doctor = Doctor(resolve(True))
        found = []
        for step in range(120):
            found += doctor.feed(MetricsEvent({k: value for k in keys}, step, float(step)))
        broken = [f for f in found if f.rule == "doctor"]
        assert not broken, [f.message for f in broken]
        # a constant moves nowhere: no rule that judges a change may fire (rules that
        # judge a value against an absolute bound, a KL of 1e308 or a share of 1e308,
        # rightly do; so does frozen_start on a grad norm of exactly 0, and reward_frozen
        # on a reward that does not move at all)
        absolute = {"nonfinite", "mismatch", "zero_std_groups", "staleness", "frozen_start",
                    "reward_frozen"}
        moved = [f for f in found if f.severity != "info" and f.rule not in absolute
                 and "already" not in f.message]
        assert not moved, (value, [f.message for f in moved])
        assert len(doctor.detectors) == len(resolve(True))


def test_huge_rewards_keep_component_divergence_on() -> None:
    """1e200 rewards in sample batches: no OverflowError (``(x - mean) ** 2``), so the
    sample rules stay on; and a constant 1e308 column gives no finding."""
    import random

    from trackmux.core.events import TableEvent

    rng = random.Random(0)
    events = []
    for step in range(40):
        rows = []
        for i in range(16):
            a = 1e200 * (1 + rng.random())
            rows.append((i // 4, a + 1e308 * 0, a, 1e308))
        events.append(TableEvent("rollout/groups", ("uid", "reward", "reward/a", "reward/b"),
                                 tuple(rows), step, float(step)))
    doctor = Doctor(resolve(True))
    found = [f for e in events for f in doctor.feed(e)]
    assert not [f for f in found if f.rule == "doctor"], [f.message for f in found]
    assert {d.rule for d in doctor.detectors} >= {"component_divergence", "flat_groups"}
    assert not [f for f in found if f.rule == "component_divergence"]


def test_changing_key_sets_keep_caches_bounded() -> None:
    from trackmux.doctor.dialects import MAX_KEY_SETS

    doctor = Doctor(resolve(True))
    for step in range(3000):
        doctor.feed(MetricsEvent({f"k{step}": 1.0, "actor/ppo_kl": 0.01, f"z{step % 7}": 2.0},
                                 step, float(step)))
    assert len(doctor.signals._sets) <= MAX_KEY_SETS
    for detector in doctor.detectors:
        assert len(getattr(detector, "series", {})) <= 2048


def test_key_limit_per_event_is_told_once() -> None:
    from trackmux.doctor.dialects import MAX_KEYS

    doctor = Doctor(resolve(True))
    data = {f"m/{i}": 1.0 for i in range(MAX_KEYS + 10)}
    found = doctor.feed(MetricsEvent(data, 1, 1.0)) + doctor.feed(MetricsEvent(data, 2, 2.0))
    told = [f for f in found if f.rule == "doctor" and str(MAX_KEYS) in f.message]
    assert len(told) == 1
    assert math.isfinite(len(data))


def test_explain_names_dialect_signals_and_unread_rules(tmp_path) -> None:
    import json

    from click.testing import CliRunner

    import trackmux
    from trackmux.cli.main import cli

    run = trackmux.init(project="p", backends=[], dir=tmp_path, doctor=False)
    for step in range(30):
        run.log({"train/reward": 0.5, "train/rewards/length_penalty/mean": -0.1 * step,
                 "train/kl": 0.01, "train/completions/mean_length": 300.0}, step=step)
    run.finish(timeout=30)
    out = CliRunner().invoke(cli, ["doctor", "--json", "--explain", str(run.dir)])
    why = json.loads(out.output.splitlines()[0])["explain"]
    assert why["dialects"][0] == "trl"
    assert [k["key"] for k in why["signals"]["reward"]] == ["train/reward"]
    assert [k["key"] for k in why["signals"]["reward_component"]] == \
        ["train/rewards/length_penalty/mean"]
    assert "mismatch" in why["unread_rules"] and "kl_blowup" not in why["unread_rules"]
    text = CliRunner().invoke(cli, ["doctor", "--explain", str(run.dir)]).output
    assert "signal reward: train/reward (trl" in text and "nothing to read" in text
