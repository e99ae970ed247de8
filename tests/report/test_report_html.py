"""``trackmux report``: resolving runs, the data the page draws (the UI's payloads embedded
in it), overlays, delivery state, escaping, secrets, bounded size, a damaged spool, and
the ``--static`` page's chart maths. What Chromium draws from it: test_report_browser.py."""

from __future__ import annotations

import base64
import hashlib
import itertools
import math
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from report_support import DEMO_STEPS, DemoRun, by_label, embedded

import trackmux
from trackmux.cli.main import cli
from trackmux.core.spool.reader import SpoolReader
from trackmux.report import RunNotFound, build_report, resolve_run
from trackmux.report.charts import Series, line_chart, thin, ticks
from trackmux.ui.export import ASSETS, WIDTH


def make_run(root: Path, name: str, values: dict[str, list[float]], *, project: str = "proj",
             config: dict[str, Any] | None = None, table: list[list[Any]] | None = None,
             image_caption: str | None = None) -> Path:
    run = trackmux.init(project=project, name=name, backends=[], config=config, dir=root)
    assert isinstance(run, trackmux.Run)
    steps = max(len(v) for v in values.values())
    for step in range(steps):
        run.log({k: v[step] for k, v in values.items() if step < len(v)}, step=step)
    if table is not None:
        run.log_table("samples", ["prompt", "response", "reward"], table, step=steps - 1)
    if image_caption is not None:
        run.log_image("pictures/grad", np.linspace(0, 1, 32 * 48).reshape(32, 48),
                      step=steps - 1, caption=image_caption)
    run.finish()
    return run.dir


def polyline_points(html: str, key: str) -> list[list[tuple[float, float]]]:
    """Every polyline's points in the chart for ``key`` (one list per polyline)."""
    match = re.search(r'<svg class="chart" data-key="' + re.escape(key) + r'".*?</svg>', html,
                      re.S)
    assert match, f"no chart for {key}"
    out = []
    for points in re.findall(r'<polyline[^>]*points="([^"]*)"', match.group(0)):
        out.append([tuple(map(float, p.split(","))) for p in points.split()])
    return out  # type: ignore[return-value]


# -- resolving RUN ---------------------------------------------------------------------------
def test_run_resolves_from_dir_spool_file_id_and_project_id(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    run_dir = make_run(tmp_path, "a", {"x": [1.0]})
    run_id = run_dir.name
    assert resolve_run(run_dir) == run_dir
    assert resolve_run(run_dir / "spool.db") == run_dir
    assert resolve_run(run_id, tmp_path) == run_dir
    assert resolve_run(f"proj/{run_id}", tmp_path) == run_dir
    monkeypatch.setenv("TRACKMUX_DIR", str(tmp_path))
    assert resolve_run(run_id) == run_dir


def test_unknown_run_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RunNotFound, match=r"no run 'nope'.*TRACKMUX_DIR"):
        resolve_run("nope", tmp_path)
    result = CliRunner().invoke(cli, ["report", "nope", "--dir", str(tmp_path), "-o",
                                      str(tmp_path / "r.html")])
    assert result.exit_code == 2
    assert "no run 'nope'" in result.output
    assert not (tmp_path / "r.html").exists()


def test_same_id_in_two_projects_is_ambiguous(tmp_path: Path) -> None:
    first = make_run(tmp_path, "a", {"x": [1.0]}, project="p1")
    twin = tmp_path / "p2" / first.name
    twin.mkdir(parents=True)
    (twin / "spool.db").write_bytes((first / "spool.db").read_bytes())
    with pytest.raises(RunNotFound, match="several projects"):
        resolve_run(first.name, tmp_path)


# -- the demo's report: what the charts and sections are drawn from ---------------------------
def test_demo_report_shows_the_reward_rising(demo_run: DemoRun) -> None:
    data = embedded((demo_run.run_dir / "report.html").read_text())
    chart = data["series"]["reward/mean"]
    assert chart["exact"] and chart["x"] == list(range(DEMO_STEPS))  # every step, exact
    (run,) = chart["runs"]
    assert len(run["y"]) == DEMO_STEPS and run["nonfinite"] == 0
    assert np.mean(run["y"][-10:]) > np.mean(run["y"][:10]) + 0.2


