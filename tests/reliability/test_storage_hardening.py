"""Issue 18, classes 2, 3 and 5: storage faults neither lose nor duplicate, nothing hangs.

- the spool: an I/O error or another process's write lock keeps batches (retried, never
  dropped uncounted, one report, no traceback storm); the in-memory buffer is bounded in
  bytes; ``durability="strict"`` returns while the spool cannot be written; a spool.db
  that is a symlink or a FIFO is refused by the CLI;
- the file backend: output that is deleted or truncated is rebuilt, never padded; two runs
  with the same project and name never share a file; a disk that fills then frees does
  not duplicate lines;
- a fork right after ``init()`` does not deadlock; ``log_image`` of a FIFO returns.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from _reliability import child_env, trackmux_cli

import trackmux
from trackmux.core.events import MetricsEvent, TextEvent
from trackmux.core.spool import writer as spool_module
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.writer import SpoolWriter


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _count(run_dir: Path) -> int:
    reader = SpoolReader(run_dir)
    try:
        return reader.count()
    finally:
        reader.close()


# -- the spool ------------------------------------------------------------------------

class FlakyConnection:
    """A real SQLite connection whose COMMITs fail with SQLite's own EIO error for a while:
    what a failing disk gives the writer (the data never reaches the database)."""

    def __init__(self, conn: sqlite3.Connection, failures: int) -> None:
        self.conn = conn
        self.failures = failures

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT" and self.failures > 0:
            self.failures -= 1
            raise sqlite3.OperationalError("disk I/O error")
        return self.conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def test_an_io_error_keeps_every_batch_and_reports_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(spool_module, "DISK_RETRY_INTERVAL", 0.05)
    writer = SpoolWriter(tmp_path / "run")
    writer._conn = FlakyConnection(writer._conn, failures=20)  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, "trackmux"):
        for step in range(3000):
            writer.append(MetricsEvent({"x": float(step)}, step, time.time()))
            if step % 300 == 0:
                time.sleep(0.02)
        assert writer.close(30)
    assert writer.status.dropped == 0
    assert _count(tmp_path / "run") == 3000
    errors = [r for r in caplog.records if "cannot take more events" in r.getMessage()]
    assert len(errors) == 1 and "disk I/O error" in errors[0].getMessage()
    assert not any(r.exc_info for r in caplog.records), "a traceback was logged"


def test_a_write_lock_held_by_another_process_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process holds the spool's write lock past the busy timeout (shortened here
    from 30 s): the batches wait and are committed when the lock goes."""
    monkeypatch.setattr(spool_module, "BUSY_TIMEOUT", 0.2)
    monkeypatch.setattr(spool_module, "DISK_RETRY_INTERVAL", 0.05)
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    run.log({"x": 0.0})
    assert run.flush(30)  # the writer's first commit is behind it before the lock is taken
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sqlite3, sys, time
        conn = sqlite3.connect({str(run.dir / "spool.db")!r}, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        print("locked", flush=True)
        time.sleep(1.5)
        conn.execute("COMMIT")
    """)], stdout=subprocess.PIPE, text=True, env=child_env())
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    for step in range(1, 2001):
        run.log({"x": float(step)})
        if step % 200 == 0:
            time.sleep(0.02)
    holder.wait(30)
    summary = run.finish(timeout=30)
    assert summary.dropped == 0 and summary.events == 2001
    assert _count(run.dir) == 2001


def test_the_buffer_is_bounded_in_bytes_while_the_spool_is_full(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the size cap reached, 100-float events wait in memory only up to
    ``max_buffered_bytes`` (the count limit is far higher); the rest are counted."""
    monkeypatch.setattr(spool_module, "DISK_RETRY_INTERVAL", 0.02)
    writer = SpoolWriter(tmp_path / "run", max_bytes=1, max_buffered=1_000_000,
                         max_buffered_bytes=2_000_000)
    row = {f"metric/{i}": float(i) for i in range(100)}
    writer.append(MetricsEvent(dict(row), 0, 0.0))
    # The writer has met the cap and lowered the limit (not a sleep: a writer slow to get
    # the CPU let the queue grow past the bound before it first looked).
    deadline = time.monotonic() + 60
    while writer._limit == writer.max_buffered and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer.status.full is not None and writer._limit < writer.max_buffered
    for step in range(1, 20_000):
        writer.append(MetricsEvent(dict(row), step, 0.0))
        if step % 1000 == 0:
            time.sleep(0.05)   # paces the bursts; the writer re-derives the limit meanwhile
    held = len(writer._queue)
    assert writer.status.full is not None
    per_event = spool_module.event_bytes(MetricsEvent(row, 0, 0.0))
    assert held * per_event <= 2_000_000 + 1000 * per_event   # within one burst of the bound
    assert writer.status.dropped >= 20_000 - held - 1000
    writer.close(1)
    assert writer.status.dropped + _count(tmp_path / "run") >= 20_000 - 1


def test_strict_durability_returns_while_the_spool_cannot_be_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spool_module, "DISK_RETRY_INTERVAL", 0.05)
    run = trackmux.init(project="p", backends=[], dir=tmp_path, durability="strict",
                        max_spool_bytes=200_000)
    done = threading.Event()

    def train() -> None:
        for step in range(60):
            run.log_text("t", "lorem ipsum " * 1000, step=step)   # ~12 KB each
        done.set()

    thread = threading.Thread(target=train, daemon=True)
    thread.start()
    assert done.wait(60), "log() blocked on a full spool in strict mode"
    summary = run.finish(timeout=5)
    assert summary.dropped > 0 and not summary.complete
    assert summary.events + summary.dropped == 60


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_spool_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path / "sp")
    run.log({"x": 1.0})
    run.finish()
    spool = run.dir / "spool.db"
    for extra in run.dir.glob("spool.db-*"):
        extra.unlink()
    spool.unlink()
    outside = tmp_path / "outside.db"
    if kind == "symlink":
        outside.write_bytes(b"")
        spool.symlink_to(outside)
    else:
        os.mkfifo(spool)
    for command in (["show", str(run.dir)], ["sync", str(run.dir), "--to", "file",
                                              "--no-progress"]):
        done = trackmux_cli(*command)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "not a regular file" in done.stderr or "symlink" in done.stderr
        assert "Traceback" not in done.stderr
    if kind == "symlink":
        assert outside.read_bytes() == b"", "sync wrote through the symlink"
    with pytest.raises(ValueError):
        SpoolWriter(run.dir)


