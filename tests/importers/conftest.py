"""Fixtures for the import tests: run ``trackmux import`` in-process."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from importhelp import Imported

from trackmux.cli.main import cli


@pytest.fixture
def import_into(tmp_path: Path) -> Callable[..., Imported]:
    """``import_into(*args)``: ``trackmux import --json --dir <tmp>/spools *args``."""
    root = tmp_path / "spools"

    def run(*args: str) -> Imported:
        result = CliRunner().invoke(cli, ["import", "--json", "--dir", str(root), *args])
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return Imported(result.exit_code, result.stdout, result.stderr)

    run.root = root  # type: ignore[attr-defined]
    return run



@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real ``mlflow server`` on 127.0.0.1 (trackmux.testing.mlflow_server)."""
    pytest.importorskip("mlflow")
    from trackmux.testing.mlflow_server import MlflowServer

    with MlflowServer(tmp_path_factory.mktemp("mlflow-server")) as server:
        yield server
