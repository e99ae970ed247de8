"""A chart over runs the server has read only in part (a restart over big spools or
replicas, before the warm-up): the page draws what is read, says it is loading, and asks
again until every run is complete, without a reload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from ui_support import make_run, open_ui, series_count

from trackmux.ui import queries

CHART = "window.trackmuxUI.state.charts.find(c => c.key === 'reward/mean')"


def test_a_partial_chart_says_it_is_loading_and_completes(
        browser: Any, server_for: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    make_run(tmp_path, "long", 600, doctor=False)
    # no warm-up, and each request reads 120 events of the run: only the page's own
    # polls read it on, so the first chart is partial for several seconds
    monkeypatch.setattr(queries, "REQUEST_BUDGET", 0.0)
    monkeypatch.setattr(queries, "REQUEST_FIRST", 120)
    server = server_for(tmp_path, warm=False)
    page, problems = open_ui(browser, server)
    assert series_count(page, "reward/mean") == 1
    page.wait_for_function(f"() => {CHART}.partial === true")
    note = page.locator('p.loading[data-key="reward/mean"]')
    assert note.is_visible()
    assert "loading" in note.inner_text()
    first_cursor = page.evaluate(f"() => Object.values({CHART}.cursors)[0]")

    page.wait_for_function(f"() => {CHART}.partial === false", timeout=120_000)
    assert not note.is_visible()
    (row,) = httpx.get(f"http://127.0.0.1:{server.port}/api/runs", timeout=30).json()["runs"]
    cursor = page.evaluate(f"() => Object.values({CHART}.cursors)[0]")
    assert first_cursor < cursor == row["last_seq"]
    # the whole run is drawn: the chart's x axis reaches the last step
    last_x = page.evaluate(f"() => {{ const d = {CHART}.handle.plot.data[0]; "
                           "return d[d.length - 1]; }")
    assert last_x >= 590
    assert problems == []
