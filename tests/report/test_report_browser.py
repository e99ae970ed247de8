"""The report in headless Chromium: it loads offline with no console errors, requests
nothing, draws its charts and images, and a screenshot shows them.

Chromium is Debian's package (``apt-get install chromium``; CI installs it), driven by
the ``playwright`` pip package with ``executable_path`` (never ``playwright install``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from report_support import DEMO_STEPS, DemoRun

from trackmux.report import build_report

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason=f"{CHROMIUM} is missing (apt-get install chromium)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield instance
        finally:
            instance.close()


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


def test_demo_report_in_chromium(browser: Any, demo_run: DemoRun, tmp_path: Path) -> None:
    report = demo_run.run_dir / "report.html"
    page, problems, requests = open_page(browser, report)
    try:
        assert problems == []
        assert requests == []
        charts = page.locator("svg.chart")
        keys = page.eval_on_selector_all("svg.chart", "els => els.map(e => e.dataset.key)")
        assert charts.count() == len(keys) >= 7
        assert "reward/mean" in keys
        line = page.locator('svg.chart[data-key="reward/mean"] polyline.series')
        assert line.count() == 1
        assert page.eval_on_selector('svg.chart[data-key="reward/mean"] polyline.series',
                                     "e => e.points.numberOfItems") == DEMO_STEPS
        box = page.locator('svg.chart[data-key="reward/mean"]').bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 150
        # every embedded PNG decoded
        sizes = page.eval_on_selector_all("figure img", "els => els.map(e => e.naturalWidth)")
        assert len(sizes) == len(range(0, DEMO_STEPS, 20)) + 1 and all(w > 0 for w in sizes)
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
    """Two runs on one page: each chart has one line per run."""
    out = build_report([demo_run.run_dir, demo_run.run_dir], tmp_path / "two.html")
    page, problems, requests = open_page(browser, out)
    try:
        assert problems == [] and requests == []
        assert page.locator('svg.chart[data-key="reward/mean"] polyline.series').count() == 2
        assert page.locator(".legend span").count() == 2
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
