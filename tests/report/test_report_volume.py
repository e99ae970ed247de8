"""The report with RL-native data: histograms over steps, large tables capped on the page,
artifacts listed (the data the page draws; test_report_browser.py draws it)."""

from __future__ import annotations

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


def test_a_large_table_is_capped_on_the_page_and_the_report_stays_one_file(
        tmp_path: Path) -> None:
    run = trackmux.init(project="p", name="big", backends=[], dir=tmp_path / "spool")
    total = 200_000
    rows = [[f"prompt-{i:06d}", f"response-{i:06d}", i] for i in range(total)]
    for step in range(2):
        run.log_table("rollouts", ["prompt", "response", "reward"], rows, step=step)
    run.log_table("small", ["a"], [["x"], ["y"]], step=0)
    run.finish(timeout=60)
    out = tmp_path / "out"
    for static in (False, True):
        report = build_report([str(run.dir)], out / f"r{int(static)}.html", static=static)
        html = report.read_text()
        assert "prompt-000000" in html and f"prompt-{MAX_TABLE_ROWS:06d}" not in html
        # the page says what it left out and where every row is, as the console does
        assert f"first {MAX_TABLE_ROWS:,} of {total:,} rows" in html
        assert "trackmux show" in html
        assert len(html) < 2_000_000  # bounded by the cap, not by 2 x 200k rows
    assert sorted(p.name for p in out.iterdir()) == ["r0.html", "r1.html"]  # no side pages
    (tables,) = embedded((out / "r0.html").read_text())["tables"].values()
    table = tables["rollouts"][-1]
    assert len(table["rows"]) == MAX_TABLE_ROWS and table["total"] == total
    assert tables["small"][0]["note"] is None  # a table within the cap says nothing


def test_a_table_s_own_max_rows_caps_the_report_too(tmp_path: Path) -> None:
    run = trackmux.init(project="p", name="capped", backends=[], dir=tmp_path / "spool")
    run.log_table("t", ["v"], [[i] for i in range(50)], step=0, max_rows=7)
    run.finish()
    (tables,) = embedded(build_report([str(run.dir)], tmp_path / "r.html").read_text()
                         )["tables"].values()
    assert len(tables["t"][0]["rows"]) == 7 and "first 7 of 50 rows" in tables["t"][0]["note"]


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