def test_demo_report_has_every_section(demo_run: DemoRun) -> None:
    data = embedded((demo_run.run_dir / "report.html").read_text())
    keys = [k for group in data["groups"].values() for k in group]
    assert {"reward/mean", "reward/std", "kl/divergence", "policy/loss", "policy/entropy",
            "generation/length", "throughput/samples_per_second"} <= set(keys)
    assert len(keys) == len(set(keys)) and set(keys) == set(data["series"])
    # charts are grouped by prefix, in the order the trainer logged them
    assert list(data["groups"])[:5] == ["reward", "kl", "policy", "generation", "throughput"]
    (rid,) = [r["id"] for r in data["runs"]]
    tables = [t for items in data["tables"][rid].values() for t in items]
    assert len(tables) == len(range(0, DEMO_STEPS, 20)) + 1  # every table
    images = [i for items in data["images"][rid].values() for i in items]
    assert len(images) == len(range(0, DEMO_STEPS, 20)) + 1
    assert all(i["src"].startswith("data:image/png;base64,") for i in images)
    assert any("k3 KL to the reference" in (i["caption"] or "") for i in images)
    config = {row["key"]: row["values"] for row in data["compare"]["config"]}
    assert "algorithm.kl_coef" in config and "reverse-digits" in str(config)
    delivery = {d["backend"]: d["state"] for d in data["details"][rid]["delivery"]}
    assert delivery == {"console": "all delivered", "file": "all delivered"}
    assert data["findings"] is not None and rid in data["findings"]  # the doctor's section


def test_report_is_self_contained(demo_run: DemoRun) -> None:
    html = (demo_run.run_dir / "report.html").read_text()
    assert not re.search(r'(src|href)="(?!data:|#)', html)  # only data URIs and anchors
    assert "<script src" not in html and "<link" not in html
    assert "@import" not in html and "url(" not in html.replace("url(data:", "")
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert policy and "default-src 'none'" in policy.group(1)
    assert "unsafe-inline" not in policy.group(1).split("script-src")[1]
    # every script that runs is allowed by its hash, and no other
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    allowed = re.findall(r"'sha256-([^']+)'", policy.group(1))
    assert len(scripts) == len(allowed) >= 3
    assert {base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()
            for s in scripts} == set(allowed)
    assert "Copyright (c) 2022 Leon Sorokin" in html  # uPlot's MIT license travels with it


# -- several runs, delivery, escaping ---------------------------------------------------------
def test_several_runs_are_overlaid_and_config_differences_marked(tmp_path: Path) -> None:
    up = make_run(tmp_path, "up", {"reward/mean": [0.1, 0.5, 0.9], "only/up": [1.0, 2.0]},
                  config={"lr": 0.1, "seed": 1})
    down = make_run(tmp_path, "down", {"reward/mean": [0.9, 0.5, 0.1]},
                    config={"lr": 0.1, "seed": 2})
    out = build_report([up, down.name], tmp_path / "cmp.html", root=tmp_path)
    data = embedded(out.read_text())
    assert [r["label"] for r in data["runs"]] == ["up", "down"]  # argument order
    ids = by_label(data)
    chart = {r["id"]: r["y"] for r in data["series"]["reward/mean"]["runs"]}
    assert chart[ids["up"]] == [0.1, 0.5, 0.9] and chart[ids["down"]] == [0.9, 0.5, 0.1]
    drawn = [r["id"] for r in data["series"]["only/up"]["runs"]
             if any(v is not None for v in r["y"])]
    assert drawn == [ids["up"]]
    differs = {row["key"]: row["differs"] for row in data["compare"]["config"]}
    assert differs["seed"] is True and differs["lr"] is False


def test_runs_with_the_same_name_get_distinct_labels(tmp_path: Path) -> None:
    a = make_run(tmp_path, "same", {"x": [1.0, 2.0]})
    b = make_run(tmp_path, "same", {"x": [2.0, 1.0]})
    data = embedded(build_report([a, b], tmp_path / "r.html").read_text())
    assert [r["label"] for r in data["runs"]] == [f"same ({a.name})", f"same ({b.name})"]


def test_delivery_state_shows_what_each_backend_still_lacks(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "d", {"x": [1.0, 2.0, 3.0, 4.0]})
    reader = SpoolReader(run_dir)
    last = reader.last_seq()
    reader.ack("mlflow", last - 3, "abc123", {})
    reader.ack("tensorboard", last, None, {})
    reader.close()
    data = embedded(build_report([run_dir], tmp_path / "r.html").read_text())
    (details,) = data["details"].values()
    rows = {d["backend"]: d for d in details["delivery"]}
    assert rows["mlflow"]["state"] == "3 pending" and rows["mlflow"]["remote_id"] == "abc123"
    assert (rows["mlflow"]["acked"], rows["mlflow"]["last"]) == (last - 3, last)
    assert rows["tensorboard"]["state"] == "all delivered"
    assert details["sync"] == f"trackmux sync {run_dir} --to mlflow"


