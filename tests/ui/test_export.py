"""The frozen export (``trackmux report --interactive``): the UI's payloads drawn by the
same script, offline. The export and the live page must show the same points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from ui_fakes import install, write_findings, write_samples
from ui_support import make_run

from trackmux.cli.main import cli


def test_export_draws_what_the_live_ui_draws(browser: Any, server_for: Any,
                                            tmp_path: Path) -> None:
    a = make_run(tmp_path, "a", 40, config={"lr": 1e-3})
    b = make_run(tmp_path, "b", 30, config={"lr": 2e-3}, scale=2.0)
    out = tmp_path / "export.html"
    result = CliRunner().invoke(cli, ["report", str(a), str(b), "--interactive", "-o",
                                      str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert "default-src 'none'" in html and "http://" not in html.split("<script>")[0]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:")
               else (problems.append(r.request.url), r.abort()))
    page.goto(out.as_uri())
    page.wait_for_selector('.tm-chart[data-key="reward/mean"] canvas')
    drawn = page.evaluate("() => window.trackmuxExport.charts['reward/mean'].plot.data")
    server = server_for(tmp_path)
    rows = httpx.get(f"http://127.0.0.1:{server.port}/api/runs").json()["runs"]
    by_name = {r["name"]: r["id"] for r in rows}
    live = httpx.get(f"http://127.0.0.1:{server.port}/api/series?key=reward/mean&runs="
                     f"{by_name['a']},{by_name['b']}&width=1000").json()
    assert drawn[0] == live["x"]
    order = page.evaluate("() => window.trackmuxExport.data.series['reward/mean'].runs"
                          ".map(r => r.id)")
    live_y = {r["id"]: r["y"] for r in live["runs"]}
    assert sorted(order) == sorted(live_y)
    for index, rid in enumerate(order):
        assert drawn[index + 1] == live_y[rid]
    assert page.locator("#config td", has_text="lr").count() == 1
    assert page.locator("#tables table").count() == 2 and page.locator("#images img").count() == 2
    assert problems == []


def test_export_holds_findings_and_the_sample_browser(browser: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch)
    run_dir = make_run(tmp_path, "a", 30)
    write_findings(run_dir, [{"rule": "kl_blowup", "severity": "critical", "step": 20,
                              "keys": ["kl/divergence"], "message": "KL rose </script> 3x"}])
    write_samples(run_dir, {"rollouts": {str(s): {"step": s, "rows": [[f"prompt {s}"]]}
                                         for s in range(0, 30, 5)}})
    out = tmp_path / "export.html"
    result = CliRunner().invoke(cli, ["report", str(run_dir), "--interactive", "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(out.as_uri())
    page.wait_for_selector("#findings .tm-mark.critical")
    assert "KL rose </script> 3x" in page.locator("#findings").text_content()
    page.wait_for_selector("table.fake-samples[data-step='25']")
    page.locator("#samples .step-slider").fill("0")
    page.wait_for_selector("table.fake-samples[data-step='0']")
    assert errors == []
