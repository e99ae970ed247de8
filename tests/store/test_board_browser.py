"""The goals board (``/board`` of ``trackmux ui postgresql://...``) in headless Chromium,
served with the reader role: per project each goal with the name, value, step and time of
the run nearest the target now, met or not, that run's curve drawn on a y-axis with the
target's value, the findings of the project's live runs; and
the users' strings (project and run names, goal keys) shown as text, never as markup."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from store_support import reader_dsn, serve_store
from ui_support import open_ui

import trackmux
from trackmux.cli.main import cli

pytest.importorskip("starlette")
pytest.importorskip("playwright")

WAIT_MS = 60_000
HOSTILE = '<script>alert("p")</script>'
IMG = "<img src=x onerror=alert(1)>"
QUOTED = "it's \"live\" & <b>bold</b>"
TAG_KEY = "<b>acc</b>"

# each goal row: the cells' text, the badge, and the best curve's drawn points
ROWS = """sec => [...sec.querySelectorAll('tr[data-goal]')].map(tr => ({
  goal: tr.dataset.goal, met: tr.classList.contains('met'),
  cells: [...tr.children].slice(0, 4).map(td => td.textContent),
  axis: [...tr.querySelectorAll('text.axis')].map(t => t.textContent),
  target: (tr.querySelector('text.axis.target') || {textContent: null}).textContent,
  at: tr.querySelector('text.axis.target') ? [+tr.querySelector('text.axis.target')
    .getAttribute('y'), +tr.querySelector('line.target').getAttribute('y1')] : null,
  points: (tr.querySelector('path') || {getAttribute: () => ''})
    .getAttribute('d').split(/[ML]/).filter(Boolean).length}))"""
# the rendered stroke of a goal's curve is hit half way along it (the browser laid it
# out and paints it there): elementFromPoint answers the path
HIT_STROKE = """tr => {
  tr.scrollIntoView();
  const path = tr.querySelector('path');
  const p = path.getPointAtLength(path.getTotalLength() / 2), m = path.getScreenCTM();
  const hit = document.elementFromPoint(p.x * m.a + m.e, p.y * m.d + m.f);
  return hit === path;
}"""

HIT_DOT = """tr => {
  tr.scrollIntoView();
  const dot = tr.querySelector('circle.dot');
  if (!dot) return false;
  const r = dot.getBoundingClientRect();
  return document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === dot;
}"""


def run_in(root: Path, host: str, dsn: str, project: str, name: str,
           points: list[dict[str, float]], monkeypatch: pytest.MonkeyPatch,
           doctor: bool = False) -> trackmux.Run:
    monkeypatch.setenv("TRACKMUX_HOST", host)
    run = trackmux.init(project, name, backends=["postgres"], dir=root, delivery="thread",
                        backend_options={"postgres": {"dsn": dsn}}, doctor=doctor)
    assert isinstance(run, trackmux.Run)
    for step, values in enumerate(points):
        run.log(values, step=step)
    return run


def set_goal(dsn: str, project: str, goal: str) -> None:
    result = CliRunner().invoke(cli, ["goals", "set", project, goal, "--store", dsn])
    assert result.exit_code == 0, result.output


def section(page: Any, project: str) -> Any:
    handle = page.evaluate_handle(
        "p => [...document.querySelectorAll('section.project')]"
        ".find(s => s.dataset.project === p)", project)
    assert handle.as_element() is not None, f"no section for {project!r}"
    return handle


def test_the_board_shows_goals_best_runs_curves_and_live_findings(
        pg: Any, dsn: str, browser: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ro = reader_dsn(pg, dsn)
    steps = 20
    # project HOSTILE: a finished run reaching acc 0.95 at step 19, and a live run whose
    # doctor finds a non-finite value of the key with markup in its name
    done = run_in(tmp_path / "a", "node-a", dsn, HOSTILE, IMG,
                  [{TAG_KEY: s / steps, "__proto__": 1.0 - s / steps} for s in range(steps)],
                  monkeypatch)
    done.finish(timeout=60)
    live = run_in(tmp_path / "b", "node-b", dsn, HOSTILE, QUOTED,
                  [{TAG_KEY: 0.1, "loss": 1.0}] * 5 + [{TAG_KEY: math.nan, "loss": 1.0}],
                  monkeypatch, doctor=True)
    # project __proto__: one finished run, evaluated once at its end
    proto = run_in(tmp_path / "c", "node-c", dsn, "__proto__", "plain",
                   [{"loss": 1.0 / (s + 1)} for s in range(steps - 1)]
                   + [{"loss": 1.0 / steps, "eval/acc": 0.7}], monkeypatch)
    proto.finish(timeout=60)
    set_goal(dsn, HOSTILE, f"{TAG_KEY} >= 0.9")          # met: 0.95 at step 19
    set_goal(dsn, HOSTILE, "__proto__ <= 0.01")          # not met: best 0.05
    set_goal(dsn, "__proto__", "loss <= 0.2")             # met: 0.05 at step 19
    set_goal(dsn, "__proto__", "constructor > 1")         # no run logged it
    set_goal(dsn, "__proto__", "eval/acc >= 0.5")         # met, by one point
    try:
        with serve_store(ro, tmp_path / "replicas") as server:
            page, problems = open_ui(browser, server, page_path="board",
                                     ready="section.project tr[data-goal]")
            page.wait_for_function(
                "() => [...document.querySelectorAll('.live .finding')]"
                ".some(f => f.textContent.includes('nonfinite'))", timeout=WAIT_MS)
            assert sorted(page.eval_on_selector_all(
                "section.project", "ss => ss.map(s => s.dataset.project)")) == sorted(
                ["__proto__", HOSTILE])

            hostile = section(page, HOSTILE)
            assert hostile.evaluate("s => s.querySelector('h2').textContent") == (
                f"{HOSTILE} (2 runs)")
            met, unmet = hostile.evaluate(ROWS)
            assert met["goal"] == f"{TAG_KEY} >= 0.9" and met["met"] is True
            assert met["cells"][:2] == [f"{TAG_KEY} >= 0.9", "met"]
            assert met["cells"][2].startswith("0.9500 at step 19, ")  # value, step, time
            assert met["cells"][2].endswith("(1 of 2 runs meet it now)")  # live: NaN now
            assert met["cells"][3] == f"{IMG} ({_user()}@node-a)"
            # the sparkline's y-axis: round values covering 0 .. 0.95 (top first), and the
            # target's value on the target line
            assert met["target"] == "0.9" and met["at"][0] == met["at"][1]
            assert met["axis"] == ["0.6", "0.4", "0.2", "0", "0.9"]  # 1, 0.8: too near 0.9
            assert met["points"] == steps  # the best run's whole curve
            assert unmet["goal"] == "__proto__ <= 0.01" and unmet["met"] is False
            assert unmet["cells"][1] == "not met"
            assert unmet["cells"][2].startswith("0.05000 at step 19, ")
            assert unmet["target"] == "0.01" and "1" in unmet["axis"]
            assert unmet["cells"][3].startswith(IMG)
            assert unmet["points"] == steps
            assert hostile.evaluate(f"s => [...s.querySelectorAll('tr[data-goal]')]"
                                    f".map({HIT_STROKE})") == [True, True]
            live_text = hostile.evaluate(
                "s => [...s.querySelectorAll('.live')].map(l => l.textContent)")
            assert len(live_text) == 1 and live_text[0].startswith(
                f"live: {QUOTED} ({_user()}@node-b)")
            assert "critical nonfinite @ step 5" in live_text[0]
            assert TAG_KEY in live_text[0]  # the finding names the key, as text

            other = section(page, "__proto__")
            loss, never, once = other.evaluate(ROWS)
            assert loss["met"] is True and loss["cells"][2].startswith("0.05000 at step 19, ")
            assert loss["target"] == "0.2"
            assert loss["cells"][3] == f"plain ({_user()}@node-c)" and loss["points"] == steps
            assert never["met"] is False and never["points"] == 0
            assert never["cells"][2] == "no run logged it yet"
            assert other.evaluate("s => s.querySelectorAll('.live').length") == 0
            # a goal met by a run's only point: that point is painted, as a dot
            assert once["met"] is True and once["cells"][2].startswith("0.7000 at step 19, ")
            assert once["target"] == "0.5"
            assert once["points"] == 1
            assert other.evaluate(f"s => ({HIT_DOT})(s.querySelectorAll('tr[data-goal]')[2])")

            # the users' strings stayed text: no element came from them
            assert page.locator("#board script, #board img, #board b").count() == 0
            assert problems == []
    finally:
        live.finish(timeout=60)


def _user() -> str:
    import getpass

    return getpass.getuser()
