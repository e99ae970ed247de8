"""The report's charts and sections in headless Chromium, for what the live page fixed
too (issue 33, items 3, 4, 5, 8, 9, 10; issue 34, 16): a metric logged once is a dot,
large axis labels fit, one spike does not squash the rest, a finding leads to its chart,
a capped table says so, and group ids such as ``__proto__`` are ordinary ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report_support import needs_chromium
from test_report_browser import drawn, open_page

import trackmux
from browser_support import ink_at
from trackmux.report import build_report
from trackmux.report.sections import MAX_TABLE_ROWS

pytestmark = needs_chromium
HANDLE = "(key) => window.trackmuxExport.charts[key]"
INK_AT = ink_at("window.trackmuxExport.charts[a.key].plot")
GROUPS = ["__proto__", "constructor", "toString", "valueOf"]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("charts-report")
    run = trackmux.init(project="p", name="grpo", backends=[], dir=root)
    assert isinstance(run, trackmux.Run)
    for step in range(60):
        run.log({"perf/throughput": 120_000 + 700 * step,
                 "kl/divergence": 41.0 if step == 30 else 0.01 + 0.001 * step,
                 "reward/mean": float("nan") if step == 45 else step / 60}, step=step)
    run.log({"train/train_loss": 0.4321}, step=59)  # logged once
    run.log_samples("rollouts", {"prompt": [f"p-{g}" for g in GROUPS for _ in range(2)],
                                 "response": [f"answer {i}" for i in range(8)],
                                 "reward": [float(i % 2) for i in range(8)],
                                 "uid": [g for g in GROUPS for _ in range(2)]}, step=10)
    run.log_table("rollouts_table", ["i"], [[i] for i in range(MAX_TABLE_ROWS + 50)], step=59)
    assert run.finish(timeout=30).complete
    return build_report([run.dir], root / "report.html")


def test_a_single_point_is_drawn(browser: Any, report: Path) -> None:
    page, problems, requests = open_page(browser, report)
    drawn(page)
    assert page.evaluate(INK_AT, {"key": "train/train_loss", "x": 59, "y": 0.4321}) >= 9
    assert problems == [] and requests == []


def test_axis_labels_fit_and_a_spike_is_marked_not_the_range(browser: Any, report: Path) -> None:
    page, problems, _ = open_page(browser, report)
    drawn(page)
    fit = page.evaluate("""() => {
      const u = window.trackmuxExport.charts['perf/throughput'].plot;
      const ctx = document.createElement('canvas').getContext('2d');
      ctx.font = u.axes[1].font ? u.axes[1].font[0] : '12px sans-serif';
      const widest = Math.max(...(u.axes[1]._values || [])
        .map(t => ctx.measureText(String(t)).width));
      const room = u.over.getBoundingClientRect().left
            - u.root.querySelector('.u-wrap').getBoundingClientRect().left;
      return {labels: u.axes[1]._values, widest, room}; }""")
    assert fit["labels"] and fit["widest"] + 15 <= fit["room"], fit
    assert page.evaluate(f"() => ({HANDLE})('kl/divergence').plot.scales.y.max") < 1
    assert page.get_attribute('.tm-chart[data-key="kl/divergence"]', "data-clipped") == "1"
    page.select_option("#yscale", "log")
    page.wait_for_function(f"() => ({HANDLE})('kl/divergence').plot.scales.y.distr === 3")
    assert problems == []


def test_a_finding_leads_to_its_chart(browser: Any, report: Path) -> None:
    page, problems, _ = open_page(browser, report)
    drawn(page)
    page.click(".tm-finding-list a.key[data-rule=nonfinite][data-key='reward/mean']")
    page.wait_for_function(f"() => ({HANDLE})('reward/mean').zoomed()")
    x = page.evaluate(f"() => ({HANDLE})('reward/mean').plot.scales.x")
    assert x["min"] <= 45 <= x["max"] and x["max"] - x["min"] < 40, x
    assert page.locator(".tm-axis-tick").count() >= 3  # the timeline's step axis
    assert problems == []


def test_group_ids_that_name_object_members_and_a_capped_table(browser: Any,
                                                               report: Path) -> None:
    page, problems, _ = open_page(browser, report)
    drawn(page)
    page.wait_for_selector(".sample-browser[data-ready='1'] .tms-card")
    groups = page.eval_on_selector_all(".tms-group", "els => els.map(e => e.dataset.group)")
    assert groups == GROUPS
    assert page.locator(".tms-card").count() == 8
    cap = page.locator("#tables .tm-cap").text_content()
    assert f"of {MAX_TABLE_ROWS + 50}" in cap and "trackmux show" in cap
    assert problems == []
