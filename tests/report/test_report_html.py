"""``trackmux report``: resolving runs, what the page holds, overlays, delivery state,
escaping, and the chart maths."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from report_support import DEMO_STEPS, DemoRun

import trackmux
from trackmux.cli.main import cli
from trackmux.core.spool.reader import SpoolReader
from trackmux.report import RunNotFound, build_report, resolve_run
from trackmux.report.charts import Series, line_chart, thin, ticks


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


# -- the demo's report --------------------------------------------------------------------------
def test_demo_report_shows_the_reward_rising(demo_run: DemoRun) -> None:
    html = (demo_run.run_dir / "report.html").read_text()
    (line,) = polyline_points(html, "reward/mean")
    assert len(line) == DEMO_STEPS
    xs = [x for x, _ in line]
    assert xs == sorted(xs)
    # SVG y grows downwards: a rising reward is a falling y.
    ys = [y for _, y in line]
    assert np.mean(ys[-10:]) < np.mean(ys[:10]) - 40


def test_demo_report_has_every_section(demo_run: DemoRun) -> None:
    html = (demo_run.run_dir / "report.html").read_text()
    keys = re.findall(r'<svg class="chart" data-key="([^"]+)"', html)
    assert {"reward/mean", "reward/std", "kl/divergence", "policy/loss", "policy/entropy",
            "generation/length", "throughput/samples_per_second"} <= set(keys)
    assert len(keys) == len(set(keys))
    # charts are grouped by prefix, in the order the trainer logged them
    groups = re.findall(r'<h3 id="metrics-([^"]+)">', html)
    assert groups[:5] == ["reward", "kl", "policy", "generation", "throughput"]
    assert html.count("<summary>step ") == len(range(0, DEMO_STEPS, 20)) + 1  # every table
    assert html.count('src="data:image/png;base64,') == len(range(0, DEMO_STEPS, 20)) + 1
    assert "k3 KL to the reference" in html  # image captions
    assert "algorithm.kl_coef" in html and "reverse-digits" in html  # config
    assert re.search(r"<td>console</td>.*?all delivered", html, re.S)
    assert re.search(r"<td>file</td>.*?all delivered", html, re.S)


def test_report_is_self_contained(demo_run: DemoRun) -> None:
    html = (demo_run.run_dir / "report.html").read_text()
    # the demo logs its rollouts to the samples ledger: the sample browser's inline script
    assert "<script src" not in html and "<link" not in html
    assert not re.search(r'(src|href)="(?!data:|#)', html)  # only data URIs and anchors
    assert "@import" not in html and "url(" not in html
    assert "default-src 'none'" in html


# -- several runs, delivery, escaping ---------------------------------------------------------
def test_several_runs_are_overlaid_and_config_differences_marked(tmp_path: Path) -> None:
    up = make_run(tmp_path, "up", {"reward/mean": [0.1, 0.5, 0.9], "only/up": [1.0, 2.0]},
                  config={"lr": 0.1, "seed": 1})
    down = make_run(tmp_path, "down", {"reward/mean": [0.9, 0.5, 0.1]},
                    config={"lr": 0.1, "seed": 2})
    out = build_report([up, down.name], tmp_path / "cmp.html", root=tmp_path)
    html = out.read_text()
    rising, falling = polyline_points(html, "reward/mean")
    assert [y for _, y in rising] == sorted((y for _, y in rising), reverse=True)
    assert [y for _, y in falling] == sorted(y for _, y in falling)
    assert re.findall(r'data-run="([^"]+)"', html)[:2] == ["up", "down"]
    assert len(polyline_points(html, "only/up")) == 1
    assert re.search(r'<tr class="diff"><td class="mono">seed</td>', html)
    assert re.search(r'<tr><td class="mono">lr</td>', html)


def test_runs_with_the_same_name_get_distinct_labels(tmp_path: Path) -> None:
    a = make_run(tmp_path, "same", {"x": [1.0, 2.0]})
    b = make_run(tmp_path, "same", {"x": [2.0, 1.0]})
    html = build_report([a, b], tmp_path / "r.html").read_text()
    labels = re.findall(r'data-run="([^"]+)"', html)
    assert labels == [f"same ({a.name})", f"same ({b.name})"]


def test_delivery_state_shows_what_each_backend_still_lacks(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "d", {"x": [1.0, 2.0, 3.0, 4.0]})
    reader = SpoolReader(run_dir)
    last = reader.last_seq()
    reader.ack("mlflow", last - 3, "abc123", {})
    reader.ack("tensorboard", last, None, {})
    reader.close()
    html = build_report([run_dir], tmp_path / "r.html").read_text()
    assert re.search(r"<td>mlflow</td>.*?3 pending.*?" + f"{last - 3} / {last}.*?abc123", html,
                     re.S)
    assert re.search(r"<td>tensorboard</td>.*?all delivered", html, re.S)
    assert f"trackmux sync {run_dir} --to mlflow" in html


def test_spool_only_run_says_so(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "s", {"x": [1.0]})
    html = build_report([run_dir], tmp_path / "r.html").read_text()
    assert "spool only: no backend was configured" in html


def test_user_text_is_escaped(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    run_dir = make_run(tmp_path, evil, {f"a/{evil}": [1.0, 2.0]}, config={"x": evil},
                       table=[[evil, "<b>r</b>", 1.0]], image_caption=evil)
    html = build_report([run_dir], tmp_path / "r.html").read_text()
    assert "<script" not in html and "<b>r</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_non_finite_values_break_the_line(tmp_path: Path) -> None:
    nan, inf = float("nan"), float("inf")
    run_dir = make_run(tmp_path, "n", {"m/gappy": [1.0, 2.0, nan, 3.0, 4.0, inf, 5.0],
                                       "m/empty": [nan, nan]})
    html = build_report([run_dir], tmp_path / "r.html").read_text()
    assert [len(p) for p in polyline_points(html, "m/gappy")] == [2, 2, 1]
    assert "2 non-finite values not drawn" in html
    assert polyline_points(html, "m/empty") == []
    assert re.search(r'data-key="m/empty".*?no finite values', html, re.S)


def test_report_command_writes_the_file(demo_run: DemoRun, tmp_path: Path) -> None:
    out = tmp_path / "sub" / "report.html"
    result = CliRunner().invoke(cli, ["report", demo_run.run_dir.name, "--dir",
                                      str(demo_run.root), "-o", str(out), "--title", "My runs"])
    assert result.exit_code == 0, result.output
    assert f"report written to {out}" in result.output
    assert "<title>My runs</title>" in out.read_text()


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
