"""Remake docs/images/ui.png, ui-compare.png and report.png: two healthy demo runs and the
reward-hacking failure demo beside them (so the doctor's findings show), the UI over them
and the report of all three, in Chromium at 1400 px. Run from the checkout:
python scripts/ui_screenshots.py"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from trackmux.ui.app import Server

CHROMIUM = "/usr/bin/chromium"
root = Path(tempfile.mkdtemp(prefix="trackmux-ui-shots-"))
demos = [["--seed", "0", "--name", "healthy-seed0"], ["--seed", "1", "--name", "healthy-seed1"],
         ["--seed", "0", "--name", "reward-hacking", "--failure", "reward-hacking"]]
for extra in demos:
    subprocess.run([sys.executable, "-m", "trackmux", "demo", "--dir", str(root),
                    "--no-report", *extra], check=True, capture_output=True)
runs = sorted(p for p in (root / "trackmux-demo").iterdir() if p.is_dir())
report = root / "report.html"
subprocess.run([sys.executable, "-m", "trackmux", "report", *map(str, runs), "-o", str(report)],
               check=True, capture_output=True)
with Server([root]) as server:
    server.store.warm()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 960}, bypass_csp=True)
        page.goto(server.url + "#runs=all")
        page.wait_for_selector('.tm-chart[data-key="kl/divergence"] canvas')
        page.wait_for_timeout(1500)  # the findings' marks come after the data
        over = page.locator('.tm-chart[data-key="reward/mean"] .u-over').bounding_box()
        assert over is not None
        page.mouse.move(over["x"] + over["width"] * 0.42, over["y"] + 60)
        page.wait_for_timeout(300)
        page.set_viewport_size({"width": 1400, "height": 1420})  # list, reward and kl
        page.wait_for_timeout(500)
        page.mouse.move(over["x"] + over["width"] * 0.42, over["y"] + 60)
        page.wait_for_timeout(300)
        page.screenshot(path="docs/images/ui.png")
        page.click("button[data-tab=compare]")
        page.wait_for_selector(".tm-path canvas")
        page.wait_for_timeout(500)
        page.screenshot(path="docs/images/ui-compare.png", full_page=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.goto(report.as_uri())
        page.wait_for_selector('canvas')
        page.wait_for_timeout(800)
        page.screenshot(path="docs/images/report.png")
        browser.close()
print(f"screenshots written; runs in {root}")
