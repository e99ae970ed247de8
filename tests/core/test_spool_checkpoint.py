"""WAL checkpoints run on a thread of their own, never inside the spool writer's COMMIT
(core/spool/checkpoint.py): a checkpoint copies and fsyncs ~4 MB, 55-70 ms on a loaded
machine, which a log() held by backpressure waited out (issue 43 item 17, B12)."""

from __future__ import annotations

import sqlite3
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

import trackmux
from trackmux.core.spool import checkpoint

DEADLINE = 60.0


def test_the_writer_commits_while_a_checkpoint_is_under_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entered, release = threading.Event(), threading.Event()
    threads: list[str] = []

    class HeldCheckpoints:
        """A connection whose checkpoints wait for ``release``."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._conn = sqlite3.connect(*args, **kwargs)

        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            if "wal_checkpoint" in sql:
                threads.append(threading.current_thread().name)
                entered.set()
                release.wait(DEADLINE)
            return self._conn.execute(sql, *args)

        def close(self) -> None:
            self._conn.close()

    monkeypatch.setattr(checkpoint, "sqlite3", types.SimpleNamespace(
        connect=HeldCheckpoints, Error=sqlite3.Error))
    monkeypatch.setattr(checkpoint, "CHECKPOINT_BYTES", 64 * 1024)
    run = trackmux.init(project="ckpt", backends=[], dir=tmp_path, doctor=False,
                        provenance=False, system_metrics=False)
    assert isinstance(run, trackmux.Run)
    try:
        step = 0
        deadline = time.monotonic() + DEADLINE
        while not entered.is_set():  # commit until a checkpoint is due and under way
            assert time.monotonic() < deadline, "no checkpoint ran"
            run.log({f"k{i}": float(i) for i in range(50)}, step=step)
            step += 1
            if step % 200 == 0:
                assert run.flush(timeout=DEADLINE)
        for later in range(step, step + 2000):  # the checkpoint is still held ...
            run.log({f"k{i}": float(i) for i in range(50)}, step=later)
        assert run.flush(timeout=DEADLINE)  # ... and the writer commits past it
    finally:
        release.set()
    summary = run.finish(timeout=DEADLINE)
    assert summary.events == step + 2000 and summary.dropped == 0
    assert threads and set(threads) == {"trackmux-spool-checkpoint"}


def test_checkpoints_keep_the_wal_from_growing_with_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With SQLite's automatic checkpoints off on the writer's connection, the
    checkpointer copies the WAL back into spool.db and the writer restarts it once it is
    long, so the WAL is reused from its start instead of holding the whole run (a caller
    that never pauses: a checkpoint racing the writer alone may never let it restart)."""
    monkeypatch.setattr(checkpoint, "CHECKPOINT_BYTES", 256 * 1024)
    monkeypatch.setattr(checkpoint, "RESTART_FRAMES", 256)
    run = trackmux.init(project="ckpt", backends=[], dir=tmp_path, doctor=False,
                        provenance=False, system_metrics=False)
    assert isinstance(run, trackmux.Run)
    wal = Path(run.dir) / "spool.db-wal"
    data = {f"k{i}": float(i) for i in range(100)}
    for step in range(20_000):  # ~28 MB of events in the spool
        run.log(data, step=step)
    assert run.flush(timeout=DEADLINE)
    size = (Path(run.dir) / "spool.db").stat().st_size
    assert size > 16 * 1024 * 1024  # copied into the database by checkpoints ...
    assert wal.stat().st_size < size / 2  # ... and the WAL reused from its start
    assert run.finish(timeout=DEADLINE).events == 20_000
