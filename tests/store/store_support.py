"""Helpers of the store tests: a query, and one "machine" training into the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


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
