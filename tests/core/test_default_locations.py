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


def test_a_checkout_named_trackmux_is_not_the_default_spool_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Issue 33.18: ``git clone ... trackmux`` then a script in the folder above wrote its
    runs into the checkout. Writer and readers move to ./trackmux-runs together."""
    from click.testing import CliRunner

    import trackmux
    from trackmux.cli.main import cli
    from trackmux.core import settings

    monkeypatch.delenv("TRACKMUX_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    run = trackmux.init(project="plain", backends=[])  # no checkout: ./trackmux as ever
    run.finish(timeout=10)
    assert run.dir.parent.parent == tmp_path / "trackmux"
    (tmp_path / "trackmux" / "pyproject.toml").write_text("[project]\nname = 'trackmux'\n")
    monkeypatch.setattr(settings, "_checkout_said", False)
    caplog.set_level("WARNING", logger="trackmux")
    run = trackmux.init(project="p", backends=[])
    run.finish(timeout=10)
    assert run.dir.parent.parent == tmp_path / "trackmux-runs"
    said = [r.getMessage() for r in caplog.records if "source checkout" in r.getMessage()]
    assert len(said) == 1 and "trackmux-runs" in said[0]
    listed = CliRunner().invoke(cli, ["runs"])
    assert listed.exit_code == 0 and run.id in listed.output, listed.output
    monkeypatch.setenv("TRACKMUX_DIR", str(tmp_path / "trackmux"))  # chosen: honoured
    assert settings.spool_root(None) == tmp_path / "trackmux"
