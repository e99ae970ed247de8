"""Shared by the suites that read what a run left in its spool (tests/core, tests/doctor,
tests/hf, tests/reliability, tests/verl): tests/ is on sys.path because tests/conftest.py
lives there."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def spool_meta(run_dir: Path) -> dict[str, Any]:
    """The spool meta of the run in ``run_dir`` (state, stop reason, dropped input); the
    reader is closed before it returns."""
    from trackmux.core.spool.reader import SpoolReader  # after a suite's importorskip

    reader = SpoolReader(run_dir)
    try:
        return reader.meta()
    finally:
        reader.close()


def forget_cursors(run_dir: Path) -> None:
    """Make a copied run a fresh destination for every backend: its cursors go, from
    delivery.db and from an older spool's own cursors table."""
    import sqlite3

    from trackmux.core.spool.acks import DELIVERY_FILE

    for suffix in ("", "-wal", "-shm"):
        (run_dir / (DELIVERY_FILE + suffix)).unlink(missing_ok=True)
    with sqlite3.connect(run_dir / "spool.db") as conn:
        conn.execute("DELETE FROM cursors")


def wait_quiet(run: Any, timeout: float = 60.0) -> None:
    """Return once nothing of ``run`` can append to its spool any more: its watch thread
    (``delivery="thread"``) has ended and its delivery process has exited. ``finish()``
    waits for the watch thread only up to 5 s and lets the delivery process end on its own
    (it may append what the doctor says of the run while it lives), so a test that counts
    a run's events exactly, or reads them twice, reads them after this."""
    import time

    deadline = time.monotonic() + timeout
    watch = getattr(run, "_watch", None)
    if watch is not None and watch.thread.ident is not None:  # started
        watch.thread.join(timeout)
        assert not watch.thread.is_alive(), f"the watch thread did not end within {timeout} s"
    for host in getattr(run, "_deliveries", ()):
        proc = getattr(host, "proc", None)
        if proc is not None:  # raises subprocess.TimeoutExpired past the deadline
            proc.wait(max(0.0, deadline - time.monotonic()))
