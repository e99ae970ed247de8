"""Default output locations (issue 27 item 6, issue 21 item 3): without settings a run's
files live in its own folder (the store shared by runs, mlflow's, in the trackmux dir);
verl's variables win whenever set, and under verl its own defaults apply. The whole
picture with real libraries, HOME and TMPDIR checked: tests/reliability/test_one_root.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from trackmux.core.backends.contract import RunInfo
from trackmux.integrations.verl_defaults import verl_locations
from trackmux.plugins.file import resolve_path
from trackmux.plugins.tensorboard import resolve_log_dir

VARIABLES = ("VERL_FILE_LOGGER_PATH", "VERL_FILE_LOGGER_ROOT", "TENSORBOARD_DIR",
             "MLFLOW_TRACKING_URI", "SWANLAB_LOG_DIR")


@pytest.fixture
def info(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunInfo:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return RunInfo("proj", "exp", "r1", tmp_path / "trackmux" / "proj" / "r1", 0.0)


def test_without_settings_outputs_are_in_the_run_folder(info: RunInfo) -> None:
    assert resolve_path({}, info) == info.run_dir / "file" / "exp.jsonl"
    assert resolve_log_dir({}, info) == info.run_dir / "tensorboard"


def test_verl_variables_win_whenever_set(info: RunInfo, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(tmp_path / "logs"))
    assert resolve_path({}, info) == tmp_path / "logs" / "proj" / "exp.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "one.jsonl"))
    assert resolve_path({}, info) == tmp_path / "one.jsonl"
    monkeypatch.setenv("TENSORBOARD_DIR", str(tmp_path / "tb"))
    assert resolve_log_dir({}, info) == tmp_path / "tb"
    assert verl_locations(["file", "tensorboard"]) == {}  # the variables decide


def test_under_verl_its_own_defaults_apply(info: RunInfo, tmp_path: Path) -> None:
    names = ["console", "file", "tensorboard", "mlflow", "swanlab", "wandb"]
    assert verl_locations(names) == {
        "file": {"root": str(tmp_path)},
        "tensorboard": {"root": str(tmp_path / "tensorboard_log")},
        "mlflow": {"tracking_uri": "sqlite:////tmp/mlruns.db"},
        "swanlab": {"log_dir": str(tmp_path / "swanlog")},
    }
    options = verl_locations(names)
    assert resolve_path(options["file"], info) == tmp_path / "proj" / "exp.jsonl"
    assert resolve_log_dir(options["tensorboard"], info) == (
        tmp_path / "tensorboard_log" / "proj" / "exp")
