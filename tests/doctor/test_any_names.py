"""Issue 42, signals from any names: a loop that names its keys as it likes is read from
the words of its key names (doctor/words.py), after the dialects and never overriding
them, with a precedence when several keys could feed one signal; a declaration wins."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from synthetic import healthy, metrics, noisy, rising, run_doctor, serious

import trackmux
from trackmux.cli.main import cli
from trackmux.doctor.dialects import Signals


@pytest.mark.parametrize(("key", "signal"), [
    ("avg_reward", "reward"), ("train/score", "reward"), ("score_mean", "reward"),
    ("mean_return", "reward"), ("episodeReturn", "reward"), ("acc", "reward"),
    ("policy_entropy", "entropy"), ("ent", "entropy"),
    ("response_len_mean", "response_length"), ("gen_len", "response_length"),
    ("respLenMean", "response_length"),
    ("mean_kl", "kl"), ("kl_to_ref", "kl"), ("gradNorm", "grad_norm"), ("policy/loss", "loss"),
    ("truncated_ratio", "truncation"), ("frac_zero_std_groups", "zero_std_frac"),
    ("eval/acc", "val_reward"), ("test_score", "val_reward"),
    ("format_reward", "reward_component"), ("reward/format", "reward_component"),
    ("flat_groups_frac", "zero_std_frac"), ("reward_before_norm_mean", "reward"),
    ("rollout_answer_accuracy", "reward"), ("answer_accuracy", "reward"),
    ("accuracy", "reward"), ("correct", "reward"), ("rollout_reward", "reward"),
    ("rollout_format_accuracy", "reward_component"), ("answer_reward", "reward_component"),
])
def test_a_key_is_read_from_the_words_of_its_name(key: str, signal: str) -> None:
    assert Signals().resolve({key: 1.0}).by_signal.get(signal) == [key]


@pytest.mark.parametrize("key", ["kl_coef", "entropy_coef", "target_kl", "learning_rate",
                                 "prompt_length", "timing_s/reward", "reward_std",
                                 "critic/returns/mean", "reward_ema", "num_tokens",
                                 "truncation_pct", "flat_reward_groups_pct"])
def test_settings_spreads_and_bookkeeping_feed_no_signal(key: str) -> None:
    assert Signals().resolve({key: 1.0}).by_signal == {}


def test_mean_before_min_and_max_train_before_val_total_before_component() -> None:
    keyset = Signals().resolve({"reward_max": 1.0, "reward_min": 0.0, "reward_mean": 0.5,
                                "reward_std": 0.1, "val/reward": 0.4, "reward/format": 0.9,
                                "kl_max": 0.2, "kl": 0.1})
    assert keyset.by_signal["reward"] == ["reward_mean"]
    assert keyset.by_signal["val_reward"] == ["val/reward"]
    assert keyset.by_signal["reward_component"] == ["reward/format"]
    assert keyset.by_signal["kl"] == ["kl"]


def test_a_validation_length_is_the_response_length_where_no_training_key_names_it() -> None:
    """A loop that measures its answers' length only on its validation split (CS336's
    ``val_response_length``, every 10 steps) has its response length there: the policy's
    own answers. A training length wins; a validation prompt length or spread feeds
    nothing; the coverage names the key that fed the signal."""
    from trackmux.core.events import MetricsEvent
    from trackmux.doctor.config import resolve
    from trackmux.doctor.engine import Doctor

    keyset = Signals().resolve({"train_reward": 0.1, "val_response_length": 98.0})
    assert keyset.by_signal["response_length"] == ["val_response_length"]
    both = Signals().resolve({"val_response_length": 98.0, "response_len_mean": 120.0})
    assert both.by_signal["response_length"] == ["response_len_mean"]
    assert Signals().resolve({"val/prompt_length": 9.0, "val/response_length_std": 4.0,
                              "val_len": 3.0}).by_signal == {}
    doctor = Doctor(resolve(True))
    for step in range(3):
        doctor.feed(MetricsEvent({"train_reward": 0.1 * step, "val_response_length": 98.0},
                                 step, float(step)))
    assert doctor.coverage()["signals"]["response_length"] == [
        {"key": "val_response_length", "from": "words"}]


def test_common_loop_libraries_names_are_read_as_they_mean() -> None:
    """trlx logs PPO's value targets as returns/mean beside reward/mean; cleanRL and SB3
    log an environment episode's return and length (not a response length)."""
    trlx = Signals().resolve({"reward/mean": 0.5, "returns/mean": 0.4, "values/mean": 0.3,
                              "policy/approx_kl": 0.01, "losses/value_loss": 1.0})
    assert trlx.by_signal == {"reward": ["reward/mean"], "kl": ["policy/approx_kl"]}
    cleanrl = Signals().resolve({"charts/episodic_return": 20.0,
                                 "charts/episodic_length": 20.0, "losses/entropy": 0.6,
                                 "losses/explained_variance": 0.1})
    assert cleanrl.by_signal == {"reward": ["charts/episodic_return"],
                                 "entropy": ["losses/entropy"]}
    sb3 = Signals().resolve({"rollout/ep_rew_mean": 20.0, "rollout/ep_len_mean": 20.0,
                             "train/entropy_loss": -0.6})
    assert sb3.by_signal == {"reward": ["rollout/ep_rew_mean"],
                             "entropy": ["train/entropy_loss"]}


def test_a_better_key_seen_later_takes_the_signal_over() -> None:
    signals = Signals()
    assert signals.resolve({"reward_max": 1.0}).by_signal["reward"] == ["reward_max"]
    assert signals.resolve({"reward_max": 1.0, "avg_reward": 0.5}).by_signal["reward"] == \
        ["avg_reward"]
    assert "reward" not in signals.resolve({"reward_max": 1.0}).by_signal  # no going back
    assert signals.read()["reward"] == {"avg_reward": "generic"}


