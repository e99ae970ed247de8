"""The report's charts fill their cards, and an outlier's value stays inside its chart
(issue 43 item 10): a fixed 560 px chart sat in cards up to twice as wide, and the value of
a spike at the last step was written past the plot's right edge, cut."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from report_support import needs_chromium
from test_report_browser import drawn

import trackmux
from trackmux.report import build_report

pytestmark = needs_chromium


def test_charts_fill_their_cards_and_an_edge_outlier_label_is_inside(
        browser: Any, tmp_path: Path) -> None:
    run = trackmux.init(project="p", name="spiky", backends=[], dir=tmp_path, doctor=False)
    assert isinstance(run, trackmux.Run)
    for step in range(60):  # a spike at the very last step: its value is written at the edge
        run.log({"kl/divergence": 4100.0 if step == 59 else 0.01 + 0.001 * step,
                 "loss": 1 / (step + 1)}, step=step)
    assert run.finish(timeout=30).complete
    report = build_report([run.dir], tmp_path / "report.html")
    for width in (1400, 2000):
        page = browser.new_page(viewport={"width": width, "height": 1000})
        problems: list[str] = []

        def failed(error: Any, seen: list[str] = problems) -> None:
            seen.append(str(error))

        page.on("pageerror", failed)
        page.goto(report.as_uri())
        drawn(page)
        sizes = page.evaluate("""() => Object.keys(window.trackmuxExport.charts).map(k => {
          const u = window.trackmuxExport.charts[k].plot;
          const card = u.root.closest('.panel');
          return [k, u.width, card.clientWidth]; })""")
        for key, chart, card in sizes:
            assert card - 24 <= chart <= card, (width, key, chart, card)
        labels = page.evaluate(
            "() => window.trackmuxExport.charts['kl/divergence'].edgeLabels()")
        assert [label["text"] for label in labels] == ["4,100"], labels
        for label in labels:
            left, right = label["plot"]
            assert left <= label["left"] and label["right"] <= right, label
        assert problems == []
        page.close()


#: page function: how many pixels of the label ``a`` (an ``edgeLabels()`` entry) are inked
#: (not white, not a light grid line) inside the box it was given, on the chart of ``a.key``
LABEL_INK = """(a) => {
  const u = window.trackmuxExport.charts[a.key].plot;
  const d = u.ctx.getImageData(Math.round(a.left), Math.round(a.top),
                               Math.round(a.right - a.left), Math.round(a.bottom - a.top)).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4)
    if (d[i + 3] > 128 && Math.min(d[i], d[i + 1], d[i + 2]) < 180) n++;
  return n;
}"""


def test_an_outlier_label_is_written_in_its_own_box_beside_the_triangle(
        browser: Any, tmp_path: Path) -> None:
    """Seen in a screenshot of the demo's report: the value of a KL spike in mid-chart was
    written right-aligned at the start of its white box (the canvas kept uPlot's last text
    alignment), so it overlapped the triangle and the spike while its box stayed empty."""
    run = trackmux.init(project="p", name="spiky", backends=[], dir=tmp_path, doctor=False)
    assert isinstance(run, trackmux.Run)
    for step in range(60):  # one spike in the middle: room on both sides of its triangle
        run.log({"kl/divergence": 4100.0 if step == 30 else 0.01 + 0.001 * step}, step=step)
    assert run.finish(timeout=30).complete
    report = build_report([run.dir], tmp_path / "report.html")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(report.as_uri())
        drawn(page)
        [label] = page.evaluate(
            "() => window.trackmuxExport.charts['kl/divergence'].edgeLabels()")
        assert label["text"] == "4,100"
        spike_x = page.evaluate(
            "() => window.trackmuxExport.charts['kl/divergence'].plot.valToPos(30, 'x', true)")
        assert label["left"] > spike_x  # right of the triangle, where there is room
        # the digits are inside the label's box: tens of inked pixels, none when misplaced
        assert page.evaluate(LABEL_INK, {**label, "key": "kl/divergence"}) > 20
    finally:
        page.close()
