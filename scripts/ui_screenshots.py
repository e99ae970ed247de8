"""Remake docs/images/ui.png and ui-compare.png: three demo runs (seeds 1-3), the UI over
them, Chromium at 1400x1000. Run from the checkout: python scripts/ui_screenshots.py"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from trackmux.ui.app import Server

root = Path(tempfile.mkdtemp(prefix="trackmux-ui-shots-"))
for seed in (1, 2, 3):
    subprocess.run([sys.executable, "-m", "trackmux", "demo", "--dir", str(root), "--steps",
                    "150", "--seed", str(seed), "--name", f"seed{seed}", "--no-report"],
                   check=True, capture_output=True)
with Server([root]) as server:
    server.store.warm()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                             args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
        page.goto(server.url + "#runs=all")
        page.wait_for_selector('.tm-chart[data-key="kl/divergence"] canvas')
        page.wait_for_timeout(800)
        over = page.locator('.tm-chart[data-key="reward/mean"] .u-over').bounding_box()
        assert over is not None
        page.mouse.move(over["x"] + over["width"] * 0.7, over["y"] + 60)
        page.wait_for_timeout(200)
        page.screenshot(path="docs/images/ui.png")
        page.click("button[data-tab=compare]")
        page.wait_for_selector(".tm-path canvas")
        page.wait_for_timeout(500)
        page.screenshot(path="docs/images/ui-compare.png", full_page=True)
        browser.close()
print(f"screenshots written; runs in {root}")
