"""One root by default (issue 27 item 6, issue 21 item 3): with no settings, everything a
run writes (spool, file output, tensorboard event files, the local mlflow store, wandb's
offline run and staging copies, swanlab's offline folder) goes under the trackmux dir.
Run from an empty working directory with HOME and TMPDIR pointed at empty folders,
nothing may appear anywhere else, and each output is read back by its own library.
``trackmux report <project dir>/*`` then works: only run folders are in a project."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mlflow", reason="needs mlflow, tensorboard, wandb and swanlab (tox -e stores)")
pytest.importorskip("tensorboard", reason="needs tensorboard (tox -e stores)")
pytest.importorskip("wandb", reason="needs wandb (tox -e stores)")
pytest.importorskip("swanlab", reason="needs swanlab (tox -e stores)")

BACKENDS = ["file", "tensorboard", "mlflow", "wandb", "swanlab"]

SCRIPT = """
import numpy as np
import trackmux

run = trackmux.init(project="one", name="r1", backends={backends!r},
                    config={{"lr": 0.1, "wandb_key": "local-" + "ab" * 20}})
for step in range(1, 6):
    run.log({{"loss": 1.0 / step, "acc@1": step / 10}}, step=step)
run.log_table("samples", columns=["prompt", "answer"], rows=[["a", "b"], ["c", "d"]], step=5)
run.log_image("heat", np.arange(64, dtype=np.uint8).reshape(8, 8), step=5)
summary = run.finish(timeout=180)
assert summary.complete, summary
print(run.dir)
"""


def _clean_env(work: Path, home: Path, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TRACKMUX_", "WANDB_", "MLFLOW_", "SWANLAB_", "VERL_",
                                "XDG_", "TENSORBOARD_"))}
    env.update(HOME=str(home), TMPDIR=str(tmp), PWD=str(work), WANDB_MODE="offline",
               WANDB_SILENT="true", WANDB_DISABLE_GIT="true", SWANLAB_MODE="offline",
               MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="1")
    return env


def _everything(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path, Path]:
    base = tmp_path_factory.mktemp("oneroot")
    work, home, tmp = base / "work", base / "home", base / "tmp"
    for folder in (work, home, tmp):
        folder.mkdir()
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(backends=BACKENDS)], cwd=work,
                          env=_clean_env(work, home, tmp), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = Path(done.stdout.split()[-1])
    return base, work, home, tmp, run_dir


def test_nothing_is_written_outside_the_trackmux_dir(
        one_run: tuple[Path, Path, Path, Path, Path]) -> None:
    base, work, home, tmp, run_dir = one_run
    assert sorted(p.name for p in work.iterdir()) == ["trackmux"]
    assert _everything(home) == []
    assert _everything(tmp) == []
    assert sorted(p.name for p in base.iterdir()) == ["home", "tmp", "work"]
    assert run_dir.parent.parent == work / "trackmux"
    # the project folder holds run folders only; shared stores sit beside the projects
    assert [p.name for p in (work / "trackmux" / "one").iterdir()] == [run_dir.name]
    assert sorted(p.name for p in (work / "trackmux").iterdir()) == ["mlflow", "one"]
    # wandb's staging copies (WANDB_DATA_DIR) were removed once the offline write was done
    assert not [p for p in run_dir.rglob("*") if p.name == "staging" and p.is_dir()
                and any(p.iterdir())]


def test_each_output_is_read_back_by_its_own_library(
        one_run: tuple[Path, Path, Path, Path, Path]) -> None:
    _, work, _, _, run_dir = one_run
    # file backend
    jsonl = run_dir / "file" / "r1.jsonl"
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2, 3, 4, 5]
    assert lines[-1]["data"]["loss"] == pytest.approx(0.2)
    # tensorboard
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir / "tensorboard"))
    accumulator.Reload()
    assert [e.step for e in accumulator.Scalars("loss")] == [1, 2, 3, 4, 5]
    # mlflow: the local store in the trackmux dir
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{work / 'trackmux' / 'mlflow' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("one")
    assert experiment is not None
    assert experiment.artifact_location.startswith(str(work / "trackmux" / "mlflow"))
    (remote,) = client.search_runs([experiment.experiment_id])
    history = client.get_metric_history(remote.info.run_id, "acc_at_1")
    assert sorted(p.step for p in history) == [1, 2, 3, 4, 5]
    assert remote.data.params["wandb_key"] == "***REDACTED***"
    # wandb: the offline run under the run folder
    files = list(run_dir.rglob("run-*.wandb"))
    assert len(files) == 1 and files[0].stat().st_size > 0
    # swanlab: the offline folder under the run folder
    assert list((run_dir / "swanlog").glob("run-*/run-*.swanlab"))


def test_report_of_a_project_glob_works(one_run: tuple[Path, Path, Path, Path, Path],
                                        tmp_path: Path) -> None:
    _, work, _, _, run_dir = one_run
    runs = glob.glob(str(work / "trackmux" / "one" / "*"))
    assert runs == [str(run_dir)]
    out = tmp_path / "report.html"
    done = subprocess.run([sys.executable, "-m", "trackmux", "report", *runs, "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.stat().st_size > 0 and "loss" in out.read_text(encoding="utf-8")
