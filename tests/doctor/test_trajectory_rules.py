"""The trajectory rules (doctor/rules/trajectories.py) on agentic runs that break in one
way at step 100, and on healthy ones: each break is found by step 130 by its rule, a
healthy run gets no finding from any rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from agentic import agentic_run
from synthetic import run_doctor, serious

import trackmux

BREAKS = {"failing": "tool_failures", "runaway": "turn_count_shift",
          "collapse": "turn_count_shift", "truncation": "turn_limit_truncation",
          "dominance": "tool_dominance"}


@pytest.mark.parametrize("breaks", sorted(BREAKS))
def test_a_break_at_step_100_is_found_by_step_130(breaks: str) -> None:
    found = serious(run_doctor(agentic_run(steps=131, breaks=breaks, at=100)))
    rules = {f.rule for f in found}
    assert BREAKS[breaks] in rules, [f.message for f in found]
    finding = next(f for f in found if f.rule == BREAKS[breaks])
    assert 100 <= finding.step <= 130, finding
    assert "agent/rollouts" in finding.message
    others = rules - {BREAKS[breaks]}
    # a runaway also hits the turn limit
    assert others <= {"turn_limit_truncation", "turn_count_shift"}, others


def test_failing_tools_name_the_share_and_the_tools() -> None:
    found = [f for f in run_doctor(agentic_run(steps=131, breaks="failing", at=100))
             if f.rule == "tool_failures"]
    assert len(found) == 1
    message = found[0].message
    assert "fail more" in message and "search" in message and "tool_errors > 0" in message


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_healthy_agentic_run_gets_no_finding(seed: int) -> None:
    found = serious(run_doctor(agentic_run(steps=200, seed=seed)))
    assert not found, [f.message for f in found]


def test_a_run_that_was_always_failing_is_not_a_rise() -> None:
    """A steady level is the task's, not a break: the rules speak of change."""
    found = run_doctor(agentic_run(steps=160, breaks="failing", at=0))
    assert not [f for f in found if f.rule == "tool_failures"]


def _log_agentic(run: Any, breaks: str, steps: int) -> None:
    for event in agentic_run(steps=steps, breaks=breaks, at=100):
        column = event.values[event.columns.index("messages")]
        run.log_samples(event.key, {"messages": [orjson.loads(str(c)) for c in column],
                                    "uid": list(event.values[event.columns.index("uid")])},
                        step=event.step, strict=True)


def test_a_live_run_whose_tools_fail_from_step_100_is_told_by_step_130(
        tmp_path: Path) -> None:
    """The issue's bar end to end: ``log_samples`` of conversations, the doctor in the
    delivery process, the finding in the spool and on the file backend."""
    from trackmux.doctor.read import load_findings

    run = trackmux.init(project="p", backends=["file"], dir=tmp_path, doctor=True,
                        backend_options={"file": {"root": str(tmp_path / "out")}})
    _log_agentic(run, "failing", 131)
    assert run.finish(timeout=60).complete
    found = [f for f in load_findings(run.dir) if f["rule"] == "tool_failures"]
    assert len(found) == 1 and 100 <= found[0]["step"] <= 130, found
    [written] = (tmp_path / "out" / "p").glob("*.findings.jsonl")
    assert b"tool_failures" in written.read_bytes()


def test_a_live_healthy_agentic_run_gets_no_finding(tmp_path: Path) -> None:
    from trackmux.doctor.read import load_findings

    run = trackmux.init(project="p", backends=[], dir=tmp_path, doctor=True)
    _log_agentic(run, "", 131)
    assert run.finish(timeout=60).complete
    assert load_findings(run.dir) == []
