"""The doctor acts (issue 45): ``stop_on`` sets ``run.should_stop`` and ``run.stop_reason``
in the trainer's process; the loop stops at a step boundary and the run ends ``stopped``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from synthetic import noisy, rising

import trackmux
from spool_support import spool_meta
from trackmux.core.spool.runs import summarize
from trackmux.doctor.stop import StopPolicy, check

COLLAPSE_AT = 100
#: the loop goes on with a collapsed reward until it reads should_stop, this long at most
DEADLINE = 60.0


def _reward(step: int) -> float:
    if step < COLLAPSE_AT:
        return noisy(rising(COLLAPSE_AT, 0.1, 0.8), 0.04, 1)[step]
    return noisy([0.15], 0.04, step)[0]


def _loop(run: Any, wait_for: Any) -> int | None:
    """A custom loop: one log per step, the flag read at each step boundary. Returns the
    step where it stopped (None: it ran to the deadline without ``wait_for`` holding)."""
    deadline = time.monotonic() + DEADLINE
    step = 0
    while time.monotonic() < deadline:
        run.log({"critic/score/mean": _reward(step), "actor/entropy": 1.0 - 0.001 * step},
                step=step)
        if step >= COLLAPSE_AT and wait_for(run):
            return step
        step += 1
        if step > COLLAPSE_AT:
            time.sleep(0.01)  # a training step takes time; the finding needs a commit
    return None


@pytest.mark.parametrize("delivery", ["process", "thread"])
def test_a_collapsing_run_with_stop_on_critical_stops_and_ends_stopped(
        tmp_path: Path, delivery: str) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path, delivery=delivery,
                        doctor={"stop_on": "critical"})
    assert isinstance(run, trackmux.Run)
    assert run.should_stop is False and run.stop_reason is None
    stopped_at = _loop(run, lambda r: r.should_stop)
    assert stopped_at is not None, "should_stop never came"
    reason = run.stop_reason
    assert reason is not None
    assert reason["rule"] == "reward_collapse" and reason["severity"] == "critical"
    assert COLLAPSE_AT <= reason["step"] <= stopped_at
    # the finding as run.findings() gives it (a finding that grows has later revisions)
    assert any(f["rule"] == reason["rule"] and f["step"] == reason["step"]
               for f in run.findings())
    summary = run.finish(timeout=30)
    assert summary.status == "stopped"
    meta = spool_meta(run.dir)
    assert meta["state"] == "stopped" and meta["stop_reason"] == reason
    assert meta["stop_on"] == ["critical"]
    [stop] = meta["stops"]
    assert stop["attempt"] == 1 and stop["finding"] == reason
    assert summarize(run.dir).state == "stopped"


def test_without_stop_on_nothing_changes(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("TRACKMUX_DOCTOR_STOP_ON", raising=False)
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    assert isinstance(run, trackmux.Run)
    collapsed = _loop(run, lambda r: any(f["rule"] == "reward_collapse"
                                         for f in r.findings()))
    assert collapsed is not None, "the doctor never found the collapse"
    assert run.should_stop is False and run.stop_reason is None
    assert run.finish(timeout=30).status == "finished"
    meta = spool_meta(run.dir)
    assert meta["state"] == "finished"
    assert "stop_reason" not in meta and "stops" not in meta


def test_stop_on_a_rule_name_and_from_the_environment(tmp_path: Path, monkeypatch: Any
                                                      ) -> None:
    monkeypatch.setenv("TRACKMUX_DOCTOR_STOP_ON", "reward_collapse,nonfinite")
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    assert isinstance(run, trackmux.Run)
    assert _loop(run, lambda r: r.should_stop) is not None
    assert run.stop_reason is not None and run.stop_reason["rule"] == "reward_collapse"
    assert run.finish(timeout=30).status == "stopped"
    # the argument wins over the variable
    other = trackmux.init(project="p", backends=[], dir=tmp_path,
                          doctor={"stop_on": False})
    assert isinstance(other, trackmux.Run)
    assert other._stop_policies == []
    other.finish(timeout=30)


def test_a_resumed_run_is_the_same_run_and_keeps_its_stop(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path, delivery="thread",
                        doctor={"stop_on": "critical"})
    assert isinstance(run, trackmux.Run)
    stopped_at = _loop(run, lambda r: r.should_stop)
    assert stopped_at is not None
    run.finish(timeout=30)
    again = trackmux.init(project="p", backends=[], dir=tmp_path, run_id=run.id,
                          resume="must", rewind_to=COLLAPSE_AT - 10, delivery="thread",
                          doctor={"stop_on": "critical"})
    assert isinstance(again, trackmux.Run)
    assert again.id == run.id and again.attempt.number == 2
    assert again.should_stop is False and again.stop_reason is None
    for step in range(COLLAPSE_AT - 9, COLLAPSE_AT + 5):  # a fixed run: no collapse
        again.log({"critic/score/mean": 0.8, "actor/entropy": 0.9}, step=step)
    assert again.finish(timeout=30).status == "finished"
    meta = spool_meta(again.dir)
    assert meta["state"] == "finished" and meta["stop_reason"] is None
    [stop] = meta["stops"]  # the first attempt's stop stays in the run's history
    assert stop["attempt"] == 1 and stop["finding"]["rule"] == "reward_collapse"


def test_a_stopped_run_that_exits_with_an_error_is_failed(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path, delivery="thread",
                        doctor={"stop_on": "critical"})
    assert isinstance(run, trackmux.Run)
    assert _loop(run, lambda r: r.should_stop) is not None
    assert run.finish(timeout=30, exit_code=1).status == "failed"
    assert spool_meta(run.dir)["stop_reason"]["rule"] == "reward_collapse"


@pytest.mark.parametrize("value", ["crit", True, 3, [], ["no_such_rule"], "reward_collapse"])
def test_bad_stop_on_is_refused_at_init_in_one_line(tmp_path: Path, value: Any) -> None:
    with pytest.raises(ValueError) as caught:
        trackmux.init(project="p", backends=[], dir=tmp_path, doctor={"stop_on": value})
    message = str(caught.value)
    assert "\n" not in message and "stop_on" in message
    assert "'critical', a list of rule names, or False" in message
    assert "reward_collapse" in message and "nonfinite" in message  # the known rules
    assert not list(tmp_path.iterdir())  # refused before any I/O


def test_bad_environment_value_names_the_variable(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("TRACKMUX_DOCTOR_STOP_ON", "nope")
    with pytest.raises(ValueError, match="TRACKMUX_DOCTOR_STOP_ON: unknown rule"):
        trackmux.init(project="p", backends=[], dir=tmp_path)


def test_a_rule_switched_off_cannot_stop_the_run(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="switches off"):
        trackmux.init(project="p", backends=[], dir=tmp_path,
                      doctor={"stop_on": ["stall"], "stall": False})


def test_stop_on_in_a_rules_file(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('stop_on = ["reward_collapse"]\n[stall]\nenabled = false\n')
    run = trackmux.init(project="p", backends=[], dir=tmp_path / "spool", delivery="thread",
                        doctor=str(rules))
    assert isinstance(run, trackmux.Run)
    assert run._stop_policies == [StopPolicy(rules=frozenset({"reward_collapse"}))]
    run.finish(timeout=30)


def test_policy_matches_critical_or_named_rules_at_any_severity() -> None:
    known = ["a", "b"]
    critical = check("critical", known)
    named = check(["a"], known)
    assert critical is not None and named is not None
    assert critical({"rule": "b", "severity": "critical"})
    assert not critical({"rule": "a", "severity": "warning"})
    assert named({"rule": "a", "severity": "info"})
    assert not named({"rule": "b", "severity": "critical"})
    assert check(False, known) is None and check(None, known) is None


def test_a_disabled_run_never_asks_to_stop(monkeypatch: Any) -> None:
    monkeypatch.setenv("RANK", "1")
    run = trackmux.init(project="p", doctor={"stop_on": "critical"})
    assert isinstance(run, trackmux.DisabledRun)
    assert run.should_stop is False and run.stop_reason is None


def test_runs_show_ui_and_report_say_stopped_and_why(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from trackmux.cli.main import cli
    from trackmux.report import build_report
    from trackmux.ui.store import Store

    run = trackmux.init(project="p", backends=[], dir=tmp_path, delivery="thread",
                        doctor={"stop_on": "critical"})
    assert isinstance(run, trackmux.Run)
    assert _loop(run, lambda r: r.should_stop) is not None
    run.finish(timeout=30)
    why = "stopped by the doctor (attempt 1, asked at step"
    listed = CliRunner().invoke(cli, ["runs", str(tmp_path)])
    assert listed.exit_code == 0, listed.output
    assert f"p/{run.id}  stopped" in listed.output and why in listed.output
    assert "critical reward_collapse @ step" in listed.output
    shown = CliRunner().invoke(cli, ["show", run.id, "--dir", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    assert "stopped," in shown.output and why in shown.output
    [row] = Store([tmp_path]).rows()
    assert row["state"] == "stopped" and row["stops"][0].startswith(why)
    page = build_report([str(run.dir)], tmp_path / "r.html", static=True).read_text()
    assert ">stopped</span>" in page and why in page


def test_an_attached_worker_learns_the_stop_at_its_next_flush(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path, delivery="thread",
                        doctor={"stop_on": "critical"})
    assert isinstance(run, trackmux.Run)
    worker = trackmux.attach(role="rollout")
    worker.log({"gen_s": 1.0})
    assert worker.flush(10) and worker.should_stop is False
    assert _loop(run, lambda r: r.should_stop) is not None
    deadline = time.monotonic() + DEADLINE
    while not worker.should_stop and time.monotonic() < deadline:
        worker.log({"gen_s": 1.0})
        worker.flush(10)
    assert worker.should_stop is True
    run.finish(timeout=30)


def test_the_ray_sink_answers_stop_once_the_driver_asks() -> None:
    from trackmux.attached.sink import SinkCore

    sink = SinkCore("run", "p", 0.5)
    assert sink.push("w", 1, ["e"], 0, 1.0) == "ok"
    sink.ask_stop({"rule": "nonfinite"})
    assert sink.push("w", 2, ["e"], 0, 2.0) == "stop"
    assert sink.push("w", 2, ["e"], 0, 2.0) == "stop"  # a resend is taken as before