def test_spool_only_run_says_so(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "s", {"x": [1.0]})
    data = embedded(build_report([run_dir], tmp_path / "r.html").read_text())
    (details,) = data["details"].values()
    assert details["delivery"] == [] and details["sync"] is None
    assert "spool only: no backend was configured" in (ASSETS / "export.js").read_text()


def test_user_text_is_escaped(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    run_dir = make_run(tmp_path, evil, {f"a/{evil}": [1.0, 2.0]}, config={"x": evil},
                       table=[[evil, "<b>r</b>", 1.0]], image_caption=evil)
    html = build_report([run_dir], tmp_path / "r.html").read_text()
    assert "alert(1)" in html  # the text is there ...
    assert "<script>alert" not in html and "<b>r</b>" not in html  # ... never as markup
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the title, escaped
    data = embedded(html)
    assert f"a/{evil}" in data["series"]  # the JSON decodes back to the exact text
    (tables,) = data["tables"].values()
    assert tables["samples"][0]["rows"][0][:2] == [evil, "<b>r</b>"]


def test_secrets_in_the_config_are_not_in_the_report(tmp_path: Path) -> None:
    secret = "sk-live-0123456789abcdef0123456789abcdef"
    run_dir = make_run(tmp_path, "s", {"x": [1.0]},
                       config={"wandb": {"api_key": secret}, "lr": 0.1})
    html = build_report([run_dir], tmp_path / "r.html").read_text()
    assert secret not in html
    config = {row["key"]: row["values"] for row in embedded(html)["compare"]["config"]}
    assert config["wandb.api_key"] == ["***REDACTED***"] and config["lr"] == [0.1]


def test_non_finite_values_break_the_line(tmp_path: Path) -> None:
    nan, inf = float("nan"), float("inf")
    run_dir = make_run(tmp_path, "n", {"m/gappy": [1.0, 2.0, nan, 3.0, 4.0, inf, 5.0],
                                       "m/empty": [nan, nan]})
    data = embedded(build_report([run_dir], tmp_path / "r.html").read_text())
    (gappy,) = data["series"]["m/gappy"]["runs"]
    assert gappy["y"] == [1.0, 2.0, None, 3.0, 4.0, None, 5.0] and gappy["nonfinite"] == 2
    (empty,) = data["series"]["m/empty"]["runs"]
    assert empty["y"] == [None, None] and empty["nonfinite"] == 2


def test_a_long_run_is_downsampled_and_the_file_stays_small(tmp_path: Path) -> None:
    steps = 30_000
    values = [math.sin(i / 300.0) for i in range(steps)]
    values[12_345] = 9.0  # one spike: min/max buckets keep it
    run_dir = make_run(tmp_path, "long", {"m/a": values, "m/b": values[::-1],
                                          "m/c": values})
    out = build_report([run_dir], tmp_path / "r.html")
    data = embedded(out.read_text())
    chart = data["series"]["m/a"]
    assert not chart["exact"] and len(chart["x"]) <= 2 * WIDTH
    (run,) = chart["runs"]
    assert max(v for v in run["y"] if v is not None) == 9.0
    assert min(v for v in run["y"] if v is not None) == pytest.approx(-1.0, abs=1e-4)
    assert out.stat().st_size < 400_000  # 90,000 points in, a bounded page out


def test_a_damaged_spool_is_reported_not_fatal(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "hurt", {"x": [float(i) for i in range(20)]})
    with sqlite3.connect(run_dir / "spool.db") as db:  # flip bytes of one event's body
        db.execute("UPDATE events SET body = X'00ff00ff' WHERE seq = "
                   "(SELECT seq FROM events WHERE kind = 'metrics' LIMIT 1 OFFSET 5)")
    data = embedded(build_report([run_dir], tmp_path / "r.html").read_text())
    (details,) = data["details"].values()
    assert any("damaged spool" in p and "checksum" in p for p in details["problems"])
    assert len(data["series"]["x"]["x"]) == 19  # the rest of the run arrives


def test_report_command_writes_the_file(demo_run: DemoRun, tmp_path: Path) -> None:
    out = tmp_path / "sub" / "report.html"
    result = CliRunner().invoke(cli, ["report", demo_run.run_dir.name, "--dir",
                                      str(demo_run.root), "-o", str(out), "--title", "My runs"])
    assert result.exit_code == 0, result.output
    assert f"report written to {out}" in result.output
    assert "<title>My runs</title>" in out.read_text()


# -- --static: the script-free page --------------------------------------------------------------
def test_static_report_has_no_script_and_draws_svg(demo_run: DemoRun, tmp_path: Path) -> None:
    out = tmp_path / "static.html"
    result = CliRunner().invoke(cli, ["report", str(demo_run.run_dir), "--static", "-o",
                                      str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    (line,) = polyline_points(html, "reward/mean")
    assert len(line) == DEMO_STEPS
    ys = [y for _, y in line]  # SVG y grows downwards: a rising reward is a falling y
    assert np.mean(ys[-10:]) < np.mean(ys[:10]) - 40
    # no chart script: the only one is the sample browser's (the demo logs its rollouts to
    # the samples ledger), allowed by its hash alone
    assert "<script src" not in html and "default-src 'none'" in html
    assert len(re.findall(r"<script>", html)) == 1 and "sha256-" in html
    assert not re.search(r'(src|href)="(?!data:|#)', html)


def test_without_numpy_the_report_names_static(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = make_run(tmp_path, "a", {"x": [1.0]})
    monkeypatch.setitem(sys.modules, "trackmux.ui.export", None)  # as if numpy were missing
    result = CliRunner().invoke(cli, ["report", str(run_dir), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "needs numpy" in result.output
    assert "--static" in result.output and not (tmp_path / "r.html").exists()
    assert CliRunner().invoke(cli, ["report", str(run_dir), "--static", "-o",
                                    str(tmp_path / "r.html")]).exit_code == 0


def test_static_and_interactive_exclude_each_other(demo_run: DemoRun, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["report", str(demo_run.run_dir), "--static",
                                      "--interactive", "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "exclude each other" in result.output


# -- chart maths ----------------------------------------------------------------------------------
@given(st.floats(-1e9, 1e9), st.floats(-1e9, 1e9))
def test_ticks_cover_the_range_with_round_even_steps(lo: float, hi: float) -> None:
    values = ticks(lo, hi, 5)
    assert values[0] <= min(lo, hi) + 1e-9 * max(1.0, abs(lo), abs(hi))
    assert values[-1] >= max(lo, hi) - 1e-9 * max(1.0, abs(lo), abs(hi))
    assert 2 <= len(values) <= 12
    gaps = [b - a for a, b in itertools.pairwise(values)]
    assert all(g > 0 for g in gaps)
    assert max(gaps) - min(gaps) <= 1e-6 * max(gaps)
    mantissa = gaps[0] / 10 ** math.floor(math.log10(gaps[0]))
    assert any(abs(mantissa - m) < 1e-6 for m in (1, 2, 2.5, 5, 10))


@pytest.mark.parametrize("lo,hi", [(5e-324, 1e-323), (0.0, 0.0), (1.0, 1.0),
                                   (-1e308, 1e308), (1e-300, 1.0000001e-300), (-3.0, -3.0)])
def test_ticks_survive_extreme_ranges(lo: float, hi: float) -> None:
    values = ticks(lo, hi)
    assert values[0] <= lo and values[-1] >= hi and len(values) >= 2
    assert all(math.isfinite(v) for v in values)


def test_thinning_keeps_extremes_and_ends() -> None:
    points = [(i, math.sin(i / 50.0)) for i in range(20_000)]
    points[12_345] = (12_345, 9.0)
    kept = thin(points, 400)
    assert len(kept) <= 500
    assert kept[0] == points[0] and kept[-1] == points[-1]
    assert (12_345, 9.0) in kept
    assert min(v for _, v in kept) == min(v for _, v in points)


def test_a_single_point_still_draws() -> None:
    svg = line_chart("one", [Series("r", "#000", [(5, 0.25)])])
    assert '<polyline' in svg and '<circle class="last"' in svg and "0.25" in svg


def test_large_tick_labels_fit_the_static_chart_margin() -> None:
    svg = line_chart("perf/throughput", [Series("r", "#000", [(s, 120_000.0 + 800 * s)
                                                               for s in range(40)])])
    labels = re.findall(r'<text class="tick" x="[\d.]+" y="[\d.]+" text-anchor="end">([^<]+)<', svg)
    assert labels and all(len(t) <= 5 for t in labels), labels  # 125k, not 125,000
    assert "125k" in labels or "130k" in labels


def test_a_failing_doctor_is_a_line_not_a_failed_report(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from trackmux.ui import sources

    def broken(run_dir: Path) -> list[dict[str, Any]]:
        raise RuntimeError("rules file unreadable")

    monkeypatch.setattr(sources, "load_findings", broken)
    run_dir = make_run(tmp_path, "a", {"x": [1.0, 2.0]})
    data = embedded(build_report([run_dir], tmp_path / "r.html").read_text())
    ((finding,),) = data["findings"].values()
    assert finding["rule"] == "doctor" and "rules file unreadable" in finding["message"]
    assert data["series"]["x"]["runs"][0]["y"] == [1.0, 2.0]
