"""wandb offline run folders written by real wandb (offline) in a child process, imported
through wandb's own reader: history, config, summary, tables, images, histograms, once;
a resumed run's folders as one run; damage named; the API path with a stand-in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("wandb")

from importhelp import events, meta, series

from trackmux.core.events import ConfigEvent, HistogramEvent, ImageEvent, TableEvent

WRITER = textwrap.dedent("""
    import sys, numpy as np, wandb
    from PIL import Image
    start, stop, run_id = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    run = wandb.init(project="rl-proj", id=run_id, resume="allow", dir=".",
                     config={"lr": 1e-6, "model": {"name": "qwen"}},
                     settings=wandb.Settings(mode="offline", silent=True, console="off",
                                             x_disable_stats=True))
    for step in range(start, stop):
        row = {"reward": step / 10, "loss": 1 / (step + 1), "eval": {"acc": step / 100}}
        if step == 3:
            row["bad"] = float("nan")
            row["samples"] = wandb.Table(columns=["prompt", "score"], data=[["2+2", 1.0]])
            row["pic"] = wandb.Image(Image.new("RGB", (5, 4), (0, 255, 0)))
            row["h"] = wandb.Histogram(np_histogram=([1, 2, 3], [0.0, 1.0, 2.0, 3.0]))
        run.log(row, step=step)
    run.summary["best_reward"] = 0.9
    run.finish()
""")


def write_run(folder: Path, start: int, stop: int, run_id: str = "abc123") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "WANDB_DISABLE_GIT": "true"}
    subprocess.run([sys.executable, "-c", WRITER, str(start), str(stop), run_id], cwd=folder,
                   env=env, check=True, timeout=300, capture_output=True)


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wandb-project")
    write_run(folder, 0, 10)
    return folder


def test_offline_run_every_point_config_summary_and_media(offline_run: Path,
                                                          import_into) -> None:
    result = import_into(str(offline_run))
    assert result.code == 0, result.stderr
    run = result.run
    assert run["format"] == "wandb" and run["steps"] == 10
    got = series(run["dir"])
    assert got["reward"] == [(s, s / 10) for s in range(10)]
    assert got["eval.acc"][3] == (3, 0.03)
    assert len(got["bad"]) == 1 and got["bad"][0][1] != got["bad"][0][1]  # NaN kept
    info = meta(run["dir"])
    assert info["project"] == "rl-proj" and info["name"] == "abc123"
    all_events = events(run["dir"])
    (config,) = [e.config for e in all_events if isinstance(e, ConfigEvent)]
    assert config["lr"] == 1e-6 and config["model"] == {"name": "qwen"}
    assert config["_wandb"]["summary"]["best_reward"] == 0.9
    (table,) = [e for e in all_events if isinstance(e, TableEvent)]
    assert table.key == "samples" and table.columns == ("prompt", "score")
    assert table.rows == (("2+2", 1.0),) and table.step == 3
    (image,) = [e for e in all_events if isinstance(e, ImageEvent)]
    assert (image.key, image.width, image.height, image.step) == ("pic", 5, 4, 3)
    (hist,) = [e for e in all_events if isinstance(e, HistogramEvent)]
    assert hist.counts == (1, 2, 3) and hist.edges == (0.0, 1.0, 2.0, 3.0)
    assert run["points"] == 10 * 3 + 1 + 3

    again = import_into(str(offline_run))
    assert again.run["run"] == run["run"] and again.run["new_points"] == 0
    assert len(events(run["dir"])) == len(all_events)


def test_resumed_run_is_one_run_and_adds_only_what_is_new(tmp_path: Path,
                                                          import_into) -> None:
    folder = tmp_path / "proj"
    write_run(folder, 0, 5, "resumed1")
    first = import_into(str(folder / "wandb")).run
    assert first["steps"] == 5
    write_run(folder, 5, 12, "resumed1")  # a second wandb.init of the same run: a new folder
    assert len(list((folder / "wandb").glob("offline-run-*-resumed1"))) == 2
    second = import_into(str(folder / "wandb")).run
    assert second["run"] == first["run"] and second["steps"] == 12
    got = series(second["dir"])
    assert [s for s, _ in got["reward"]] == list(range(12))


def test_corrupt_log_is_named_with_its_offset(offline_run: Path, tmp_path: Path,
                                              import_into) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(offline_run, copy)
    (log,) = copy.glob("wandb/offline-run-*/run-*.wandb")
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0xFF
    log.write_bytes(bytes(data))
    result = import_into(str(copy))
    assert result.code == 1 and "Traceback" not in result.stderr
    (damage,) = result.run["damage"]
    assert damage["file"] == str(log) and 0 < damage["offset"] <= len(data) // 2
    assert "corrupt" in damage["what"] and result.run["points"] > 0


def test_api_source_reads_history_config_and_summary() -> None:
    from trackmux.importers.wandb_api import find_remote

    rows = [{"_step": s, "_timestamp": 1.7e9 + s, "reward": s / 2, "note": "x"}
            for s in range(4)]
    run = SimpleNamespace(name="ppo", id="r1", project="proj", state="finished",
                          config={"lr": 0.1}, summary=SimpleNamespace(_json_dict={"r": 1}),
                          scan_history=lambda: iter(rows))
    api = SimpleNamespace(run=lambda path: run)
    (source,) = find_remote("wandb:ent/proj/r1", api=api)
    chunks = list(source.read({}, live=False))
    got = [(e.step, e.data) for c in chunks for e in c.events]
    assert got == [(s, {"reward": s / 2}) for s in range(4)]
    assert source.config()["lr"] == 0.1 and source.project == "proj"
    assert next(iter(source.read(chunks[-1].cursors, live=False))).events == []
    with pytest.raises(Exception, match="ENTITY/PROJECT/RUN_ID"):
        find_remote("wandb:nope", api=api)
    assert json.dumps(source.config())


def test_follow_of_a_finished_run_reads_it_whole_and_ends_at_its_exit_record(
        offline_run: Path, tmp_path: Path) -> None:
    root = tmp_path / "spools"
    done = subprocess.run([sys.executable, "-m", "trackmux", "import", "--follow", "--json",
                           "--doctor", "off", "--interval", "0.2", "--dir", str(root),
                           str(offline_run)], capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    (summary,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert summary["points"] == 10 * 3 + 1 + 3 and summary["steps"] == 10
    assert meta(summary["dir"])["state"] == "finished"
