"""Issue 18, the first hour: sync says what it did and where, errors say what is wrong,
small CLI rough edges, the demo's heatmaps share one colour scale per key."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import trackmux
from trackmux.cli.main import cli
from trackmux.core.backends.registry import get_registry


def _run(root: Path, steps: int = 12) -> trackmux.Run:
    run = trackmux.init(project="cli", name="exp", backends=[], dir=root)
    assert isinstance(run, trackmux.Run)
    for step in range(steps):
        run.log({"loss": float(step)}, step=step)
    run.finish()
    return run


def test_sync_says_what_it_delivered_now_and_where_then_that_nothing_was_left(
        tmp_path: Path) -> None:
    run = _run(tmp_path / "sp")
    out = tmp_path / "out.jsonl"
    args = ["sync", str(run.dir), "--to", "file", "-o", f"file.path={out}", "--no-progress"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    assert f"delivered 12 events now to {out}; complete (12 of 12)" in first.output
    second = CliRunner().invoke(cli, args)
    assert second.exit_code == 0, second.output
    assert "nothing to do: all 12 events were already delivered" in second.output
    assert "delivered 12" not in second.output


def test_runs_of_a_missing_directory_is_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["runs", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "no directory" in result.output
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(cli, ["runs", str(empty)])
    assert result.exit_code == 0 and "no runs under" in result.output


def test_show_counts_one_key_in_the_singular(tmp_path: Path) -> None:
    run = _run(tmp_path, steps=2)
    result = CliRunner().invoke(cli, ["show", str(run.dir)])
    assert result.exit_code == 0, result.output
    assert "metrics (1 key):" in result.output and "1 keys" not in result.output
    assert "tables (0 keys):" in result.output


def test_a_backend_whose_library_is_missing_is_not_listed_as_ready() -> None:
    registry = get_registry()
    missing = [name for name, spec in registry.backends.items() if spec.missing_modules()]
    if not missing:
        pytest.skip("every backend's library is installed here")
    with pytest.raises(trackmux.UnknownBackendError) as info:
        registry.backend(missing[0])
    message = str(info.value)
    ready = message.split("ready to use:", 1)[1]
    assert missing[0] not in ready.split(", ")
    assert "is registered, but the library it needs" in message
    assert "pip install " in message and "Installed backends" not in message


def test_the_demo_heatmaps_share_one_colour_scale() -> None:
    from trackmux.demo import heatmap
    from trackmux.demo.loop import KL_HEATMAP_SCALE

    mask = np.ones((2, 3))
    low = np.full((2, 3), 0.5)
    high = np.full((2, 3), 4.0)
    high[0, 0] = 0.5
    labels, tokens = ["a", "b"], [["x"] * 3, ["y"] * 3]
    low_image = np.asarray(heatmap.render(low, mask, labels, tokens, scale=KL_HEATMAP_SCALE))
    high_image = np.asarray(heatmap.render(high, mask, labels, tokens, scale=KL_HEATMAP_SCALE))
    cell = (heatmap.HEADER + 3, heatmap.MARGIN + heatmap.LABEL_W + 3)
    # the same KL value has the same colour in both steps' images
    assert (low_image[cell] == high_image[cell]).all()
    # each image scaled to its own maximum would paint 0.5 as the top colour in `low`
    own = np.asarray(heatmap.render(low, mask, labels, tokens))
    assert not (own[cell] == low_image[cell]).all()
    with pytest.raises(ValueError, match="scale"):
        heatmap.render(low, mask, labels, tokens, scale=0)
