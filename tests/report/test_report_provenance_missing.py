"""A run with no provenance (imported from another tracker's files) gets a column that says
why, not one of dashes only: the demo folder's report showed an imported console log's
column empty from top to bottom."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import trackmux
from trackmux.cli.main import cli
from trackmux.report import build_report


def test_an_imported_run_says_its_provenance_was_not_recorded(
        browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKMUX_PROVENANCE", "1")  # tests/conftest.py turns it off
    run = trackmux.init(project="p", name="logged", backends=[], dir=tmp_path, doctor=False)
    assert isinstance(run, trackmux.Run)
    run.log({"reward": 1.0}, step=1)
    assert run.finish(timeout=30).complete
    log = tmp_path / "train.log"
    log.write_text("".join(f"step:{s} - critic/score/mean:{s / 10} - actor/ppo_kl:0.01\n"
                           for s in range(1, 6)))
    result = CliRunner().invoke(cli, ["import", str(log), "--dir", str(tmp_path / "imp"),
                                      "--name", "imported"])
    assert result.exit_code == 0, result.output
    [imported] = [p.parent for p in (tmp_path / "imp").glob("*/*/spool.db")]
    said = f"not recorded: imported from console {log}"
    page = build_report([run.dir, imported], tmp_path / "s.html", static=True).read_text()
    section = page[page.index('<section id="provenance">'):]
    assert said in section[:section.index("</section>")]
    scripted = build_report([run.dir, imported], tmp_path / "r.html")
    view = browser.new_page()
    try:
        view.goto(scripted.as_uri())
        view.wait_for_selector("body[data-drawn='1']", timeout=20_000)
        code = view.eval_on_selector_all(
            "table.provenance tr", "trs => trs.map(t => [...t.children].map(c => c.textContent))"
            ".find(r => r[0] === 'code')")
        assert code[0] == "code" and code[2] == said and code[1] != "—", code
    finally:
        view.close()
