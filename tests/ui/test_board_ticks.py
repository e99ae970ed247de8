"""The goals board's sparkline y-axis: round values that cover the curve and the target.

It labelled the raw ends of the data (0.0113, 0.587): numbers a reader has to parse
before the curve means anything, and an axis whose top sat below the target's line."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from ui_support import make_run, open_board


def _goal(goal: str, target: float, values: list[float]) -> dict[str, Any]:
    return {"goal": goal, "met": False, "target": target, "judged": "latest value",
            "meeting": 0, "runs": 1,
            "best": {"value": values[-1], "step": len(values) - 1, "time": 1.8e9,
                     "name": "run", "user": "u", "host": "h"},
            "curve": {"steps": list(range(len(values))), "values": values}}


GOALS = {"boards": [{"projects": [{"project": "grpo", "runs": 1, "live": [], "goals": [
    _goal("acc >= 0.6", 0.6, [0.0113 + (0.587 - 0.0113) * s / 49 for s in range(50)]),
    _goal("kl <= 0.3", 0.3, [-0.04 + 0.01 * s for s in range(12)]),
    _goal("loss <= 100", 100.0, [5000.0 - 30.0 * s for s in range(100)]),
]}]}]}

#: per goal row: the tick labels top to bottom, their y, the target's label and its y
AXIS = """trs => trs.map(tr => ({
  goal: tr.dataset.goal,
  ticks: [...tr.querySelectorAll('text.axis.tick')].map(t => t.textContent),
  ys: [...tr.querySelectorAll('text.axis.tick')].map(t => +t.getAttribute('y')),
  marks: tr.querySelectorAll('line.tick').length,
  target: tr.querySelector('text.axis.target').textContent,
  ty: +tr.querySelector('text.axis.target').getAttribute('y'),
  top: Math.min(...[...tr.querySelectorAll('line.tick')].map(l => +l.getAttribute('y1'))),
  bottom: Math.max(...[...tr.querySelectorAll('line.tick')].map(l => +l.getAttribute('y1'))),
  path: (b => ({y: b.y, height: b.height}))(tr.querySelector('svg.goal-curve path').getBBox()),
}))"""


def test_the_sparkline_axis_labels_round_values_covering_the_data_and_the_target(
        browser: Any, server_for: Any, tmp_path: Path) -> None:
    make_run(tmp_path, "one", 5, doctor=False)
    page, problems = open_board(browser, server_for(tmp_path), GOALS,
                                ready="tr[data-goal] svg.goal-curve text.axis.target")
    try:
        acc, kl, loss = page.eval_on_selector_all("tr[data-goal]", AXIS)
        # 0.0113 .. 0.587 with the target 0.6: 0, 0.2, 0.4, 0.6 (0.6 is the target's label)
        assert acc["marks"] == 4 and acc["ticks"] == ["0.4", "0.2", "0"], acc
        assert acc["target"] == "0.6" and acc["ty"] == acc["top"]
        # below zero, the target above the data: -0.1 .. 0.3 in steps of 0.1
        assert kl["marks"] == 5 and kl["ticks"] == ["0.2", "0.1", "0", "-0.1"], kl
        assert kl["target"] == "0.3" and kl["ty"] == kl["top"]
        # thousands, the target near the bottom: its label stands for the 0 beside it
        assert loss["ticks"] == ["5000", "4000", "3000", "2000", "1000"], loss
        assert loss["marks"] == 6 and loss["target"] == "100"
        for row in (acc, kl, loss):
            ticks = [float(t) for t in row["ticks"]]
            steps = {round(a - b, 9) for a, b in itertools.pairwise(ticks)}
            assert len(steps) == 1, row  # evenly spaced, top to bottom
            assert row["ys"] == sorted(row["ys"]), row
            # the curve lies within the axis's first and last tick
            assert row["top"] - 0.5 <= row["path"]["y"], row
            assert row["path"]["y"] + row["path"]["height"] <= row["bottom"] + 0.5, row
            assert row["top"] - 0.5 <= row["ty"] <= row["bottom"] + 0.5, row
        assert problems == []
    finally:
        page.close()


WIDE = {"boards": [{"projects": [{"project": "grpo", "runs": 1, "live": [], "goals": [
    _goal("tokens >= 5e7", 5e7, [1.2e7 + 6e5 * s for s in range(50)]),
    _goal("loss <= -3e6", -3e6, [-2.5e6 - 1e4 * s for s in range(50)]),
    _goal("lr <= 1e-5", 1e-5, [4e-5 - 5e-7 * s for s in range(50)]),
]}]}]}

#: per goal row: every axis label (ticks top to bottom, then the target) and its left edge
LABELS = """trs => trs.map(tr => [...tr.querySelectorAll('svg.goal-curve text.axis')].map(
  t => [t.textContent, t.getBBox().x]))"""


def test_axis_labels_of_large_and_tiny_values_keep_one_unit_and_fit_left_of_the_axis(
        browser: Any, server_for: Any, tmp_path: Path) -> None:
    """Seen in a screenshot of the board: a curve in the tens of millions lost its first
    digit left of the axis (50000000 read 0000000), one at -2.5 million its minus sign
    (an axis of positive numbers, upside down). Each axis writes its values in the unit of
    its largest one, and every label fits inside the curve's box."""
    make_run(tmp_path, "one", 5, doctor=False)
    page, problems = open_board(browser, server_for(tmp_path), WIDE,
                                ready="tr[data-goal] svg.goal-curve text.axis.target")
    try:
        tokens, loss, lr = page.eval_on_selector_all("tr[data-goal]", LABELS)
        assert [said for said, _ in tokens] == ["40M", "30M", "20M", "10M", "50M"], tokens
        assert [said for said, _ in loss] == ["-2.5M", "-2.6M", "-2.7M", "-2.8M", "-2.9M",
                                              "-3M"], loss
        assert [said for said, _ in lr] == ["4e-5", "3e-5", "2e-5", "1e-5"], lr
        for row in (tokens, loss, lr):
            assert all(left >= 0 for _, left in row), row
        assert problems == []
    finally:
        page.close()
