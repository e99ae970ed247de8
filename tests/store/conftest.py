"""The team store against a real, private PostgreSQL cluster (trackmux/testing/postgres.py):
one cluster per session, one fresh database per test. Nothing is mocked."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg")

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


def rows(dsn: str, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def train(root: Path, host: str, dsn: str, *, name: str = "grpo", run_id: str | None = None,
          steps: int = 20, delivery: str = "thread", config: dict[str, Any] | None = None,
          monkeypatch: pytest.MonkeyPatch | None = None, **kwargs: Any) -> Any:
    """One "machine": its own spool root and host name, delivering to the store."""
    import trackmux

    assert monkeypatch is not None
    monkeypatch.setenv("TRACKMUX_HOST", host)
    run = trackmux.init("team", name, backends=["postgres"], dir=root, run_id=run_id,
                        backend_options={"postgres": {"dsn": dsn}}, delivery=delivery,
                        config=config, **kwargs)
    for step in range(steps):
        run.log({"loss": 1.0 / (step + 1), "reward": step / steps}, step=step)
    return run
