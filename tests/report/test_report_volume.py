"""The report with RL-native data: histograms over steps, large tables paged beside it,
artifacts listed (the data the page draws; test_report_browser.py draws it)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from report_support import embedded

import trackmux
from trackmux.report import build_report
from trackmux.report.sections import MAX_TABLE_ROWS


def test_histograms_are_drawn_with_their_counts(tmp_path: Path) -> None:
    run = trackmux.init(project="p", name="hist", backends=[], dir=tmp_path / "spool")
    rng = np.random.default_rng(0)
    for step in range(3):
        values = rng.normal(step, 1.0, 5000)
        values[:2] = np.nan
        run.log_histogram("reward/dist", values, step=step, bins=16)
    run.finish()
    data = embedded(build_report([str(run.dir)], tmp_path / "r.html").read_text())
    (hists,) = data["histograms"].values()
    items = hists["reward/dist"]  # drawn over steps by charts.js histogramChart
    assert [h["step"] for h in items] == [0, 1, 2]
    for h in items:
        assert len(h["counts"]) == 16 and len(h["edges"]) == 17
        assert sum(h["counts"]) == 4998 and h["nonfinite"] == 2
    assert items[2]["edges"][0] > items[0]["edges"][0]  # the distribution moved up


def test_large_table_is_paged_not_embedded_whole(tmp_path: Path) -> None:
    run = trackmux.init(project="p", name="big", backends=[], dir=tmp_path / "spool")
    rows = [[f"prompt-{i:05d}", f"response-{i:05d}", i] for i in range(1050)]
    run.log_table("rollouts", ["prompt", "response", "reward"], rows, step=0)
    run.finish()
    report = build_report([str(run.dir)], tmp_path / "r.html")
    html = report.read_text()
    assert "prompt-00000" in html and f"prompt-{MAX_TABLE_ROWS:05d}" not in html
    pages = sorted((tmp_path / "r_tables").glob("*.html"))
    assert len(pages) == math.ceil(1050 / MAX_TABLE_ROWS) - 1
    (tables,) = embedded(html)["tables"].values()
    (table,) = tables["rollouts"]
    assert len(table["rows"]) == MAX_TABLE_ROWS and table["total"] == 1050
    assert table["next"] is not None and table["next"].startswith("r_tables/")
    seen = set(re.findall(r"prompt-(\d{5})", html))
    page = tmp_path / table["next"]
    while True:  # follow the next links to the end: every row exactly once
        text = page.read_text()
        found = set(re.findall(r"prompt-(\d{5})", text))
        assert not found & seen
        seen |= found
        nxt = re.search(r'<a href="([^"]+)">next →', text)
        if nxt is None:
            break
        page = page.parent / nxt.group(1)
    assert seen == {f"{i:05d}" for i in range(1050)}
    assert 'href="../r.html#tables"' in text


def test_artifacts_are_listed_and_show_names_every_new_kind(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from trackmux.cli.main import cli

    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"\0" * 4096)
    (folder / "config.json").write_text("{}")
    run = trackmux.init(project="p", name="art", backends=[], dir=tmp_path / "spool")
    run.log({"loss": 1.0}, step=3)
    run.log_artifact(folder, name="ckpt-3", type="model", copy_max_bytes=100)
    run.log_histogram("reward/dist", [0.1, 0.2, 0.3])
    run.finish()
    data = embedded(build_report([str(run.dir)], tmp_path / "r.html").read_text())
    (details,) = data["details"].values()
    (artifact,) = details["artifacts"]
    assert (artifact["name"], artifact["type"], artifact["step"]) == ("ckpt-3", "model", 3)
    kept = {f["path"]: (f["kept"], f["size"]) for f in artifact["files"]}
    assert kept == {"model.bin": ("referenced", 4096), "config.json": ("copied", 2)}
    shown = CliRunner().invoke(cli, ["show", str(run.dir)])
    assert "histograms (1 key):" in shown.output and "reward/dist: 1 at steps 3..3" in shown.output
    assert "artifacts (1 key):" in shown.output and "ckpt-3: 1 at steps 3..3" in shown.output
