"""The report in headless Chromium: it loads offline with no console errors, requests
nothing, draws the embedded data (uPlot holds the right series and points), its sections
in order, images, the doctor's marks; run text stays text; a screenshot shows charts.

Chromium is Debian's package (``apt-get install chromium``; CI installs it), driven by
the ``playwright`` pip package with ``executable_path`` (never ``playwright install``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PIL import Image
from report_support import DEMO_STEPS, DemoRun, embedded, needs_chromium

import trackmux
from trackmux.report import build_report

pytestmark = needs_chromium


def open_page(browser: Any, path: Path) -> tuple[Any, list[str], list[str]]:
    """Load ``path``; return the page, console problems and requests it tried to make."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    problems: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

    def route(r: Any) -> None:
        url = r.request.url
        if url.startswith(("file:", "data:")):
            r.continue_()
        else:
            requests.append(url)
            r.abort()

    page.route("**/*", route)
    page.goto(path.as_uri(), wait_until="load")
    return page, problems, requests


def drawn(page: Any) -> None:
    page.wait_for_selector("body[data-drawn='1']", timeout=20_000)


def test_demo_report_in_chromium(browser: Any, demo_run: DemoRun, tmp_path: Path) -> None:
    report = demo_run.run_dir / "report.html"
    data = embedded(report.read_text())
    page, problems, requests = open_page(browser, report)
    try:
        drawn(page)
        assert problems == []
        assert requests == []
        keys = page.eval_on_selector_all(".tm-chart", "els => els.map(e => e.dataset.key)")
        assert keys == [k for group in data["groups"].values() for k in group]
        assert len(keys) >= 7 and "reward/mean" in keys
        # uPlot holds the embedded points: one series (the one run), every step
        plotted = page.evaluate("() => window.trackmuxExport.charts['reward/mean'].plot.data")
        assert len(plotted) == 2 and len(plotted[0]) == DEMO_STEPS
        assert plotted[1] == data["series"]["reward/mean"]["runs"][0]["y"]
        box = page.locator('.tm-chart[data-key="reward/mean"] canvas').bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 150
        sections = page.eval_on_selector_all("main > section", "els => els.map(e => e.id)")
        assert sections[:3] == ["findings", "runs", "metrics"]  # the doctor first
        assert {"tables", "images", "config", "delivery"} <= set(sections)
        links = page.eval_on_selector_all("nav#nav a", "els => els.map(e => e.hash.slice(1))")
        assert links == sections
        # every embedded PNG decoded
        sizes = page.eval_on_selector_all("#images figure img",
                                          "els => els.map(e => e.naturalWidth)")
        assert len(sizes) == len(range(0, DEMO_STEPS, 20)) + 1 and all(w > 0 for w in sizes)
        assert page.locator("#tables details").count() == len(range(0, DEMO_STEPS, 20)) + 1
        assert "all delivered" in page.locator("#delivery").inner_text()
        page.locator("#metrics").scroll_into_view_if_needed()
        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot))
        with Image.open(shot) as image:
            assert image.size == (1400, 1000)
            # the charts make the screenshot far from blank: count the chart blue
            pixels = image.convert("RGB").getdata()
            blue = sum(1 for r, g, b in pixels if b > 200 and r < 80 and 80 < g < 140)
            assert blue > 500, blue
    finally:
        page.close()


def test_overlay_report_in_chromium(browser: Any, demo_run: DemoRun, tmp_path: Path) -> None:
    """Two runs on one page: each chart has one line per run, each with its points."""
    run = trackmux.init(project="p", name="other", backends=[], dir=tmp_path,
                        provenance=True)  # the test session turns it off by default
    assert isinstance(run, trackmux.Run)
    for step, value in enumerate([0.0, 0.5, 1.0]):
        run.log({"reward/mean": value}, step=step)
    run.finish()
    other = run.dir
    out = build_report([demo_run.run_dir, other], tmp_path / "two.html")
    page, problems, requests = open_page(browser, out)
    try:
        drawn(page)
        assert problems == [] and requests == []
        plot = page.evaluate("() => { const p = window.trackmuxExport.charts['reward/mean']"
                             ".plot; return {n: p.series.length, data: p.data}; }")
        assert plot["n"] == 3  # x and two runs
        per_run = [sum(v is not None for v in ys) for ys in plot["data"][1:]]
        assert per_run == [DEMO_STEPS, 3]
        assert page.locator('.tm-chart[data-key="reward/mean"] .u-legend .u-series').count() == 3
        # provenance: one column per run (the demo run recorded none: "—"), differences
        # highlighted
        heads = page.eval_on_selector_all("#provenance th", "els => els.map(e => e.textContent)")
        assert heads[0] == "field" and len(heads) == 3
        assert page.locator("#provenance tr.diff td.mono", has_text="command.argv").count() == 1
        assert page.locator("#provenance td.mono", has_text="code").count() >= 1
    finally:
        page.close()


def test_findings_marks_escaping_and_gaps_in_chromium(browser: Any, tmp_path: Path) -> None:
    """The doctor's onsets mark the charts of their keys only; user text stays text; a
    chart says how many values it could not draw."""
    evil = "<b>bold</b><script>window.pwned = 1</script>"
    run = trackmux.init(project="p", name=evil, backends=[], dir=tmp_path,
                        config={"note": evil})
    assert isinstance(run, trackmux.Run)
    for step in range(40):
        run.log({"reward/mean": float("nan") if step == 20 else step / 40,
                 "other/flat": 1.0}, step=step)
    run.log_table("t", ["text"], [[evil]], step=39)
    for step in (10, 20, 30):
        run.log_histogram("critic/values", [step + i / 10 for i in range(50)], step=step)
    run.finish()
    out = build_report([run.dir], tmp_path / "r.html")
    page, problems, requests = open_page(browser, out)
    try:
        drawn(page)
        assert problems == [] and requests == []
        assert page.evaluate("() => window.pwned") is None
        assert page.locator("main b", has_text="bold").count() == 0  # no markup from run text
        assert page.locator("#tables td", has_text=evil).count() == 1
        assert page.locator("#runs td", has_text=evil).count() == 1
        assert page.locator("#findings .tm-mark").count() >= 1
        marks = page.evaluate("() => Object.fromEntries(Object.entries(window.trackmuxExport"
                              ".charts).map(([k, c]) => [k, c.findings().map(f => f.rule)]))")
        assert "nonfinite" in marks["reward/mean"] and marks["other/flat"] == []
        title = page.locator('.tm-chart[data-key="reward/mean"] .tm-chart-title').inner_text()
        assert title == "reward/mean · 1 non-finite value not drawn"
        hist = page.locator('#histograms .tm-hist[data-key="critic/values"]')
        assert "3 steps" in hist.inner_text() and hist.locator("canvas").count() == 1
        assert "spool only: no backend was configured" in page.locator("#delivery").inner_text()
    finally:
        page.close()


def test_the_harness_sees_errors_and_requests(browser: Any, tmp_path: Path) -> None:
    """The checks above can fail: a page with a script error and a remote image is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
                   "<script>undefinedFunction()</script></body></html>")
    page, problems, requests = open_page(browser, bad)
    page.close()
    assert any("undefinedFunction" in p for p in problems)
    assert requests == ["http://127.0.0.1:9/x.png"]
