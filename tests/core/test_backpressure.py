"""A caller faster than the disk costs bounded memory, not gigabytes (benchmark B3)."""

from __future__ import annotations

from pathlib import Path

import pytest

import trackmux
from trackmux.core.spool import writer as spool


def test_queue_stays_bounded_when_the_caller_outruns_the_writer(tmp_path: Path) -> None:
    run = trackmux.init(project="bp", backends=[], dir=tmp_path)
    assert isinstance(run, trackmux.Run)
    data = {f"k{j}": j * 0.5 for j in range(100)}
    deepest = 0
    for step in range(30_000):
        run.log(data, step=step)
        deepest = max(deepest, len(run._spool._queue))
    summary = run.finish(timeout=60)
    assert deepest <= spool.HIGH_WATER + 1, deepest
    assert summary.events == 30_000 and summary.dropped == 0


def test_a_held_caller_is_released_when_the_writer_takes_the_queue(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34.9: backpressure holds log() until the writer has taken the queue, not until
    that batch is committed too (which held one call for two commits). Here the commit
    never ends while the caller waits: the caller must be released by the take alone, with
    backpressure still on (not given up after BACKPRESSURE_WAIT)."""
    import threading
    import time

    from trackmux.core.events import MetricsEvent

    monkeypatch.setattr(spool, "BACKPRESSURE_WAIT", 600.0)  # only the writer releases it
    writer = spool.SpoolWriter(tmp_path / "run")
    entered, release, held = threading.Event(), threading.Event(), threading.Event()
    real_write, real_backpressure = writer._write, writer._backpressure

    def slow_write(batch: list, meta: dict) -> None:  # type: ignore[type-arg]
        if batch:
            entered.set()
            release.wait(600)  # until the test lets it go
        real_write(batch, meta)

    def noted_backpressure() -> None:
        held.set()
        real_backpressure()

    writer._write = slow_write  # type: ignore[method-assign]
    writer._backpressure = noted_backpressure  # type: ignore[method-assign]
    try:
        writer.append(MetricsEvent({"a": 1.0}, 0, 0.0))
        writer._wake.set()
        assert entered.wait(60)  # the writer is inside a commit that does not end
        done = threading.Event()

        def fill() -> None:
            for step in range(spool.HIGH_WATER + 10):
                writer.append(MetricsEvent({"a": 1.0}, step, 0.0))
            done.set()

        threading.Thread(target=fill, daemon=True).start()
        assert held.wait(60)
        time.sleep(0.1)  # into its wait (a shorter one only makes this test weaker)
        taken = writer._take()  # what the writer thread does after its commit
        try:
            assert done.wait(30) and writer._pressure  # released by the take, still on
            assert taken and len(writer._queue) <= spool.HIGH_WATER
        finally:
            writer._queue.extendleft(reversed(taken))  # back, for the writer to commit
    finally:
        release.set()
        writer.close(60)
