"""The frozen export (``trackmux report``, the default page): the UI's payloads drawn by the
same script, offline. The export and the live page must show the same points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from ui_support import log_batch, make_run

import trackmux
from trackmux.cli.main import cli
from trackmux.ui import export


def test_export_draws_what_the_live_ui_draws(browser: Any, server_for: Any,
                                            tmp_path: Path) -> None:
    a = make_run(tmp_path, "a", 40, config={"lr": 1e-3})
    b = make_run(tmp_path, "b", 30, config={"lr": 2e-3}, scale=2.0)
    out = tmp_path / "export.html"
    result = CliRunner().invoke(cli, ["report", str(a), str(b), "-o", str(out)])
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
                     f"{by_name['a']},{by_name['b']}&width={export.WIDTH}").json()
    assert drawn[0] == live["x"]
    order = page.evaluate("() => window.trackmuxExport.data.series['reward/mean'].runs"
                          ".map(r => r.id)")
    live_y = {r["id"]: r["y"] for r in live["runs"]}
    assert sorted(order) == sorted(live_y)
    for index, rid in enumerate(order):
        assert drawn[index + 1] == live_y[rid]
    assert page.locator("#config tr.diff td", has_text="lr").count() == 1
    assert page.locator("#tables table").count() == 2 and page.locator("#images img").count() == 2
    # the live page's series answer carries the same per-run counts the export shows
    assert all("nonfinite" in r for r in live["runs"])
    assert problems == []


def test_export_holds_findings_and_the_sample_browser(browser: Any, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from trackmux.doctor.read import load_findings
    from trackmux.ui import export

    # 25 sample steps (more than the export embeds), a NaN and a KL blow-up the live
    # doctor finds; a sample's text that would close the page's script element
    run = trackmux.init(project="sweep", name="a", backends=[], dir=tmp_path)
    assert isinstance(run, trackmux.Run)
    for step in range(50):
        kl = 0.01 * step if step < 30 else 0.3 * 2 ** (step - 29)
        run.log({"reward/mean": float("nan") if step == 20 else step / 50,
                 "kl/divergence": kl}, step=step)
        if step % 2 == 0:
            log_batch(run, step)
    run.log_samples("notes", {"text": ["</script><b>not markup</b>"]}, step=0)
    assert run.finish(timeout=30).complete
    findings = load_findings(run.dir)
    assert [f["rule"] for f in findings] == ["nonfinite", "kl_blowup"]
    out = tmp_path / "export.html"
    monkeypatch.setattr(export, "SAMPLE_STEPS", 20)  # fewer than the run logged
    result = CliRunner().invoke(cli, ["report", str(run.dir), "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(out.as_uri())
    data = page.evaluate("() => window.trackmuxExport.data")
    [rid] = data["findings"]
    assert data["findings"][rid] == findings  # embedded as the doctor stored them
    page.wait_for_selector("#findings .tm-mark.critical")
    assert page.locator("#findings .tm-mark").count() == 2
    assert findings[1]["message"] in page.locator("#findings").text_content()
    packed = data["samples"][rid]["rollouts"]
    embedded = sorted(int(s) for s in packed["steps"])
    assert len(embedded) == 20 and embedded[0] == 0 and embedded[-1] == 48
    assert packed["total"] == 25
    # the real sample browser on the embedded payloads: last step first, its own slider
    box = page.locator("#samples .panel[data-key='rollouts']")
    assert "20 of 25 steps embedded" in box.locator("h3").inner_text()
    assert box.locator(".tms-steplabel").inner_text() == "step 48"
    assert box.locator(".tms-group").count() == 2
    assert "rgba(" in (box.locator(".tms-tok").first.get_attribute("style") or "")
    box.locator(".tms-step").fill("0")
    page.wait_for_selector("#samples .tms-card[data-sample='0'] .tms-tok:text-is('s0_0_0')")
    assert box.locator(".tms-steplabel").inner_text() == "step 0"
    notes = page.locator("#samples .panel[data-key='notes']").inner_text()
    assert "</script><b>not markup</b>" in notes
    assert errors == []
