"""The static report's axes write their values in one unit, that of the largest value, as
the interactive charts do: the demo's throughput axis read 25,000 50,000 75,000 100k 125k."""

from __future__ import annotations

import re

from trackmux.report.charts import Series, line_chart


def test_a_static_axis_writes_its_values_in_one_unit() -> None:
    svg = line_chart("throughput", [Series("r", "#000", [(s, 15_000.0 + 2_700.0 * s)
                                                         for s in range(40)])])
    labels = re.findall(r'<text class="tick" x="[\d.]+" y="[\d.]+" text-anchor="end">([^<]+)<',
                        svg)
    assert len(labels) >= 3 and "100k" in labels, labels
    assert all(t == "0" or t.endswith("k") for t in labels), labels
