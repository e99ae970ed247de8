"""``reward_hacking`` on runs too short for its fitted lines: judged once at the run's end
from the binomial error of each reward component's mean over the batch's prompts, and
only where the data carries it (the mean of 0/1 rewards read from its values' lattice,
the samples per prompt from the run's config); otherwise not judged."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

from synthetic import run_doctor, serious

from trackmux.core.events import ConfigEvent, Event, MetricsEvent
from trackmux.doctor.stats import lattice_count, share_change_z


def float32(value: float) -> float:
    """``value`` as a trainer that averages in float32 logs it."""
    packed: float = struct.unpack("f", struct.pack("f", value))[0]
    return packed


def share(hits: int, samples: int) -> float:
    return float32(hits / samples)


def run(series: dict[str, list[float]], config: dict[str, Any] | None) -> list[Event]:
    events: list[Event] = []
    if config is not None:
        events.append(ConfigEvent(config, 0, 999.0))
    steps = len(next(iter(series.values())))
    for step in range(1, steps + 1):
        events.append(MetricsEvent({k: v[step - 1] for k, v in series.items()}, step,
                                   1000.0 + step))
    return events


SAMPLES = 1024  # 128 prompts of 8 samples

#: format learned while accuracy falls, 3 points (TRL's keys): accuracy 0.40 -> 0.15 is
#: 4.5 standard errors of a mean over 128 prompts, format 0.30 -> 0.90 far more
HACKED = {
    "rewards/format_reward": [share(307, SAMPLES), share(563, SAMPLES), share(922, SAMPLES)],
    "rewards/accuracy_reward": [share(410, SAMPLES), share(307, SAMPLES),
                                share(154, SAMPLES)],
    "reward": [1.0, 1.1, 1.2],
}


def hacking(found: list[Any]) -> list[Any]:
    return [f for f in serious(found) if f.rule == "reward_hacking"]


def test_a_short_run_that_trades_accuracy_for_format_is_found() -> None:
    found = hacking(run_doctor(run(HACKED, {"trainer": {"num_generations": 8}})))
    assert len(found) == 1
    assert set(found[0].keys) == {"rewards/format_reward", "rewards/accuracy_reward"}
    assert found[0].step == 3
    assert found[0].time == 1003.0  # the run's last point, not the clock at its end
    assert "8 samples each" in found[0].message


def test_verl_group_size_is_read_from_its_config_path() -> None:
    config = {"actor_rollout_ref": {"rollout": {"n": 8}}}
    assert len(hacking(run_doctor(run(HACKED, config)))) == 1


def test_without_the_group_size_a_short_run_is_not_judged() -> None:
    assert hacking(run_doctor(run(HACKED, None))) == []
    assert hacking(run_doctor(run(HACKED, {"learning_rate": 1e-6}))) == []


def test_a_change_within_the_prompts_noise_is_not_raised() -> None:
    # 64 samples per prompt: 16 prompts, and accuracy 0.40 -> 0.15 is 1.6 standard errors
    assert hacking(run_doctor(run(HACKED, {"num_generations": 64}))) == []


def test_means_of_rewards_that_are_not_0_1_are_not_judged() -> None:
    rng = random.Random(3)
    continuous = {k: [v + rng.uniform(1e-4, 1e-3) for v in vals] if k != "reward" else vals
                  for k, vals in HACKED.items()}
    assert hacking(run_doctor(run(continuous, {"num_generations": 8}))) == []


def test_two_points_are_not_judged() -> None:
    two = {k: v[::2] for k, v in HACKED.items()}
    assert hacking(run_doctor(run(two, {"num_generations": 8}))) == []


def test_lattice_count_reads_the_rewards_a_logged_mean_is_made_of() -> None:
    # open-r1 issue 255's accuracy and format means (TRL, float32): 179, 132, 72 and
    # 533, 621, 960 of 1120 samples
    accuracy = [0.15982143627479672, 0.1178571494296193, 0.06428571762517095]
    fmt = [0.4758928777649999, 0.5544643074274063, 0.8571428976953029]
    assert lattice_count(accuracy, 8192) == 1120
    assert lattice_count(fmt, 8192) == 1120
    assert lattice_count([0.5, 1.25], 8192) is None
    assert lattice_count([0.0, 1.0, 0.5], 8192) == 2  # a divisor: the error is safe
    rng = random.Random(0)
    fits = sum(lattice_count([rng.random() for _ in range(3)], 8192) is not None
               for _ in range(500))
    assert fits <= 2


def test_open_r1_issue_255_is_short_of_the_line_with_a_usual_group_size() -> None:
    # 1120 samples of 8 per prompt (TRL's default; 140 prompts): accuracy's fall is 2.5
    # standard errors, below the rule's 3.5; as independent samples it would be 7.2,
    # which GRPO's groups (one prompt's samples succeed or fail together) do not allow
    before, after = 0.15982143627479672, 0.06428571762517095
    assert -3.0 < share_change_z(before, after, 140) < -2.4
    assert share_change_z(before, after, 1120) < -7.0


def test_a_reward_of_partial_credit_is_judged_over_the_batch_s_count() -> None:
    # steps of a third: its lattice shows 3 x 1024, but the batch is 1024 samples (the
    # format key's lattice), 128 prompts; over them 0.40 -> 0.27 is 2.2 standard errors
    # (3.8 over 384)
    thirds = {"rewards/format_reward": HACKED["rewards/format_reward"],
              "rewards/steps_reward": [share(1229, 3 * SAMPLES), share(1000, 3 * SAMPLES),
                                       share(829, 3 * SAMPLES)]}
    assert lattice_count(thirds["rewards/steps_reward"], 8192) == 3 * SAMPLES
    assert share_change_z(thirds["rewards/steps_reward"][0],
                          thirds["rewards/steps_reward"][-1], 3 * SAMPLES // 8) < -3.5
    assert hacking(run_doctor(run(thirds, {"num_generations": 8}))) == []


def test_the_open_r1_excerpt_with_a_group_size() -> None:
    case = json.loads((Path(__file__).parent / "real" / "cases" /
                       "openr1-255-format-up-accuracy-down.json").read_text())
    by_step: dict[int, dict[str, float]] = {}
    for key, points in case["series"].items():
        for step, value in points:
            by_step.setdefault(step, {})[key] = value

    def found(group: int) -> list[Any]:
        events: list[Event] = [ConfigEvent({"num_generations": group}, 0, 999.0)]
        events += [MetricsEvent(data, step, 1000.0 + step) for step, data in
                   sorted(by_step.items())]
        return hacking(run_doctor(events))

    # 8 per prompt (TRL's default): 140 prompts; accuracy's fall 2.5 standard errors,
    # the reasoning-steps reward's (thirds: its lattice is 3360) 3.0 over the batch's count
    assert found(8) == []
    # 4 per prompt: 280 prompts, accuracy's fall is 3.6 standard errors, the reasoning
    # steps' 4.2 (the clearest fall is named)
    assert [f.keys for f in found(4)] == [("rewards/format_reward",
                                           "rewards/reasoning_steps_reward")]
