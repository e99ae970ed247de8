"""The sample browser (report/assets/samples.js) in headless Chromium: embedded steps load
lazily, groups sit side by side, sort, filter (and a bad filter named), token colouring
with values on hover, no request and no console error; the page stays one file."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from report_support import needs_chromium
from test_report_browser import open_page

import trackmux
from trackmux.report import build_report

pytestmark = needs_chromium
STEPS = list(range(0, 60, 5))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("samples-report")
    run = trackmux.init(project="p", name="grpo", backends=[], dir=root)
    rnd = random.Random(0)
    for step in STEPS:
        toks = [[f"t{step}_{j} " for j in range(5 + i)] for i in range(12)]
        run.log({"reward/mean": step / 60}, step=step)
        run.log_samples("rollouts", {
            "prompt": [f"What is {i // 4}+{i // 4}?" for i in range(12)],
            "response": ["".join(t) for t in toks],
            "reward": [1.0 if i // 4 == 1 else float(i % 4 == 0) for i in range(12)],
            "reward/acc": [float(i % 2) for i in range(12)],
            "advantage": [rnd.gauss(0, 1) for _ in range(12)],
            "uid": [f"g{i // 4}" for i in range(12)]}, step=step,
            tokens={"token": toks, "logprob": [[-0.25 * j for j in range(len(t))] for t in toks]})
    run.finish(timeout=30)
    yield build_report([run.dir], root / "report.html")


def test_sample_browser_in_chromium(browser: Any, report: Path, tmp_path: Path) -> None:
    assert list(report.parent.glob("report_*")) == []  # one file, no side pages
    page, problems, requests = open_page(browser, report)
    try:
        page.wait_for_selector(".sample-browser[data-ready='1']", timeout=15000)
        assert page.locator(".tms-steplabel").inner_text() == "step 55"  # the last step
        assert page.locator(".tms-group").count() == 3
        assert page.locator(".tms-group[data-group='g0'] .tms-card").count() == 4
        assert "all rewards equal" in page.locator(".tms-group[data-group='g1']").inner_text()
        # tokens coloured by logprob, values on hover
        token = page.locator(".tms-card[data-sample='0'] .tms-tok").nth(2)
        assert token.get_attribute("title") == '"t55_2 " · logprob -0.5000'
        assert "rgba(" in (token.get_attribute("style") or "")
        # sort by advantage ascending: first card of the first group has the lowest one
        page.select_option(".tms-sort", "advantage")
        page.click(".tms-dir")
        values = page.eval_on_selector_all(
            ".tms-group[data-group='g0'] .tms-card",
            "els => els.map(e => parseFloat("
            "e.querySelector('.tms-meta').textContent.split(' ')[1]))")
        assert values == sorted(values)
        # the filter speaks the CLI's --where language; a bad one is named
        page.fill(".tms-filter", "reward < 0.5 and length > 6")
        assert page.locator(".tms-info").inner_text().strip() == "5 of 12 samples"
        page.fill(".tms-filter", "rewrd < 1")
        assert "unknown column 'rewrd'" in page.locator(".tms-error").inner_text()
        page.fill(".tms-filter", "")
        # another step, decompressed on demand
        page.locator(".tms-step").fill("0")
        page.wait_for_selector(".tms-card[data-sample='0'] .tms-tok:text-is('t0_0')",
                               timeout=10000)  # wait_for_function would need eval: CSP
        assert page.locator(".tms-steplabel").inner_text() == "step 0"
        assert page.locator(".tms-card[data-sample='0'] .tms-tok").first.inner_text() == "t0_0 "
        shot = tmp_path / "samples.png"
        page.locator("#samples").screenshot(path=str(shot))
        with Image.open(shot) as image:
            assert image.size[0] > 800 and image.size[1] > 300
        assert problems == [] and requests == []
    finally:
        page.close()