# -- the file backend -----------------------------------------------------------------

@pytest.mark.parametrize("damage", ["deleted", "truncated", "emptied"])
def test_lost_output_is_rebuilt_never_padded(tmp_path: Path, damage: str) -> None:
    run = trackmux.init(project="p", name="r", backends=["file"], dir=tmp_path / "spool",
                        backend_options={"file": {"root": str(tmp_path / "out")}})
    for step in range(40):
        run.log({"x": float(step)})
        if step % 10 == 0:
            run.log_table("samples", ["a"], [[step]])
    assert run.finish(timeout=30).complete
    out = tmp_path / "out" / "p" / "r.jsonl"
    original = out.read_bytes()
    tables = out.with_name("r.tables.jsonl").read_bytes()
    if damage == "deleted":
        out.unlink()
    elif damage == "truncated":
        out.write_bytes(original[: len(original) // 3])
    else:
        out.write_bytes(b"")
    done = trackmux_cli("sync", str(run.dir), "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.read_bytes() == original
    assert b"\0" not in out.read_bytes()
    assert out.with_name("r.tables.jsonl").read_bytes() == tables


def test_two_live_runs_with_the_same_name_do_not_share_a_file(tmp_path: Path) -> None:
    first = trackmux.init(project="p", name="same", backends=["file"], dir=tmp_path / "sp",
                          backend_options={"file": {"root": str(tmp_path / "out")}})
    second = trackmux.init(project="p", name="same", backends=["file"], dir=tmp_path / "sp",
                           backend_options={"file": {"root": str(tmp_path / "out")}})
    for step in range(30):
        first.log({"who": 1.0}, step=step)
        second.log({"who": 2.0}, step=step)
    assert first.finish(timeout=30).complete and second.finish(timeout=30).complete
    outputs = {}
    for path in (tmp_path / "out" / "p").glob("same*.jsonl"):
        if not path.name.endswith((".tables.jsonl", ".text.jsonl", ".histograms.jsonl",
                                   ".artifacts.jsonl")):
            outputs[path.name] = {line["data"]["who"] for line in _lines(path)}
            assert len(_lines(path)) == 30
    assert sorted(outputs.values(), key=sorted) == [{1.0}, {2.0}], outputs


def test_a_sync_of_an_older_run_never_writes_into_a_newer_runs_file(tmp_path: Path) -> None:
    opts = {"file": {"root": str(tmp_path / "out")}}
    older = trackmux.init(project="p", name="same", backends=["file"], dir=tmp_path / "sp",
                          backend_options=opts)
    for step in range(50):
        older.log({"who": 1.0}, step=step)
    assert older.finish(timeout=30).complete
    newer = trackmux.init(project="p", name="same", backends=["file"], dir=tmp_path / "sp",
                          backend_options=opts)
    for step in range(5):
        newer.log({"who": 2.0}, step=step)
    assert newer.finish(timeout=30).complete
    first = tmp_path / "out" / "p" / "same.jsonl"
    assert [line["data"]["who"] for line in _lines(first)] == [1.0] * 50, "overwritten"
    later = tmp_path / "out" / "p" / f"same-{newer.id}.jsonl"
    newer_bytes = later.read_bytes()
    assert [line["data"]["who"] for line in _lines(later)] == [2.0] * 5
    first.unlink()   # the older run's output is lost: its sync rebuilds it in its own file
    done = trackmux_cli("sync", str(older.dir), "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    assert later.read_bytes() == newer_bytes, "the older run's sync touched the newer file"
    assert [line["data"]["who"] for line in _lines(first)] == [1.0] * 50


def test_an_older_runs_sync_moves_aside_when_a_newer_run_took_its_file(tmp_path: Path) -> None:
    """The older run's output and owner mark were removed, so a newer run took the path;
    the older run's sync rebuilds its output beside it and leaves the newer file alone."""
    opts = {"file": {"root": str(tmp_path / "out")}}
    older = trackmux.init(project="p", name="same", backends=["file"], dir=tmp_path / "sp",
                          backend_options=opts)
    for step in range(50):
        older.log({"who": 1.0}, step=step)
    assert older.finish(timeout=30).complete
    shared = tmp_path / "out" / "p" / "same.jsonl"
    shared.unlink()
    shared.with_name("same.run-id").unlink()
    newer = trackmux.init(project="p", name="same", backends=["file"], dir=tmp_path / "sp",
                          backend_options=opts)
    for step in range(5):
        newer.log({"who": 2.0}, step=step)
    assert newer.finish(timeout=30).complete
    newer_bytes = shared.read_bytes()
    done = trackmux_cli("sync", str(older.dir), "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    assert shared.read_bytes() == newer_bytes, "the older run's sync wrote into the newer file"
    own = tmp_path / "out" / "p" / f"same-{older.id}.jsonl"
    assert [line["data"]["who"] for line in _lines(own)] == [1.0] * 50


def delivered(run: Any, backend: str, timeout: float = 60.0) -> None:
    """Wait until ``backend`` acknowledged every event logged so far."""
    assert run.flush(timeout)
    deadline = time.monotonic() + timeout
    while (progress := run.delivery()[backend])[0] < progress[1]:
        assert time.monotonic() < deadline, f"{backend}: {progress} (acked, last) after {timeout} s"
        time.sleep(0.02)


def failed_writing(run: Any, backend: str, timeout: float = 60.0) -> None:
    """Wait until a delivery to ``backend`` failed (reported to the run, then retried)."""
    deadline = time.monotonic() + timeout
    while not any(p.backend == backend for p in run.problems()):
        assert time.monotonic() < deadline, f"no failed delivery to {backend} in {timeout} s"
        time.sleep(0.02)


def test_a_backend_disk_that_fills_then_frees_writes_each_line_once(
        tmp_path: Path, small_tmpfs: Path, fill_disk: Any) -> None:
    """The file backend's own output disk (a 1 MB tmpfs) fills mid-run and is freed: the
    failed batches are retried, and every line is in the file exactly once."""
    filler = small_tmpfs / "filler"
    run = trackmux.init(project="p", name="r", backends=["file"], dir=tmp_path / "spool",
                        backend_options={"file": {"root": str(small_tmpfs)}})
    text = "x" * 2000
    for step in range(100):
        run.log({"x": float(step)}, step=step)
        run.log_text("t", text, step=step)
    delivered(run, "file")  # the first 100 steps are in the file before the disk fills
    fill_disk(filler)
    for step in range(100, 300):
        run.log({"x": float(step)}, step=step)
        run.log_text("t", text, step=step)
    failed_writing(run, "file")  # a delivery failed with ENOSPC (and is retried)
    filler.unlink()
    summary = run.finish(timeout=60)
    assert summary.complete, summary
    out = small_tmpfs / "p" / "r.jsonl"
    assert [line["step"] for line in _lines(out)] == list(range(300))
    assert [line["step"] for line in _lines(out.with_name("r.text.jsonl"))] == list(range(300))


# -- hangs ----------------------------------------------------------------------------

def test_a_fork_right_after_init_does_not_deadlock(tmp_path: Path) -> None:
    """A DataLoader-style fork straight after init(), while the warm-up thread imports
    Pillow: the child imports Pillow too and exits. Twenty times, each within 20 s."""
    code = textwrap.dedent(f"""
        import os, sys
        import trackmux
        for i in range(20):
            for name in [m for m in sys.modules if m == "PIL" or m.startswith("PIL.")]:
                del sys.modules[name]   # so every warm-up really imports
            run = trackmux.init(project="p", backends=[], dir={str(tmp_path)!r})
            pid = os.fork()
            if pid == 0:
                import PIL.Image, PIL.PngImagePlugin
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            assert status == 0, status
            run.finish()
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=child_env(), timeout=400)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_log_image_of_a_fifo_returns_with_a_clear_error(tmp_path: Path,
                                                        strict: None) -> None:
    fifo = tmp_path / "image.png"
    os.mkfifo(fifo)
    run = trackmux.init(project="p", backends=[], dir=tmp_path / "sp")
    result: list[BaseException] = []

    def call() -> None:
        try:
            run.log_image("img", fifo)
        except BaseException as exc:  # collected for the assertion
            result.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "log_image blocked on a FIFO"
    assert isinstance(result[0], ValueError) and "not a regular file" in str(result[0])
    run.finish()


def test_events_of_every_kind_are_sized_for_the_bound() -> None:
    assert spool_module.event_bytes(TextEvent("k", "x" * 10_000, 0, 0.0)) > 10_000
    small = spool_module.event_bytes(MetricsEvent({"a": 1.0}, 0, 0.0))
    big = spool_module.event_bytes(MetricsEvent({str(i): 1.0 for i in range(100)}, 0, 0.0))
    assert big > 25 * small


def test_an_oversized_event_is_dropped_alone_named_and_counted(
        tmp_path: Path, memory_backend: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 27: an event above SQLite's value limit used to fail its whole transaction, so
    its batch was retried and then dropped with it. Now it alone is dropped, named (kind,
    key, step) and counted as 'could not be stored', not as a full spool."""
    caplog.set_level(logging.ERROR, logger="trackmux")
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    run._spool._max_value = 100_000  # as if SQLite's limit were 100 KB
    for step in range(20):
        run.log({"x": float(step)}, step=step)
        if step == 10:
            run.log_text("huge", "y" * 200_000, step=step)
    summary = run.finish(timeout=30)
    assert summary.dropped == 1 and run._spool.status.unstorable == 1
    assert len(memory_backend[run.id].metrics()["x"]) == 20
    [said] = [r.getMessage() for r in caplog.records if "dropped alone" in r.getMessage()]
    assert "text event 'huge' at step 10" in said and "dropped alone" in said
    listed = trackmux_cli("runs", str(tmp_path))
    assert "1 events dropped (could not be stored)" in listed.stdout
    assert "spool full" not in listed.stdout
