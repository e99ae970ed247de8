"""Delivery records what it did (cursors, quarantine) in the run's ``delivery.db``, so the
trainer's spool writer never waits for a lock the idle-class delivery process holds
(issue 43 item 17, docs/performance.md B12); spools from before keep working."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import orjson

import trackmux
from trackmux.core.delivery.sync import deliver
from trackmux.core.spool.acks import DELIVERY_FILE, DeliveryFile
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.runs import summarize
from trackmux.testing.memory import MemoryBackend, MemoryStore

DEADLINE = 60.0


def _finished_run(root: Path, steps: int) -> Path:
    run = trackmux.init(project="acks", backends=[], dir=root)
    for step in range(steps):
        run.log({"loss": float(step)}, step=step)
    run.finish(timeout=30)
    return Path(run.dir)


def test_acks_and_quarantine_never_need_the_spools_write_lock(tmp_path: Path) -> None:
    """While another connection holds spool.db's write lock (a trainer's writer mid-commit),
    delivery still records its cursor and a quarantine: it never takes that lock, so it can
    never hold it while the OS keeps it off the CPU."""
    run_dir = _finished_run(tmp_path, 5)
    holder = sqlite3.connect(run_dir / "spool.db", isolation_level=None, timeout=0)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('held', x'00')")
    done = threading.Event()
    errors: list[BaseException] = []

    def record() -> None:
        try:
            reader = SpoolReader(run_dir)
            try:
                reader.ack("memory", 3, "memory-x", {"k": 1})
                reader.quarantine("memory", 2, "metrics", (), "refused")
            finally:
                reader.close()
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=record, daemon=True)
    thread.start()
    try:
        recorded = done.wait(DEADLINE / 3)  # SQLite's own wait for the lock would be 30 s
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        thread.join(DEADLINE)
    assert recorded, "the acknowledgement waited for spool.db's write lock"
    assert not errors, errors
    reader = SpoolReader(run_dir)
    try:
        assert reader.cursor("memory").acked_seq == 3
        assert reader.cursor("memory").state == {"k": 1}
        assert [(q.backend, q.seq) for q in reader.quarantined()] == [("memory", 2)]
    finally:
        reader.close()
    assert (run_dir / DELIVERY_FILE).stat().st_mode & 0o777 == 0o600


def test_the_trainer_commits_while_delivery_holds_its_write_lock(
        tmp_path: Path, memory_backend: MemoryStore) -> None:
    """A delivery side stuck inside its write transaction (preempted, stopped) holds
    back its own acknowledgements only: the trainer's events are committed, and once it
    lets go delivery goes on from its cursor, every event once."""
    run = trackmux.init(project="acks", backends=["memory"], dir=tmp_path, delivery="thread")
    run_dir = Path(run.dir)
    DeliveryFile(run_dir).ack("other", 0, None, {})  # the file exists, as after a first ack
    holder = sqlite3.connect(run_dir / DELIVERY_FILE, isolation_level=None, timeout=0)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT OR REPLACE INTO cursors VALUES ('held', 0, NULL, x'7b7d', 0)")
    try:
        for step in range(500):
            run.log({"loss": float(step)}, step=step)
        deadline = time.monotonic() + DEADLINE
        reader = SpoolReader(run_dir)
        try:
            while reader.count() < 500:
                assert time.monotonic() < deadline, "the trainer's writer did not commit"
                time.sleep(0.01)
        finally:
            reader.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    summary = run.finish(timeout=DEADLINE)
    assert summary.pending.get("memory") is None, summary
    got = memory_backend[run.id].metrics()["loss"]
    assert [step for step, _ in got] == list(range(500))
    reader = SpoolReader(run_dir)
    try:
        assert reader.cursor("memory").acked_seq == reader.last_seq()
    finally:
        reader.close()


def _old_layout(run_dir: Path, acked: int, quarantined_seq: int) -> None:
    """Cursor and quarantine rows where spools before delivery.db kept them."""
    with sqlite3.connect(run_dir / "spool.db") as conn:
        conn.execute("INSERT OR REPLACE INTO cursors VALUES ('memory', ?, 'memory-old', ?, ?)",
                     (acked, orjson.dumps({"resumed": True}), time.time() - 60))
        conn.execute("CREATE TABLE quarantine (backend TEXT NOT NULL, seq INTEGER NOT NULL, "
                     "kind TEXT NOT NULL, keys BLOB NOT NULL, reason TEXT NOT NULL, "
                     "time REAL NOT NULL, PRIMARY KEY (backend, seq))")
        conn.execute("INSERT INTO quarantine VALUES ('memory', ?, 'metrics', '[]', 'old', 0)",
                     (quarantined_seq,))


def _legacy_cursor(run_dir: Path) -> Any:
    with sqlite3.connect(run_dir / "spool.db") as conn:
        return conn.execute("SELECT acked_seq, remote_id FROM cursors "
                            "WHERE backend = 'memory'").fetchone()


def test_an_old_spool_reports_its_cursors_and_resumes_from_them_once(tmp_path: Path) -> None:
    run_dir = _finished_run(tmp_path, 10)
    assert not (run_dir / DELIVERY_FILE).exists()  # nothing delivered, nothing created
    last = summarize(run_dir).last_seq
    _old_layout(run_dir, acked=4, quarantined_seq=2)

    before = summarize(run_dir)
    assert before.delivered == {"memory": 4}
    assert before.pending == {"memory": last - 4}
    assert before.remote_ids == {"memory": "memory-old"}
    assert before.quarantined == {"memory": 1}
    assert not (run_dir / DELIVERY_FILE).exists()  # a reader creates nothing

    store = MemoryStore()
    result = deliver(run_dir, {"memory": lambda: MemoryBackend({"store": store})},
                     timeout=DEADLINE)
    assert result.complete, result
    (delivered,) = store.runs.values()
    assert [e.seq for e in delivered.events] == list(range(5, last + 1))  # from the cursor

    after = summarize(run_dir)
    assert after.delivered == {"memory": last} and after.pending == {"memory": 0}
    assert after.quarantined == {"memory": 1}
    assert _legacy_cursor(run_dir) == (4, "memory-old")  # spool.db was not written

    again = MemoryStore()
    deliver(run_dir, {"memory": lambda: MemoryBackend({"store": again})}, timeout=DEADLINE)
    assert all(not r.events for r in again.runs.values())  # nothing twice


def test_a_cursor_is_the_newer_of_its_two_rows(tmp_path: Path) -> None:
    """A spool delivered by an older trackmux after a newer one (or the reverse): the row
    written last holds, whichever file it is in (a cursor can move back: a quarantine
    undone)."""
    run_dir = _finished_run(tmp_path, 6)
    DeliveryFile(run_dir).ack("memory", 5, "memory-new", {})
    with sqlite3.connect(run_dir / "spool.db") as conn:
        conn.execute("INSERT INTO cursors VALUES ('memory', 3, 'memory-old', x'7b7d', ?)",
                     (time.time() + 60,))
    reader = SpoolReader(run_dir)
    try:
        assert (reader.cursor("memory").acked_seq, reader.cursor("memory").remote_id) == (
            3, "memory-old")
        reader.ack("memory", 6, "memory-new", {})
        assert reader.cursor("memory").acked_seq == 3  # the spool.db row is still newer
        with sqlite3.connect(run_dir / "spool.db") as conn:
            conn.execute("UPDATE cursors SET updated = 0")
        assert reader.cursor("memory").acked_seq == 6
    finally:
        reader.close()
