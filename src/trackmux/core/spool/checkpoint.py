"""WAL checkpoints of a run's spool, on a thread of their own instead of the writer's.

SQLite checkpoints automatically inside the ``COMMIT`` that takes the WAL past 1,000 pages:
it copies about 4 MB into ``spool.db`` and fsyncs it, 55-70 ms on a loaded machine
(docs/performance.md, B12 round 4), and that ``COMMIT`` ran on the spool writer's thread,
so a ``log()`` held by backpressure waited for the disk. The writer turns automatic
checkpoints off on its connection and tells :class:`Checkpointer` how much it committed;
every ``CHECKPOINT_BYTES`` (a quarter of SQLite's own threshold, so that what is left for
the writer below stays short) a ``PASSIVE`` checkpoint runs here on a connection of its
own. It never blocks the writer (in WAL mode one writer appends while a checkpoint copies),
and SQLite releases the GIL while it works. The thread starts with the first checkpoint, so
a short run never has it; the writer's last close still checkpoints and removes the WAL, as
before.

One thing only the writer can do: start the WAL again from its beginning. SQLite does that
when a write transaction begins with every frame already copied, which a checkpoint on
another thread, racing a writer that commits back to back, may never leave it. When the WAL
holds more than ``RESTART_FRAMES`` frames, :attr:`Checkpointer.restart_due` asks the writer
for one checkpoint of its own after a commit: the frames since this thread's last pass, a
short copy, after which its next transaction starts the WAL over (so it stays bounded).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

log = logging.getLogger("trackmux")

#: committed bytes (an estimate) between two checkpoints of this thread
CHECKPOINT_BYTES = 1024 * 1024
#: frames in the WAL (4 KB pages) above which the writer checkpoints once itself (restart):
#: SQLite's own threshold, so the WAL and a `max_bytes` cap see the sizes they did
RESTART_FRAMES = 1000


class Checkpointer:
    """Checkpoints one spool on a thread of its own (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done = 0  #: checkpoints run (for tests and benchmarks)
        #: set here, read and cleared by the writer thread: see the module docstring
        self.restart_due = False
        #: held during this thread's checkpoint; the writer checkpoints only while it is
        #: free (two checkpoints at once: the second gets SQLITE_BUSY and copies nothing)
        self.lock = threading.Lock()
        self._pending = 0
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None

    def committed(self, nbytes: int) -> None:
        """Writer thread, after a commit: ``nbytes`` more went into the WAL (an estimate)."""
        self._pending += nbytes
        if self._pending < CHECKPOINT_BYTES:
            return
        self._pending = 0
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name="trackmux-spool-checkpoint")
            self._thread.start()
        self._wake.set()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread (a checkpoint under way finishes first) and close its
        connection, so that the writer's connection is the spool's last."""
        self._stop = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stop:
                    return
                try:
                    if conn is None:
                        conn = sqlite3.connect(self.path, timeout=1.0, isolation_level=None,
                                               check_same_thread=False)
                    with self.lock:
                        found = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    self.done += 1
                    if found is not None and int(found[1]) > RESTART_FRAMES:
                        self.restart_due = True
                except sqlite3.Error as exc:  # a full disk, damage: the next one tries again
                    log.debug("trackmux: checkpoint of %s: %s", self.path, exc)
        finally:
            if conn is not None:
                conn.close()
