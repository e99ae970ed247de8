"""Issue 42, coverage always said: a rule that judges its own curve and only asks the
reward about it (``kl_blowup``, ``grad_explosion``, ``loss_blowup``, ``clip_fraction``,
``entropy_collapse``: rules/learning.py's ``RewardFollower``; and ``length_blowup``,
which keeps the reward its own way) did not run on a run that
logs the reward but not that curve; reading the reward alone must not list it as run."""

from __future__ import annotations

from trackmux.core.events import MetricsEvent
from trackmux.doctor.config import resolve
from trackmux.doctor.engine import Doctor

FOLLOWERS = ("kl_blowup", "grad_explosion", "loss_blowup", "clip_fraction", "length_blowup",
             "entropy_collapse")


def _coverage(rows: list[dict[str, float]]) -> dict[str, object]:
    doctor = Doctor(resolve(True))
    for step, data in enumerate(rows):
        doctor.feed(MetricsEvent(data, step, float(step)))
    return doctor.coverage()


def test_a_run_with_a_reward_and_no_kl_lists_kl_blowup_as_not_run() -> None:
    coverage = _coverage([{"train_reward": 0.1 + 0.01 * i} for i in range(30)])
    not_run = coverage["not_run"]
    assert isinstance(not_run, dict)
    assert not_run.get("kl_blowup") == "no key for kl", not_run
    for rule in FOLLOWERS:  # none of them read its own curve
        assert rule in not_run, (rule, not_run)
    assert "reward_collapse" not in not_run  # the reward's own rules did run


def test_a_run_with_a_reward_and_a_kl_runs_kl_blowup() -> None:
    coverage = _coverage([{"train_reward": 0.1 + 0.01 * i, "kl_to_ref": 0.01}
                          for i in range(30)])
    not_run = coverage["not_run"]
    assert isinstance(not_run, dict)
    assert "kl_blowup" not in not_run
    assert "grad_explosion" in not_run
