"""What a look at the UI in Chromium (full-page screenshots of a folder of demo, stopped,
imported and sweep runs) found a user would call broken, each fixed and held here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ui_support import make_run, open_ui


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
