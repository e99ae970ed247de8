"""What a newcomer's afternoon found in the dashboard (issue 43): a finding of a samples
rule opens the samples at its onset, an empty folder says what to do, the goals link
shows only where goals are, and sweep trials are named, focused by a click and coloured
apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ui_support import log_batch, open_ui

import trackmux


def test_a_samples_finding_opens_the_samples_at_its_onset(browser: Any, server_for: Any,
                                                         tmp_path: Path) -> None:
    """Item 6: ``component_divergence`` and ``tool_failures`` (and any rule whose key is
    a sample key of the run) open the Samples tab, not Charts filtered to a samples key."""
    run = trackmux.init(project="dash", name="tools", backends=[], dir=tmp_path, doctor=False)
    assert isinstance(run, trackmux.Run)
    for step in range(40):
        run.log({"reward/mean": step / 40}, step=step)
        if step in (0, 10, 20, 30):
            log_batch(run, step)
    assert run.finish(timeout=30).complete
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server)
    rid = page.evaluate("() => window.trackmuxUI.state.runs[0].id")
    for rule, step, shown in (("component_divergence", 24, "step 20"),
                              ("a_plugins_rule", 10, "step 10")):
        page.click("button[data-tab=charts]")
        finding = {"rule": rule, "severity": "warning", "step": step, "keys": ["rollouts"],
                   "message": "m", "evidence": []}
        page.evaluate("(a) => window.trackmuxUI.openFinding(a.f, a.rid, null)",
                      {"f": finding, "rid": rid})
        page.wait_for_selector(".panel.samples[data-focus='1'] .sample-browser[data-ready='1']",
                               timeout=15_000)
        label = page.locator(".panel.samples[data-focus='1'] .tms-steplabel").inner_text()
        assert label == shown, rule
        assert page.locator("button[data-tab=samples].on").count() == 1
    assert problems == []


def test_an_empty_folder_says_what_to_do_and_fills_in(browser: Any, server_for: Any,
                                                      tmp_path: Path) -> None:
    """Item 11: the folder looked in and how to log a run; the first run then shows
    without a reload. No team store is served, so there is no goals link."""
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server, ready=".empty-folder")
    hint = page.locator(".empty-folder").inner_text()
    assert str(tmp_path) in hint and "trackmux.init(" in hint and "TRACKMUX_DIR" in hint
    assert not page.locator("#goals-link").is_visible()
    run = trackmux.init(project="dash", name="first", backends=[], dir=tmp_path, doctor=False)
    assert isinstance(run, trackmux.Run)
    for step in range(5):
        run.log({"loss": 1 / (step + 1)}, step=step)
    assert run.finish(timeout=30).complete
    page.wait_for_selector('.tm-chart[data-key="loss"]', timeout=20_000)
    assert page.locator(".empty-folder").count() == 0
    assert problems == []
