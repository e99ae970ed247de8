"""Dialects (every framework's keys to one set of signals) and the rules of issue 32:
windows in steps for sparse logs, anchored levels for slow drifts, first-points checks,
the mismatch thresholds, zero-std groups, clip spikes, staleness, scalar reward hacking."""

from __future__ import annotations

import math

import pytest
from synthetic import healthy, metrics, noisy, run_doctor, serious

from trackmux.core.events import MetricsEvent
from trackmux.doctor.config import resolve
from trackmux.doctor.dialects import DIALECTS, Signals
from trackmux.doctor.engine import Doctor


@pytest.mark.parametrize(("dialect", "keys", "signal", "key"), [
    ("verl", ["critic/score/mean", "actor/entropy_loss", "actor/ppo_kl"], "entropy",
     "actor/entropy_loss"),
    ("trl", ["reward", "rewards/length_penalty/mean", "kl", "completions/clipped_ratio"],
     "reward", "reward"),
    ("trl", ["train/reward", "train/rewards/accuracy_reward/mean", "train/kl"], "kl",
     "train/kl"),
    ("nemo_rl", ["train/reward", "train/token_mult_prob_error", "train/gen_kl_error"],
     "mismatch_mult_prob_error", "train/token_mult_prob_error"),
    ("slime", ["rollout/raw_reward", "train/train_rollout_logprob_abs_diff"],
     "mismatch_logp_diff", "train/train_rollout_logprob_abs_diff"),
    ("openrlhf", ["policy_loss", "vllm_kl", "response_length"], "mismatch_kl", "vllm_kl"),
])
def test_each_dialect_is_recognised_and_feeds_its_signal(dialect: str, keys: list[str],
                                                         signal: str, key: str) -> None:
    signals = Signals()
    keyset = signals.resolve({k: 1.0 for k in keys})
    assert keyset.by_signal[signal] == [key]
    assert dialect in signals.dialects()


VERL_SFT = ["train/loss", "train/grad_norm", "train/lr", "train/mfu", "train/global_tokens",
            "train/total_tokens(B)"]  # verl/trainer/sft_trainer.py; val/loss at validation


@pytest.mark.parametrize(("events", "dialect"), [
    ([VERL_SFT, ["val/loss"]], "verl"),
    ([["train/loss", "train/grad_norm", "train/learning_rate", "train/reward",
       "train/frac_reward_zero_std", "train/completions/mean_length", "train/kl"]], "trl"),
    ([["loss", "grad_norm", "reward", "kl", "completions/mean_length", "memory(GiB)",
       "train_speed(iter/s)"]], "ms_swift"),
    ([["train/loss", "train/reward", "train/grad_norm", "train/token_mult_prob_error"]],
     "nemo_rl"),
    ([["policy_loss", "actor_lr", "kl", "reward", "response_length"]], "openrlhf"),
    ([["rollout/raw_reward", "train/loss", "train/pg_loss", "train/entropy_loss",
       "train/grad_norm"]], "slime"),
    ([["act_loss", "cri_loss", "unsuper_loss", "average reward score"]], "deepspeed_chat"),
])
def test_the_framework_whose_distinctive_keys_are_present_is_the_one_recognised(
        events: list[list[str]], dialect: str) -> None:
    """Names several trainers share (train/loss, train/grad_norm, reward, kl) recognise
    no dialect on their own; --explain names the run's framework, and only it, for the
    shared keys it fed."""
    doctor = Doctor(resolve(True))
    for step, keys in enumerate(events):
        doctor.feed(MetricsEvent({k: 1.0 for k in keys}, step, float(step)))
    why = doctor.explain()
    assert why["dialects"] == [dialect], why["dialects"]
    fed = [k["dialect"] for keys in why["signals"].values() for k in keys
           if k["key"] in ("train/loss", "train/grad_norm", "loss", "grad_norm", "reward",
                           "kl", "train/reward", "act_loss")]
    assert fed and all(d == dialect for d in fed), why["signals"]


def test_shared_names_alone_recognise_no_single_framework() -> None:
    signals = Signals()
    signals.resolve({"train/loss": 1.0, "train/grad_norm": 1.0})
    assert set(signals.dialects()) == {"trl", "nemo_rl", "verl", "slime"}
    signals.resolve({"train/loss": 1.0, "train/grad_norm": 1.0, "train/lr": 1e-5})
    assert signals.dialects() == ["verl"]  # one distinctive key settles it


