"""The team store against a real, private PostgreSQL cluster (trackmux/testing/postgres.py):
one cluster per session, one fresh database per test. Nothing is mocked."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg")
# the UI tests' browser helpers (ui_support: a page with its problems recorded, the ink
# of a chart); the browser itself is the session fixture of tests/conftest.py
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ui"))

_numbers = itertools.count()


@pytest.fixture
def pg(postgres_server: Any) -> Any:
    return postgres_server


@pytest.fixture
def dsn(pg: Any) -> Iterator[str]:
    """A fresh database, owned by the cluster's superuser; its DSN."""
    name = f"t{os.getpid()}_{next(_numbers)}"
    pg.sql(f"CREATE DATABASE {name}", database="postgres")
    yield pg.dsn_for(pg.user, pg.password, name)
    pg.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", database="postgres")
