"""The CLI over real spools: runs, show, sync (states, counts, exit statuses)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
from click.testing import CliRunner

import trackmux
from spool_support import wait_quiet
from trackmux.cli.main import cli


def make_run(root: Path, steps: int = 30, backends: list[str] | None = None) -> trackmux.Run:
    run = trackmux.init(project="cli", name="exp", backends=backends or [], dir=root,
                        config={"lr": 0.1})
    assert isinstance(run, trackmux.Run)
    for step in range(steps):
        run.log({"loss": 1.0 / (step + 1), "reward/mean": step / 10}, step=step)
    run.log_table("val/generations", ["input", "output"], [["a", "b"]], step=steps - 1)
    return run


def _coverage_notes(run_dir: Path) -> int:
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run_dir)
    try:
        return sum(1 for e in reader.events_of_kind("text") if e.key == "doctor/coverage")
    finally:
        reader.close()


def test_runs_shows_finished_running_and_crashed(tmp_path: Path) -> None:
    finished = make_run(tmp_path)
    finished.finish()
    wait_quiet(finished)  # its delivery process has exited: its count below stays put
    running = make_run(tmp_path, steps=3)
    running._spool.flush()
    code = f"""
import os, trackmux
run = trackmux.init(project="cli", name="killed", backends=[], dir={str(tmp_path)!r})
run.log({{"x": 1.0}}, step=0)
run._spool.flush()
os._exit(9)
"""
    subprocess.run([sys.executable, "-c", code], check=False, timeout=60)
    result = CliRunner().invoke(cli, ["runs", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = {line.split()[0].split("/")[1]: line for line in result.output.splitlines()
             if line.startswith("cli/")}
    # 32 logged (config, 30 steps, a table) and the doctor's coverage notes of the run
    assert f"finished  {32 + _coverage_notes(finished.dir)} events" in lines[finished.id]
    assert "running" in lines[running.id]
    crashed = [line for line in lines.values() if "name=killed" in line]
    assert crashed and " crashed " in crashed[0]
    running.finish()


def test_show_lists_metrics_tables_and_config(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    run.finish()
    result = CliRunner().invoke(cli, ["show", run.id, "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "loss: last 0.0333333 at step 29; steps 0..29, 30 points" in result.output
    assert "val/generations: 1 at steps 29..29" in result.output
    assert '"lr": 0.1' in result.output


def test_sync_to_a_new_backend_then_nothing_left(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    run.finish()
    out = tmp_path / "out.jsonl"
    first = CliRunner().invoke(cli, ["sync", str(run.dir), "--to", "file",
                                     "-o", f"file.path={out}", "--no-progress"])
    assert first.exit_code == 0, first.output
    lines = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert [x["step"] for x in lines] == list(range(30))
    second = CliRunner().invoke(cli, ["sync", str(run.dir), "--to", "file",
                                      "-o", f"file.path={out}", "--no-progress"])
    assert second.exit_code == 0 and "nothing to do" in second.output
    assert len(out.read_bytes().splitlines()) == 30
    runs = CliRunner().invoke(cli, ["runs", str(tmp_path)])
    assert "file: delivered" in runs.output


def test_sync_exits_nonzero_while_events_are_left(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    run.finish()
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the backend wants a directory")
    result = CliRunner().invoke(cli, ["sync", str(run.dir), "--to", "file", "--timeout", "2",
                                      "-o", f"file.path={blocked / 'x.jsonl'}",
                                      "--no-progress"])
    assert result.exit_code == 1, result.output
    assert "events left" in result.output


def test_sync_of_unknown_run_or_backend_is_a_usage_error(tmp_path: Path) -> None:
    run = make_run(tmp_path, steps=2)
    run.finish()
    missing = CliRunner().invoke(cli, ["sync", "nope", "--dir", str(tmp_path)])
    assert missing.exit_code == 2 and "no run 'nope'" in missing.output
    bad = CliRunner().invoke(cli, ["sync", str(run.dir), "--to", "nosuchbackend"])
    assert bad.exit_code == 2 and "unknown backend 'nosuchbackend'" in bad.output
    assert os.path.isdir(run.dir)


def test_show_key_prints_the_series_and_names_close_keys(tmp_path: Path) -> None:
    """Issue 33.14: ``show --key K`` gives every point (step, value, time), not the last."""
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    for step in range(0, 50, 5):
        run.log({"reward/mean": step / 100, "kl": 0.1}, step=step)
    run.log({"reward/mean": float("nan")}, step=50)
    run.log_table("val/table", ["a"], [[1]], step=3)
    run.finish(timeout=30)
    result = CliRunner().invoke(cli, ["show", run.id, "--dir", str(tmp_path),
                                      "--key", "reward/mean", "--json"])
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.output)
    assert data["key"] == "reward/mean" and data["run"] == run.id
    assert [(p["step"], p["value"]) for p in data["points"]] == [
        *((s, s / 100) for s in range(0, 50, 5)), (50, "nan")]
    assert all(isinstance(p["time"], float) for p in data["points"])
    text = CliRunner().invoke(cli, ["show", str(run.dir), "-k", "kl"])
    assert text.exit_code == 0 and "kl in run" in text.output and "10 points" in text.output
    assert len(text.output.splitlines()) == 12  # header, column names, 10 points
    wrong = CliRunner().invoke(cli, ["show", str(run.dir), "--key", "reward/maen"])
    assert wrong.exit_code == 2 and "no metric 'reward/maen'" in wrong.output
    assert "closest metric keys: reward/mean" in wrong.output
    table = CliRunner().invoke(cli, ["show", str(run.dir), "--key", "val/table"])
    assert table.exit_code == 2 and "is a table key" in table.output
    bare = CliRunner().invoke(cli, ["show", str(run.dir), "--json"])
    assert bare.exit_code == 2 and "give --key K" in bare.output