def test_a_penalty_component_is_never_the_total_reward() -> None:
    for data in ({"train/rewards/length_penalty/mean": -0.1},
                 {"rewards/length_penalty/mean": -0.1, "reward": 0.5},
                 {"my/length_penalty/reward/mean": -0.1}):
        keyset = Signals().resolve(data)
        assert not [k for k in keyset.by_signal.get("reward", []) if "penalty" in k], data


def test_generic_keys_count_only_without_a_dialect_key() -> None:
    signals = Signals()
    assert signals.resolve({"x/reward/mean": 1.0}).by_signal["reward"] == ["x/reward/mean"]
    both = signals.resolve({"x/reward/mean": 1.0, "critic/score/mean": 1.0})
    assert both.by_signal["reward"] == ["critic/score/mean"]
    again = signals.resolve({"x/reward/mean": 1.0})  # a dialect key was seen: generic off
    assert "reward" not in again.by_signal


def test_users_map_their_keys_in_the_rules_file(tmp_path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[signals]\nkl = ["my/kl_to_ref"]\n')
    settings = resolve(str(rules))
    assert settings["signals"] == {"kl": ["my/kl_to_ref"]}
    kl = [0.01] * 60 + [0.01 * 1.3 ** i for i in range(40)]
    found = run_doctor((MetricsEvent({"my/kl_to_ref": v}, i, float(i))
                        for i, v in enumerate(kl)), str(rules))
    assert [f.rule for f in found] == ["kl_blowup"]
    with pytest.raises(ValueError, match="no signal 'klx'"):
        resolve({"signals": {"klx": ["a"]}})
    with pytest.raises(ValueError, match="no signal '@klx'"):
        resolve({"kl_blowup": {"keys": ["@klx"]}})


def test_every_dialect_names_only_known_signals() -> None:
    from trackmux.doctor.dialects import SIGNALS

    for dialect, table in DIALECTS.items():
        assert set(table) <= set(SIGNALS), dialect


def _sparse(every: int, steps: int, series: dict[str, list[float]]):
    for i, step in enumerate(range(every, steps + 1, every)):
        yield MetricsEvent({k: v[i] for k, v in series.items()}, step, float(step))


@pytest.mark.parametrize("every", [20, 50])
def test_sparse_logs_are_judged_and_a_healthy_sparse_run_is_silent(every: int) -> None:
    n = 2000 // every
    base = healthy(n, 3)
    assert serious(run_doctor(_sparse(every, 2000, base))) == []
    broken = healthy(n, 3)
    half = n // 2
    broken["actor/ppo_kl"] = [0.02] * half + [0.02 * 2 ** (i + 1) for i in range(n - half)]
    found = [f for f in run_doctor(_sparse(every, 2000, broken)) if f.rule == "kl_blowup"]
    assert found and abs(found[0].step - 1000) <= 3 * every, [f.message for f in found]


@pytest.mark.parametrize("over", [80, 300])
def test_a_slow_length_drift_is_found_by_the_time_it_is_large(over: int) -> None:
    n = 200 + over + 50
    run = healthy(n, 5)
    flat = [300.0] * 200
    drift = [300.0 * (1 + 2.0 * (i + 1) / over) for i in range(over)]
    run["response_length/mean"] = noisy(flat + drift + [900.0] * 50, 8, 6)
    found = [f for f in run_doctor(metrics(run)) if f.rule == "length_blowup"]
    assert found, f"a length that tripled over {over} steps was not found"
    assert 200 <= found[0].step <= 200 + over, found[0].message
    assert "ran away" in found[0].message


def test_kl_already_out_of_range_in_the_first_points_is_critical() -> None:
    run = healthy(60, 7)
    run["actor/ppo_kl"] = [0.2, 0.5, 0.7, 0.8, 0.8] + [0.8] * 55
    found = [f for f in run_doctor(metrics(run)) if f.rule == "kl_blowup"]
    assert found and found[0].severity == "critical" and found[0].step == 1
    assert "already" in found[0].message


def test_a_summed_kl_of_a_generic_key_is_not_judged_by_the_per_token_bound() -> None:
    kl = [7.0 + 0.05 * i for i in range(40)]  # TRL PPO's objective/kl: summed per response
    found = run_doctor(MetricsEvent({"objective/kl": v}, i, float(i)) for i, v in enumerate(kl))
    assert serious(found) == []


def test_a_short_run_whose_every_grad_norm_is_zero_is_frozen() -> None:
    doctor = Doctor(resolve(True))
    for step in (9, 10):
        doctor.feed(MetricsEvent({"grad_norm": 0.0, "loss": -0.0, "kl": 0.0}, step, 1.0))
    assert doctor.tick(100.0, True) == []  # still running: it may yet learn
    found = doctor.tick(100.0, False)
    assert [(f.rule, f.step) for f in found] == [("frozen_start", 9)]


def test_frozen_setup_from_step_one_and_a_learning_run_is_not() -> None:
    run = healthy(40, 8)
    run["actor/grad_norm"] = [0.0] * 40
    found = [f for f in run_doctor(metrics(run)) if f.rule == "frozen_start"]
    assert len(found) == 1 and found[0].step == 0 and found[0].severity == "critical"
    trl = ({"kl": 0.0, "loss": 0.0, "reward": 0.1} for _ in range(20))
    found = run_doctor(MetricsEvent(d, i, float(i)) for i, d in enumerate(trl))
    assert [f.rule for f in found if f.severity == "critical"] == ["frozen_start"]
    ok = ({"kl": 0.0 if i == 0 else 0.001 * i, "loss": 0.0, "reward": 0.1 + 0.01 * (i % 3)}
          for i in range(20))
    assert serious(run_doctor(MetricsEvent(d, i, float(i)) for i, d in enumerate(ok))) == []


@pytest.mark.parametrize(("key", "good", "bad"), [
    ("rollout_corr/rollout_is_eff_sample_size", 0.95, 0.2),
    ("rollout_corr/rollout_is_mean", 1.0, 2.5),
    ("rollout_corr/chi2_token", 0.01, 1.5),
    ("rollout_corr/kl", 0.001, 0.2),
    ("train/token_mult_prob_error", 1.01, 1.05),
    ("train/train_rollout_logprob_abs_diff", 0.02, 0.2),
])
def test_mismatch_past_the_published_threshold(key: str, good: float, bad: float) -> None:
    values = [good] * 40 + [bad] * 10
    found = run_doctor(MetricsEvent({key: v}, i, float(i)) for i, v in enumerate(values))
    hits = [f for f in found if f.rule == "mismatch"]
    assert hits and 40 <= hits[0].step <= 43, [f.message for f in found]
    quiet = run_doctor(MetricsEvent({key: good}, i, float(i)) for i in range(80))
    assert serious(quiet) == []


def test_one_mismatch_episode_is_one_finding_naming_every_key() -> None:
    """Keys that cross within ``group`` steps are told once, each key named with its
    evidence; a key that crosses later in the episode is its continuation (info)."""
    good = {"rollout_corr/rollout_is_eff_sample_size": 0.95, "rollout_corr/kl": 0.001,
            "rollout_corr/chi2_token": 0.01, "rollout_corr/rollout_is_std": 0.1}
    bad = {"rollout_corr/rollout_is_eff_sample_size": 0.2, "rollout_corr/kl": 0.2,
           "rollout_corr/chi2_token": 1.5, "rollout_corr/rollout_is_std": 0.1}
    events = []
    for i in range(100):
        data = dict(good if i < 40 else bad)
        if i >= 70:
            data["rollout_corr/rollout_is_std"] = 1.5
        events.append(MetricsEvent(data, i, float(i)))
    hits = [f for f in run_doctor(events) if f.rule == "mismatch"]
    assert [(f.severity, f.step) for f in hits] == [("warning", 40), ("info", 70)], \
        [f.message for f in hits]
    first = hits[0]
    crossed = ["rollout_corr/rollout_is_eff_sample_size", "rollout_corr/kl",
               "rollout_corr/chi2_token"]
    assert sorted(first.keys) == sorted(crossed)
    assert "3 mismatch signals crossed together" in first.message
    assert sorted({k for k, _, _ in first.evidence}) == sorted(crossed)
    for key, step, value in first.evidence:
        assert value == bad[key] and key in first.message and f"step {step}" in first.message
    assert hits[1].keys == ("rollout_corr/rollout_is_std",)
    assert "episode told at step 40 goes on" in hits[1].message


def test_a_mismatch_episode_on_a_run_logged_every_step_is_told_two_points_on() -> None:
    """The episode's hold (``group``, 10 steps) waits at most ``group_points`` (2) logged
    points: a run logged every step was told 10 points after the first key crossed, a
    run logged every 20 steps at its next point, as before."""
    good = {"rollout_corr/rollout_is_eff_sample_size": 0.95, "rollout_corr/kl": 0.001}
    bad = {"rollout_corr/rollout_is_eff_sample_size": 0.2, "rollout_corr/kl": 0.001}
    for every, expected in ((1, 44), (20, 41 * 20)):
        told: list[tuple[int, int]] = []
        doctor = Doctor(resolve(True))
        for i in range(80):
            event = MetricsEvent(dict(good if i < 40 else bad), i * every, float(i))
            told += [(event.step, f.step) for f in doctor.feed(event)
                     if f.rule == "mismatch" and f.severity == "warning"]
        # found at step 42 (the latch's 3 points), told 2 points on; logged every 20
        # steps, found at its second point (stats.sudden) and told there
        assert told == [(expected, 40 * every)], told


def test_keys_that_cross_after_the_early_warning_are_one_continuation() -> None:
    """Logged every step, the warning names the key found first (told 2 points on); the
    keys that cross in the steps after it are one ``info`` continuation, held ``group``
    steps as the warning was before, not one finding each."""
    ess, kl, chi2 = ("rollout_corr/rollout_is_eff_sample_size", "rollout_corr/kl",
                     "rollout_corr/chi2_token")
    doctor = Doctor(resolve(True))
    hits = []
    for i in range(80):
        data = {ess: 0.2 if i >= 40 else 0.95, kl: 0.2 if i >= 45 else 0.001,
                chi2: 1.5 if i >= 46 else 0.01}
        hits += [(i, f) for f in doctor.feed(MetricsEvent(data, i, float(i)))
                 if f.rule == "mismatch"]
    assert [(i, f.severity, f.keys) for i, f in hits] == [
        (44, "warning", (ess,)), (55, "info", (kl, chi2))], [f.message for _, f in hits]


def test_zero_std_groups_clip_spike_and_staleness() -> None:
    zero = [0.3] * 30 + [0.97] * 10
    found = run_doctor(MetricsEvent({"frac_reward_zero_std": v}, i, float(i))
                       for i, v in enumerate(zero))
    assert [(f.rule, f.step) for f in found] == [("zero_std_groups", 30)]
    clip = noisy([0.05] * 60, 0.005, 1) + [0.4] * 10
    found = run_doctor(MetricsEvent({"actor/pg_clipfrac": v}, i, float(i))
                       for i, v in enumerate(clip))
    assert [f.rule for f in found] == ["clip_fraction"] and 60 <= found[0].step <= 62
    stale = [1.0] * 30 + [6.0] * 5
    found = run_doctor(MetricsEvent({"train/avg_trajectory_age": v}, i, float(i))
                       for i, v in enumerate(stale))
    assert [(f.rule, f.step) for f in found] == [("staleness", 30)]



def test_clip_spike_while_the_reward_learns_is_info() -> None:
    """A flat start (no update: the share logged 0) whose share climbs with the first
    rewards is the policy starting to learn (issue 42: a GSPO run clips 20-48% by design);
    the same climb with the reward flat stays a warning."""
    clip = [0.0] * 20 + noisy([0.3] * 40, 0.03, 3)
    learning = [0.0] * 20 + [min(0.5, 0.02 * i) for i in range(1, 41)]

    def found(reward: list[float]) -> list[tuple[str, str]]:
        return [(f.rule, f.severity) for f in run_doctor(
            MetricsEvent({"actor/pg_clipfrac": c, "critic/score/mean": r}, i, float(i))
            for i, (c, r) in enumerate(zip(clip, reward, strict=True)))
            if f.rule == "clip_fraction"]

    assert found(learning) == [("clip_fraction", "info")]
    assert found([0.3] * 60) == [("clip_fraction", "warning")]

def test_reward_hacking_from_scalars_names_both() -> None:
    n = 150
    fmt_reward = noisy([0.3 + 0.004 * i for i in range(n)], 0.02, 1)
    acc = noisy([0.3 + 0.002 * i if i < 80 else 0.46 - 0.006 * (i - 80) for i in range(n)],
                0.02, 2)
    events = (MetricsEvent({"rewards/format/mean": f, "rewards/accuracy/mean": a,
                            "reward": f + a}, i, float(i))
              for i, (f, a) in enumerate(zip(fmt_reward, acc, strict=True)))
    found = [f for f in run_doctor(events) if f.rule == "reward_hacking"]
    assert len(found) == 1 and 80 <= found[0].step <= 110, [f.message for f in found]
    assert set(found[0].keys) == {"rewards/format/mean", "rewards/accuracy/mean"}
    # a penalty that falls while accuracy rises is the price of a gain, not hacking
    pen = ({"rewards/accuracy/mean": 0.3 + 0.003 * i,
            "rewards/length_penalty/mean": -0.002 * i, "reward": 0.3 + 0.001 * i}
           for i in range(n))
    assert serious(run_doctor(MetricsEvent(d, i, float(i)) for i, d in enumerate(pen))) == []
    assert math.isfinite(n)
