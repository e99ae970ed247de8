"""What the dashboard shows, in headless Chromium (issue 33, items 1-9; issue 34, 16): a
key logged after the page opened gets its chart, smoothing redraws every chart, a single
point is drawn, axis labels fit, run colours stay, every chosen run's samples show, empty
tabs say so, a spike does not squash the rest, a finding leads to its data, and group ids
such as ``__proto__`` are ordinary ids."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ui_support import CHART, INK_AT, log_batch, make_run, open_ui, series_count

import trackmux


def spool_run(root: Path, name: str, metrics: list[tuple[int, dict[str, float]]],
              **kwargs: Any) -> trackmux.Run:
    run = trackmux.init(project="dash", name=name, backends=[], dir=root, **kwargs)
    assert isinstance(run, trackmux.Run)
    for step, values in metrics:
        run.log(values, step=step)
    return run


def wait_chart(page: Any, key: str) -> None:
    page.wait_for_function(f"() => {{ const c = ({CHART})({key!r}); return c && c.handle; }}",
                           timeout=15_000)


def test_a_key_logged_after_the_page_opened_gets_a_chart(browser: Any, server_for: Any,
                                                         tmp_path: Path) -> None:
    run = spool_run(tmp_path, "live", [(s, {"reward/mean": s / 10}) for s in range(5)])
    run._spool.flush(5)
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server)
    series_count(page, "reward/mean")
    assert page.locator('.tm-chart[data-key="val/score"]').count() == 0
    for step in range(5, 10):  # a validation metric from step 5, and a doctor-like key
        run.log({"reward/mean": step / 10, "val/score": step / 20}, step=step)
    run._spool.flush(5)
    page.wait_for_selector('.tm-chart[data-key="val/score"] canvas', timeout=15_000)
    page.wait_for_function(f"() => ({CHART})('val/score').handle.plot.data[0].length >= 5")
    # it tails like the others
    run.log({"val/score": 0.9}, step=50)
    run._spool.flush(5)
    page.wait_for_function(f"() => ({CHART})('val/score').handle.plot.data[0].includes(50)",
                           timeout=15_000)
    assert page.locator("h3.group", has_text="val").count() == 1
    run.finish()
    assert problems == []


def test_smoothing_redraws_every_chart_zoomed_or_not(browser: Any, server_for: Any,
                                                     tmp_path: Path) -> None:
    make_run(tmp_path, "noisy", 200, nan_at=None)
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server)
    for key in ("reward/mean", "kl/divergence"):
        series_count(page, key)
    over = page.locator('.tm-chart[data-key="reward/mean"] .u-over').bounding_box()
    page.evaluate(f"() => {{ window.unzoomed = ({CHART})('reward/mean').payload; }}")
    page.mouse.move(over["x"] + 60, over["y"] + 20)
    page.mouse.down()
    page.mouse.move(over["x"] + 300, over["y"] + 20, steps=5)
    page.mouse.up()
    # the zoomed range's exact points arrived and are drawn: a new payload (the chart is
    # updated with it in the same turn); a sleep let a slow answer come after the snapshot
    page.wait_for_function(f"() => {{ const c = ({CHART})('reward/mean');"
                           " return c.lo !== null && c.payload !== window.unzoomed; }",
                           timeout=15_000)
    snap = ("(key) => window.trackmuxUI.state.charts.find(c => c.key === key)"
            ".handle.plot.ctx.canvas.toDataURL()")
    before = {k: page.evaluate(snap, k) for k in ("reward/mean", "kl/divergence")}
    page.evaluate("() => { const s = document.getElementById('smoothing'); s.value = '0.95';"
                  " s.dispatchEvent(new Event('input')); }")
    for key in before:  # the canvas itself changed, not only the chart's data
        page.wait_for_function(f"(key) => ({snap})(key) !== {before[key]!r}", arg=key,
                               timeout=5_000)
    assert page.evaluate(f"() => ({CHART})('reward/mean').handle.zoomed()")
    assert problems == []


def test_a_single_point_is_drawn(browser: Any, server_for: Any, tmp_path: Path) -> None:
    run = spool_run(tmp_path, "trl", [(s, {"train/loss": 1 / (s + 1)}) for s in range(20)])
    run.log({"train/train_loss": 0.4321}, step=19)  # TRL logs it once, at the end
    run.finish()
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server)
    wait_chart(page, "train/train_loss")
    ink = page.evaluate(INK_AT, {"key": "train/train_loss", "x": 19, "y": 0.4321})
    assert ink >= 9, ink  # a dot, not an empty chart
    assert problems == []


def test_large_axis_labels_fit_their_axis(browser: Any, server_for: Any, tmp_path: Path) -> None:
    run = spool_run(tmp_path, "fast", [(s, {"perf/throughput": 120_000 + 800 * s,
                                            "perf/small": -0.00125 * s}) for s in range(40)])
    run.finish()
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server)
    for key in ("perf/throughput", "perf/small"):
        wait_chart(page, key)
        fit = page.evaluate("""(key) => {
          const u = window.trackmuxUI.state.charts.find(c => c.key === key).handle.plot;
          const ctx = document.createElement('canvas').getContext('2d');
          ctx.font = u.axes[1].font ? u.axes[1].font[0] : '12px sans-serif';
          const labels = u.axes[1]._values || [];
          const widest = Math.max(...labels.map(t => ctx.measureText(String(t)).width));
          const room = u.over.getBoundingClientRect().left
            - u.root.querySelector('.u-wrap').getBoundingClientRect().left;
          return {labels, widest, room};
        }""", key)
        # uPlot draws a label right of the axis' 10 px ticks and 5 px gap
        assert fit["labels"] and fit["widest"] + 15 <= fit["room"], fit
    assert problems == []


def test_a_run_keeps_its_colour_when_a_new_run_appears(browser: Any, server_for: Any,
                                                        tmp_path: Path) -> None:
    for name in ("a", "b"):
        spool_run(tmp_path, name, [(s, {"reward/mean": s}) for s in range(5)],
                  doctor=False).finish()
        time.sleep(1.1)  # runs are listed newest first: "b" is at the top
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server)
    colours = "() => Object.fromEntries([...document.querySelectorAll('#runs tbody tr')]" \
              ".map(tr => [[...tr.children[1].childNodes].filter(n => n.nodeType === 3)" \
              ".map(n => n.textContent).join('').trim(), " \
              "tr.querySelector('.dot').style.background]))"
    first = page.evaluate(colours)
    assert first["a"] != first["b"]
    spool_run(tmp_path, "c", [(s, {"reward/mean": s}) for s in range(5)], doctor=False).finish()
    page.wait_for_function("() => document.querySelectorAll('#runs tbody tr').length === 3",
                           timeout=15_000)
    after = page.evaluate(colours)  # "c" is now at the top of the list
    assert after["a"] == first["a"] and after["b"] == first["b"]
    assert after["c"] not in (after["a"], after["b"])
    assert problems == []


def test_every_chosen_run_shows_its_samples_and_media(browser: Any, server_for: Any,
                                                      tmp_path: Path) -> None:
    make_run(tmp_path, "failing", 30, nan_at=5, samples_at=(0, 20))  # the oldest run
    time.sleep(1.1)
    for name in ("healthy-0", "healthy-1"):
        make_run(tmp_path, name, 30, samples_at=(0, 20), doctor=False)
        time.sleep(1.1)
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server)
    names = {r["name"]: r["id"] for r in page.evaluate("() => window.trackmuxUI.state.runs")}
    page.wait_for_function("() => window.trackmuxUI.state.selected.length === 3")
    assert set(page.evaluate("() => window.trackmuxUI.state.selected")) == set(names.values())
    page.click("button[data-tab=samples]")
    for rid in names.values():
        page.wait_for_selector(f".sample-browser[data-run='{rid}'][data-ready='1'] .tms-card")
    # the run with findings comes first
    first = page.eval_on_selector(".run-column", "e => e.dataset.run")
    assert first == names["failing"]
    page.click("button[data-tab=media]")
    for rid in names.values():
        page.wait_for_selector(f".media[data-run='{rid}'][data-key='rollouts'] table td")
    assert problems == []


def test_empty_histograms_and_system_tabs_say_so(browser: Any, server_for: Any,
                                                 tmp_path: Path) -> None:
    spool_run(tmp_path, "plain", [(s, {"reward/mean": s}) for s in range(5)]).finish()
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server)
    page.click("button[data-tab=histograms]")
    page.wait_for_selector("#view .hint.empty", timeout=10_000)
    assert "no histograms" in page.locator("#view").text_content()
    page.click("button[data-tab=system]")
    page.wait_for_selector("#view .hint.empty", timeout=10_000)
    assert "no system metrics" in page.locator("#view").text_content()
    assert problems == []


def test_one_spike_does_not_squash_the_other_lines(browser: Any, server_for: Any,
                                                   tmp_path: Path) -> None:
    points = [(s, {"kl/divergence": 0.01 + 0.001 * s}) for s in range(60)]
    points[30] = (30, {"kl/divergence": 41.0})
    spool_run(tmp_path, "spiky", points).finish()
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server)
    wait_chart(page, "kl/divergence")
    scale = page.evaluate(f"() => ({CHART})('kl/divergence').handle.plot.scales.y")
    assert scale["max"] < 1, scale  # the range of the 59 other points, not of the spike
    assert page.get_attribute('.tm-chart[data-key="kl/divergence"]', "data-clipped") == "1"
    # the spike is marked at the top edge (a triangle in the run's colour)
    marked = page.evaluate("""() => {
      const u = window.trackmuxUI.state.charts[0].handle.plot;
      const X = Math.round(u.valToPos(30, 'x', true));
      const d = u.ctx.getImageData(X - 3, u.bbox.top, 7, 12 * devicePixelRatio).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4)
        if (d[i + 3] > 128 && Math.min(d[i], d[i + 1], d[i + 2]) < 180) n++;
      return n; }""")
    assert marked > 5
    page.select_option("#yscale", "log")
    page.wait_for_function(f"() => ({CHART})('kl/divergence').handle.plot.scales.y.distr === 3")
    page.select_option("#yscale", "linear")
    page.uncheck("#robust")  # the whole range on request
    page.wait_for_function(f"() => ({CHART})('kl/divergence').handle.plot.scales.y.max > 41")
    assert problems == []


def test_compare_path_has_a_legend_and_round_ticks(browser: Any, server_for: Any,
                                                   tmp_path: Path) -> None:
    for i, name in enumerate(("x1", "x2")):
        spool_run(tmp_path, name, [(s, {"kl/divergence": 0.0001 + 0.0000543 * s * (i + 1),
                                        "reward/mean": s / 40}) for s in range(40)],
                  doctor=False).finish()
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server)
    page.click("button[data-tab=compare]")
    page.wait_for_selector(".tm-path canvas")
    legend = page.eval_on_selector_all(".tm-path .tm-legend-item",
                                       "els => els.map(e => e.textContent.trim())")
    assert sorted(legend) == ["x1", "x2"]
    ticks = page.evaluate("() => window.trackmuxCharts.niceTicks(0.0001, 0.002418, 4)"
                          ".map(window.trackmuxCharts.tick)")
    assert ticks == ["0", "0.001", "0.002", "0.003"], ticks
    assert problems == []


def test_a_finding_leads_to_its_chart_and_its_samples(browser: Any, server_for: Any,
                                                      tmp_path: Path) -> None:
    run = trackmux.init(project="dash", name="broken", backends=[], dir=tmp_path)
    assert isinstance(run, trackmux.Run)
    for step in range(60):
        run.log({"reward/mean": float("nan") if step == 40 else step / 60}, step=step)
        if step in (0, 10, 20):
            log_batch(run, step)
        if step == 30:  # every response the same few words: degenerate text
            run.log_samples("rollouts", {"prompt": ["p"] * 8, "response": ["the the the the"] * 8,
                                         "reward": [0.0] * 8, "uid": ["g0"] * 4 + ["g1"] * 4},
                            step=30)
    assert run.finish(timeout=30).complete
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server)
    page.click("button[data-tab=findings]")
    page.wait_for_selector(".tm-finding-list a.key")
    assert page.locator(".tm-axis-tick").count() >= 3  # the timeline has a step axis
    page.click(".tm-finding-list a.key[data-rule=nonfinite][data-key='reward/mean']")
    page.wait_for_function(f"() => {{ const c = ({CHART})('reward/mean'); return c && c.handle"
                           " && c.handle.zoomed(); }", timeout=15_000)
    x = page.evaluate(f"() => ({CHART})('reward/mean').handle.plot.scales.x")
    assert x["min"] <= 40 <= x["max"] and x["max"] - x["min"] < 40, x
    assert page.locator("button[data-tab=charts].on").count() == 1
    # no evidence list from this doctor: the run's point at the onset is ringed instead
    page.click("button[data-tab=findings]")
    page.wait_for_selector(".tm-finding-list a.onset[data-rule=degenerate_text]")
    page.click(".tm-finding-list a.onset[data-rule=degenerate_text]")
    page.wait_for_selector(".panel.samples[data-focus='1'] .sample-browser[data-ready='1']",
                           timeout=15_000)
    assert page.locator(".panel.samples[data-focus='1'] .tms-steplabel").inner_text() == "step 30"
    assert page.locator("button[data-tab=samples].on").count() == 1
    assert problems == []


def test_evidence_points_are_ringed(browser: Any, server_for: Any, tmp_path: Path) -> None:
    make_run(tmp_path, "r", 40, nan_at=None)
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server)
    series_count(page, "reward/mean")
    rid = page.evaluate("() => window.trackmuxUI.state.runs[0].id")
    finding = {"rule": "spike", "severity": "warning", "step": 20, "keys": ["kl/divergence"],
               "message": "m", "evidence": [{"key": "kl/divergence", "step": 20, "value": 0.2},
                                            {"key": "kl/divergence", "step": 22, "value": 0.22}]}
    page.evaluate("(a) => window.trackmuxUI.openFinding(a.f, a.rid, null)",
                  {"f": finding, "rid": rid})
    page.wait_for_function(f"() => {{ const c = ({CHART})('kl/divergence'); return c && c.handle"
                           " && c.handle.evidence().length === 2; }", timeout=15_000)
    x = page.evaluate(f"() => ({CHART})('kl/divergence').handle.plot.scales.x")
    assert x["min"] <= 20 and x["max"] >= 22
    assert problems == []


def test_group_ids_that_name_object_members_are_plain_ids(browser: Any, server_for: Any,
                                                          tmp_path: Path) -> None:
    run = trackmux.init(project="dash", name="proto", backends=[], dir=tmp_path, doctor=False)
    assert isinstance(run, trackmux.Run)
    ids = ["__proto__", "constructor", "toString", "hasOwnProperty"]
    run.log({"reward/mean": 1.0}, step=0)
    run.log_samples("rollouts", {
        "prompt": [f"p-{g}" for g in ids for _ in range(2)],
        "response": ["r"] * 8, "reward": [0.5] * 8,
        "constructor": [1.0] * 8,  # a column named like a member, too
        "uid": [g for g in ids for _ in range(2)]}, step=0)
    run.finish()
    server = server_for(tmp_path)
    page, problems = open_ui(browser, server)
    page.click("button[data-tab=samples]")
    page.wait_for_selector(".sample-browser[data-ready='1'] .tms-card")
    groups = page.eval_on_selector_all(".tms-group", "els => els.map(e => e.dataset.group)")
    assert groups == ids
    assert page.locator(".tms-card").count() == 8
    page.fill(".tms-filter", "constructor == 1")  # the filter reads that column
    assert page.locator(".tms-card").count() == 8 and page.locator(".tms-error").count() == 0
    assert problems == []
