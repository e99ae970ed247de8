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
