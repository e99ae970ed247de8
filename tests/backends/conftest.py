"""Fixtures shared by backend tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from trackmux.testing.mlflow_server import MlflowServer


# -- mlflow ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """A real ``mlflow server`` on 127.0.0.1 (SQLite store, artifacts served over HTTP),
    shared by the tests of one module: starting one takes 5-20 s. A test that kills or
    pauses it must ``restart()``/``resume()`` it before returning (use try/finally)."""
    pytest.importorskip("mlflow")
    from trackmux.testing.mlflow_server import MlflowServer

    with MlflowServer(tmp_path_factory.mktemp("mlflow-server")) as server:
        yield server
