"""Session-wide test settings: nothing reaches the network, spools go to tmp dirs."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("SWANLAB_MODE", "offline")
os.environ.setdefault("DO_NOT_TRACK", "1")


@pytest.fixture(scope="session", autouse=True)
def _session_working_directory_in_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The same for session fixtures (a server, an mlflow client made once)."""
    before = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("session-cwd"))
    yield
    os.chdir(before)


@pytest.fixture(autouse=True)
def _working_directory_in_tmp(tmp_path_factory: pytest.TempPathFactory,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """What a library writes relative to the working directory (mlflow's ``./mlruns``
    artifact root, ``tensorboard_log/``, ``./trackmux``) lands in the test's own temporary
    folder, never in the checkout. A folder apart from ``tmp_path``, whose contents some
    tests count."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
