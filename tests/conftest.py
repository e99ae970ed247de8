"""Session-wide test settings: nothing reaches the network, spools go to tmp dirs."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("SWANLAB_MODE", "offline")
os.environ.setdefault("DO_NOT_TRACK", "1")


@pytest.fixture(autouse=True)
def _working_directory_in_tmp(tmp_path_factory: pytest.TempPathFactory,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """What a library writes relative to the working directory (mlflow's ``./mlruns``
    artifact root, ``tensorboard_log/``, ``./trackmux``) lands in the test's own temporary
    folder, never in the checkout. A folder apart from ``tmp_path``, whose contents some
    tests count."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
