"""What a look at the UI in Chromium (full-page screenshots of a folder of demo, stopped,
imported and sweep runs) found a user would call broken, each fixed and held here."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ui_support import CHART, make_run, open_board, open_ui

#: page function: the chart of key ``a`` has drawn its y axis
CHART_DRAWN = (f"(key) => {{ const c = ({CHART})(key); "
               "return !!(c && c.handle && c.handle.plot.axes[1]._values); }")


def test_the_coverage_line_says_what_was_read_and_folds_the_rules_that_could_not_run(
        browser: Any, server_for: Any, tmp_path: Path) -> None:
    """The Findings tab gave every run a paragraph of about twenty "rule (why)" entries
    under "doctor coverage", the same for each run, longer than its findings: what the
    doctor read is the line; the rules that could not run are one folded summary."""
    make_run(tmp_path, "judged", 20, doctor=False)
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server, "#runs=all&tab=findings")
    try:
        said = page.wait_for_selector(".tm-coverage").text_content()
        assert said.startswith("doctor coverage: judged: read reward and kl")
        assert "reward <- reward/mean" in said and "kl <- kl/divergence" in said
        assert "not run" not in said and "entropy_collapse" not in said
        folded = page.locator("details.tm-not-run")
        assert folded.count() == 1
        assert folded.get_attribute("open") is None  # folded until asked
        summary = folded.locator("summary").text_content()
        count = int(summary.split()[0])
        assert summary == f"{count} rules could not run on this run", summary
        rules = folded.locator("li")
        assert rules.count() == count > 5
        assert not rules.first.is_visible()
        folded.locator("summary").click()
        page.wait_for_selector("details.tm-not-run[open] li")
        assert "entropy_collapse: no key for entropy" in folded.text_content()
        assert problems == []
    finally:
        page.close()


def test_an_axis_writes_its_values_in_one_unit(browser: Any, server_for: Any,
                                                tmp_path: Path) -> None:
    """The demo's throughput axis read 20,000 40,000 60,000 80,000 100k 120k: each label
    picked its own unit. An axis takes the unit of its largest value."""
    import trackmux

    run = trackmux.init(project="p", name="fast", backends=[], dir=tmp_path, doctor=False)
    assert isinstance(run, trackmux.Run)
    for step in range(40):
        run.log({"throughput": 15_000.0 + 2_700.0 * step}, step=step)
    assert run.finish(timeout=30).complete
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server, "#runs=all")
    try:
        page.wait_for_selector('.tm-chart[data-key="throughput"] canvas')
        page.wait_for_function(CHART_DRAWN, arg="throughput")
        labels = page.evaluate(f"(key) => ({CHART})(key).handle.plot.axes[1]._values",
                               "throughput")
        assert len(labels) >= 3 and "100k" in labels, labels
        assert all(t == "0" or t.endswith("k") for t in labels), labels
        assert problems == []
    finally:
        page.close()


def test_no_run_wears_the_colour_of_a_finding(browser: Any, server_for: Any,
                                              tmp_path: Path) -> None:
    """A run stopped by the doctor was drawn in the critical red, so the red dashed onset
    of its reward_collapse vanished into its own line, and orange and mustard runs looked
    like warnings: run colours stay >= 25 apart in CIELAB from every severity colour, and
    the static report draws runs in the same colours."""
    from test_browser_round4 import _lab

    from trackmux.report.charts import PALETTE

    make_run(tmp_path, "one", 5, doctor=False)
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server)
    try:
        palette = page.evaluate("() => window.trackmuxCharts.PALETTE")
        severity = page.evaluate("() => window.trackmuxCharts.SEVERITY")
        assert sorted(severity) == ["critical", "info", "warning"]
        near = min((math.dist(_lab(run), _lab(mark)), run, name)
                   for run in palette for name, mark in severity.items())
        assert near[0] >= 25, near
        # the static report gives colours in order: its first runs never get two blues
        first = min((math.dist(_lab(a), _lab(b)), a, b)
                    for i, a in enumerate(palette[:4]) for b in palette[i + 1:4])
        assert first[0] >= 45, first
        assert list(PALETTE) == palette
        assert problems == []
    finally:
        page.close()


GOALS = {"boards": [{"projects": [{"project": "grpo", "runs": 3, "live": [], "goals": [
    {"goal": goal, "met": met, "target": target, "judged": "latest value", "meeting": int(met),
     "runs": 3, "best": {"value": value, "step": 79, "time": 1.8e9, "name": name, "user": "u",
                         "host": "h"},
     "curve": {"steps": list(range(80)), "values": [value * s / 79 for s in range(80)]}}
    for goal, met, target, value, name in (("reward/mean > 0.6", True, 0.6, 0.69, "lr1e-5"),
                                           ("kl < 0.05", False, 0.05, 0.08, "lr3e-6"))]}]}]}


def test_the_goals_board_has_headed_columns_and_whole_row_lines(
        browser: Any, server_for: Any, tmp_path: Path) -> None:
    """The board's state cell was itself the badge (an inline-block cell): it stood out of
    the table, the line under each goal broke around it, and no column said what
    '0.6934 at step 79' or the run's name were. Served from a folder, with the store's
    answer given in the page (the board's own tests run it against PostgreSQL)."""
    make_run(tmp_path, "one", 5, doctor=False)
    page, problems = open_board(browser, server_for(tmp_path), GOALS)
    try:
        assert page.eval_on_selector_all("table.goals th", "ths => ths.map(t => t.textContent)"
                                         ) == ["goal", "state", "the run nearest the target, now",
                                               "run", "its curve"]
        rows = page.eval_on_selector_all("tr[data-goal]", """trs => trs.map(tr =>
          [...tr.children].map(td => [getComputedStyle(td).display,
                                      Math.round(td.getBoundingClientRect().bottom)]))""")
        for cells in rows:
            assert {display for display, _ in cells} == {"table-cell"}, cells
            assert len({bottom for _, bottom in cells}) == 1, cells  # one line under the row
        assert page.locator("tr[data-goal] td .badge.ok", has_text="met").count() == 1
        assert page.locator("tr[data-goal] td .badge.warn", has_text="not met").count() == 1
        assert problems == []
    finally:
        page.close()


def test_a_chart_legend_lists_only_the_runs_that_logged_its_key(
        browser: Any, server_for: Any, tmp_path: Path) -> None:
    """With eight runs chosen, every chart listed all eight under it, also the seven that
    never logged its key (an imported run's actor/ppo_kl named the two demo runs). A run
    that logged the key as NaN only stays listed: its values are the news."""
    import trackmux

    for name, rows in (("both", [{"a": 1.0, "b": 2.0}, {"a": 2.0, "b": 3.0}]),
                       ("only-a", [{"a": 3.0}, {"a": 4.0}]),
                       ("nan-b", [{"a": 0.5, "b": float("nan")}, {"a": 0.7, "b": float("nan")}])):
        run = trackmux.init(project="p", name=name, backends=[], dir=tmp_path, doctor=False)
        assert isinstance(run, trackmux.Run)
        for step, values in enumerate(rows):
            run.log(values, step=step)
        assert run.finish(timeout=30).complete
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server, "#runs=all")
    legend = """(key) => [...document.querySelectorAll(
      `.tm-chart[data-key="${key}"] .u-legend .u-series`)].slice(1)
      .filter(r => r.offsetParent !== null).map(r => r.textContent.split(':')[0].trim())"""
    try:
        for key in ("a", "b"):
            page.wait_for_selector(f'.tm-chart[data-key="{key}"] .u-legend .u-series')
        page.wait_for_function(f"() => ({legend})('b').length === 2")
        assert sorted(page.evaluate(legend, "b")) == ["both", "nan-b"]
        assert sorted(page.evaluate(legend, "a")) == ["both", "nan-b", "only-a"]
        assert problems == []
    finally:
        page.close()


def test_the_histograms_tab_names_the_chosen_runs_that_have_none(
        browser: Any, server_for: Any, tmp_path: Path) -> None:
    """With three runs chosen and one of them holding histograms, the tab drew that one
    and said nothing of the two others: they looked lost, not empty."""
    import trackmux

    for name in ("with-hist", "plain-a", "plain-b"):
        run = trackmux.init(project="p", name=name, backends=[], dir=tmp_path, doctor=False)
        assert isinstance(run, trackmux.Run)
        for step in range(3):
            run.log({"a": float(step)}, step=step)
            if name == "with-hist":
                run.log_histogram("weights", [0.1 * i + step for i in range(50)], step=step)
        assert run.finish(timeout=30).complete
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server, "#runs=all&tab=histograms")
    try:
        page.wait_for_selector(".tm-hist[data-key='weights'] canvas")
        said = page.wait_for_selector(".tm-no-histograms").text_content()
        assert said.startswith("no histograms in ")
        assert sorted(said.removeprefix("no histograms in ").split(", ")) == [
            "plain-a", "plain-b"]
        heads = page.locator("#view .run-head").all_text_contents()
        assert [h.strip() for h in heads] == ["with-hist"]
        assert problems == []
    finally:
        page.close()
