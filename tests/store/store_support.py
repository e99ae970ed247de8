"""Helpers of the store tests: a query, and one "machine" training into the store."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
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


def reader_dsn(pg: Any, dsn: str, *, goals: bool = False) -> str:
    """A login role for this database, granted read-only by ``trackmux store init``
    (``goals``: also as the goals role, given to the writing DSN's owner); its DSN."""
    from click.testing import CliRunner

    from trackmux.cli.main import cli

    database = dsn.rsplit("/", 1)[1]
    reader = f"ro_{database}"
    pg.sql(f"CREATE ROLE {reader} LOGIN PASSWORD 'ro'")
    result = CliRunner().invoke(cli, ["store", "init", dsn, "--reader", reader])
    assert result.exit_code == 0, result.output
    return str(pg.dsn_for(reader, "ro", database))


@contextlib.contextmanager
def serve_store(dsn: str, replicas: Path) -> Iterator[Any]:
    """What ``trackmux ui DSN`` starts: a mirror of the store polling every 0.2 s and the
    server over its replicas, with the store's board and sweeps; stopped at the end."""
    from trackmux.ui.app import Server
    from trackmux.ui.mirror import StoreMirror

    mirror = StoreMirror(dsn, replicas, poll=0.2)
    mirror.start()
    server = Server([mirror.root], warm=False, boards=[dsn]).start()
    try:
        yield server
        assert mirror.error is None
    finally:
        server.stop()
        mirror.stop()
