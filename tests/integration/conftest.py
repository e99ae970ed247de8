"""Fixtures for the integration tests (helpers live in ``_support.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import MLFLOW_ENV


@pytest.fixture(autouse=True)
def _bounded_mlflow_http(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process mlflow client gets the same bounded HTTP settings as the children
    (a dead server must fail a request fast; core retries with its own backoff)."""
    for key, value in MLFLOW_ENV.items():
        monkeypatch.setenv(key, value)
    for key in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "TENSORBOARD_DIR",
                "VERL_FILE_LOGGER_PATH", "TRACKMUX_DIR", "TRACKMUX_BACKENDS"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
def mlflow_server(tmp_path: Path) -> Iterator[Any]:
    """A real mlflow server on 127.0.0.1, not started: each test decides when it is up."""
    pytest.importorskip("mlflow")
    from trackmux.testing.mlflow_server import MlflowServer

    server = MlflowServer(tmp_path / "mlflow-server")
    try:
        yield server
    finally:
        server.stop()
