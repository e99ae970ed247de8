"""The Sweeps tab in headless Chromium: a real sweep's trials table with the doctor's
reason on the pruned trial, one scatter per parameter with the pruned trial marked, the
importance bars, and a click on a trial's run that selects it and opens its charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sweep_ui_support import FAILED, REASON, STDERR, make_sweep_in, tell_one_more
from ui_support import open_ui

from trackmux.ui.store import run_id_of


def test_the_sweeps_tab(browser: Any, server_for: Any, tmp_path: Path) -> None:
    made = make_sweep_in(tmp_path)
    server = server_for(made["root"])
    page, problems = open_ui(browser, server, "#tab=sweeps")
    page.wait_for_selector("#sweep-trials tr[data-trial]")
    rows = page.eval_on_selector_all(
        "#sweep-trials tr[data-trial]",
        "trs => trs.map(t => [t.dataset.trial, t.dataset.state, "
        "t.querySelector('td.reason').textContent])")
    assert len(rows) == 6
    pruned_n, failed_n, *complete_n = made["by_lr"]
    by_number = {int(n): (state, reason) for n, state, reason in rows}
    assert by_number[pruned_n] == ("pruned", REASON)
    assert by_number[failed_n] == ("failed", FAILED)
    assert page.get_attribute(f'#sweep-trials tr[data-trial="{failed_n}"] td.reason',
                              "title") == "\n".join(STDERR)  # its traceback, on hover
    assert all(by_number[n] == ("complete", "") for n in complete_n)
    assert page.text_content("#sweep-best").startswith(f"best: trial {complete_n[-1]},")
    # one scatter per parameter; every trial with a value is a point, the pruned one marked
    assert sorted(page.eval_on_selector_all(".sweep-scatter", "s => s.map(e => e.dataset.param)")
                  ) == ["kl_coef", "lr"]
    lr_plot = '.sweep-scatter[data-param="lr"]'
    assert page.locator(f"{lr_plot} circle.pt").count() == 5
    assert page.locator(f"{lr_plot} circle.pt.pruned").count() == 1
    assert page.get_attribute(f"{lr_plot} circle.pt.pruned", "data-trial") == str(pruned_n)
    # the pruned trial (lowest lr) sits left of every complete one
    xs = page.eval_on_selector_all(
        f"{lr_plot} circle.pt",
        "cs => cs.map(c => [c.classList.contains('pruned'), +c.getAttribute('cx')])")
    pruned_x = next(x for is_pruned, x in xs if is_pruned)
    assert all(pruned_x < x for is_pruned, x in xs if not is_pruned)
    assert page.locator('#sweep-importance tr[data-key="lr"] .imp-bar').count() == 1
    # a trial told while the page is open appears by itself, as the new best
    number = tell_one_more(made, value=100.0)
    page.wait_for_selector(f'#sweep-trials tr[data-trial="{number}"][data-state=complete]',
                           timeout=30_000)
    assert page.text_content("#sweep-best").startswith(f"best: trial {number},")
    assert page.locator(f"{lr_plot} circle.pt").count() == 6
    # the trial whose run is served elsewhere has no link; a click on the pruned trial's
    # run selects it and opens its charts
    assert page.locator("a.sweep-run").count() == 4
    rid = run_id_of(made["runs"][pruned_n].resolve())
    page.click(f'#sweep-trials tr[data-trial="{pruned_n}"] a.sweep-run')
    page.wait_for_selector('nav#tabs button.on[data-tab="charts"]')
    page.wait_for_function(f"() => window.trackmuxUI.state.selected.includes('{rid}')")
    assert page.locator(f'#runs tbody tr.selected[data-run="{rid}"]').count() == 1
    page.wait_for_selector('.tm-chart[data-key="reward/mean"] canvas')
    assert problems == []
