"""The run list's "goals" link shows only where goals exist (issue 43 item 11): not on a
folder, not on a team store without goals, and once a goal is set (within the board's
cache, without a reload)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from store_support import reader_dsn, serve_store
from ui_support import open_ui

import trackmux
from trackmux.cli.main import cli
from trackmux.ui import board

pytest.importorskip("starlette")
pytest.importorskip("playwright")


def test_the_goals_link_shows_once_the_store_has_a_goal(
        pg: Any, dsn: str, browser: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(board, "GOALS_MAX_AGE", 0.2)
    run = trackmux.init("grpo", "r1", backends=["postgres"], dir=tmp_path / "spool",
                        delivery="thread", backend_options={"postgres": {"dsn": dsn}},
                        doctor=False)
    assert isinstance(run, trackmux.Run)
    for step in range(5):
        run.log({"loss": 1 / (step + 1)}, step=step)
    assert run.finish(timeout=60).complete
    ro = reader_dsn(pg, dsn)
    with serve_store(ro, tmp_path / "replicas") as server:
        page, problems = open_ui(browser, server)
        page.wait_for_function("() => window.trackmuxUI.state.runs.length === 1",
                               timeout=60_000)
        assert not page.locator("#goals-link").is_visible()
        result = CliRunner().invoke(cli, ["goals", "set", "grpo", "loss <= 0.3",
                                          "--store", dsn])
        assert result.exit_code == 0, result.output
        page.wait_for_selector("#goals-link", state="visible", timeout=30_000)
        assert problems == []