def test_a_dialect_key_is_never_overridden_by_words() -> None:
    signals = Signals()
    keyset = signals.resolve({"critic/score/mean": 0.5, "avg_reward": 0.5, "mean_kl": 0.1})
    assert keyset.by_signal["reward"] == ["critic/score/mean"]
    assert keyset.by_signal["kl"] == ["mean_kl"]  # no dialect key for the KL: words count


def test_an_accuracy_is_the_reward_only_where_nothing_better_feeds_it() -> None:
    """A hand-written loop's answer accuracy is its reward (the CS336 loops of the real
    corpus log rollout_answer_accuracy and nothing else), after a reward or score word,
    a dialect key and a declaration."""
    loop = {"rollout_answer_accuracy": 0.4, "rollout_format_accuracy": 0.9}
    keyset = Signals().resolve(loop)
    assert keyset.by_signal["reward"] == ["rollout_answer_accuracy"]
    assert keyset.by_signal["reward_component"] == ["rollout_format_accuracy"]
    assert Signals().resolve({**loop, "reward_avg": 0.5}).by_signal["reward"] == ["reward_avg"]
    assert Signals().resolve({**loop, "critic/score/mean": 0.5}).by_signal["reward"] == \
        ["critic/score/mean"]
    assert Signals({"reward": ["my/return"]}).resolve(
        {**loop, "my/return": 0.5}).by_signal["reward"] == ["my/return"]


def test_a_declaration_wins_over_dialects_and_words() -> None:
    signals = Signals({"reward": ["my/return"], "kl": ["re:^div_"]})
    keyset = signals.resolve({"critic/score/mean": 0.5, "my/return": 0.5, "avg_reward": 0.5,
                              "div_ref": 0.1, "mean_kl": 0.1})
    assert keyset.by_signal["reward"] == ["my/return"]
    assert keyset.by_signal["kl"] == ["div_ref"]
    assert signals.declared_unseen() == {}
    assert Signals({"reward": ["my/return"]}).declared_unseen() == {"reward": ["my/return"]}


def _custom(n: int, seed: int) -> dict[str, list[float]]:
    """A hand-written loop's names for a healthy run's curves."""
    run = healthy(n, seed)
    names = {"critic/score/mean": "score_mean", "actor/ppo_kl": "kl_to_ref",
             "actor/entropy": "ent", "actor/grad_norm": "gradNorm",
             "response_length/mean": "gen_len", "response_length/clip_ratio": "trunc_frac"}
    return {names[k]: v for k, v in run.items()}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_custom_named_healthy_run_is_quiet(seed: int) -> None:
    assert serious(run_doctor(metrics(_custom(300, seed)))) == []


def test_a_custom_named_run_whose_reward_collapses_is_found() -> None:
    run = _custom(300, 4)
    run["score_mean"] = noisy(rising(200, 0.1, 0.8), 0.04, 1) + noisy([0.02] * 100, 0.01, 2)
    found = [f for f in run_doctor(metrics(run)) if f.rule == "reward_collapse"]
    assert found and found[0].keys == ("score_mean",) and 200 <= found[0].step <= 210


@pytest.mark.parametrize(("signals", "named"), [
    ({"rewardz": "x"}, "no signal 'rewardz'; known: reward, reward_component"),
    ({"reward": 3}, "'reward' must be a key (a non-empty string)"),
    ({"kl": ["a", None]}, "'kl' must be a key (a non-empty string)"),
    (["reward"], "must be a mapping of signal to key or list of keys"),
])
def test_bad_signals_are_refused_at_init_in_one_line(tmp_path: Path, signals: Any,
                                                     named: str) -> None:
    with pytest.raises(ValueError, match=re.escape(named)) as caught:
        trackmux.init(project="p", backends=[], dir=tmp_path, signals=signals)
    assert "\n" not in str(caught.value) and "init(signals=...)" in str(caught.value)
    assert not list(tmp_path.iterdir())  # refused before any I/O


def test_keys_declared_at_init_feed_the_live_and_the_offline_doctor(tmp_path: Path) -> None:
    """``thing_a`` means nothing to the doctor's words; declared, it is the reward."""
    run = trackmux.init(project="p", backends=[], dir=tmp_path, delivery="thread",
                        signals={"reward": "thing_a", "kl": ["thing_b", "never/logged"]})
    assert isinstance(run, trackmux.Run)
    reward = noisy(rising(200, 0.1, 0.8), 0.04, 1) + noisy([0.02] * 100, 0.01, 2)
    for step, value in enumerate(reward):
        run.log({"thing_a": value, "thing_b": 0.01, "avg_reward": 0.5}, step=step)
    assert run.finish(timeout=60).complete
    collapse = [f for f in run.findings() if f["rule"] == "reward_collapse"]
    assert collapse and collapse[0]["keys"] == ["thing_a"]
    [told] = [f for f in run.findings() if f["rule"] == "coverage"]  # said live, once
    assert (told["severity"], told["step"]) == ("info", 4)
    assert "read kl <- thing_b, reward <- thing_a" in told["message"]
    assert "declared but never logged: kl <- never/logged" in told["message"]
    result = CliRunner().invoke(cli, ["doctor", "--json", str(run.dir)])
    coverage = json.loads(result.output)["coverage"]
    assert coverage["signals"]["reward"] == [{"key": "thing_a", "from": "user"}]
    assert coverage["signals"]["kl"] == [{"key": "thing_b", "from": "user"}]
    assert coverage["declared_unseen"] == {"kl": ["never/logged"]}
