"""A caller faster than the disk costs bounded memory, not gigabytes (benchmark B3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import trackmux
from spool_support import wait_quiet
from trackmux.core.spool import writer as spool


def test_queue_stays_bounded_when_the_caller_outruns_the_writer(tmp_path: Path) -> None:
    run = trackmux.init(project="bp", backends=[], dir=tmp_path)
    assert isinstance(run, trackmux.Run)
    data = {f"k{j}": j * 0.5 for j in range(100)}
    deepest = 0
    for step in range(30_000):
        run.log(data, step=step)
        deepest = max(deepest, len(run._spool._queue))
    holds_expired = run._spool.holds_expired
    summary = run.finish(timeout=60)
    assert deepest >= spool.HIGH_WATER  # the caller did outrun the writer
    # past the mark only by one event per hold the writer took nothing in (BACKPRESSURE_HOLD)
    assert deepest <= spool.HIGH_WATER + 1 + holds_expired, (deepest, holds_expired)
    assert summary.events == 30_000 and summary.dropped == 0


def test_queue_stays_bounded_in_thread_mode_beside_the_doctor_and_busy_threads(
        tmp_path: Path) -> None:
    """Issue 46: in thread mode the writer shares the GIL with the delivery threads, the
    doctor's and here two threads that never sleep, so on a loaded machine a commit can
    take longer than BACKPRESSURE_WAIT. A writer that moves is slow, not stalled: callers
    keep being held (one BACKPRESSURE_HOLD a call at most) and the queue passes the mark
    only by the holds that expired (it used to give up and run 1,300 past it)."""
    import threading

    stop = threading.Event()

    def burn() -> None:
        n = 0
        while not stop.is_set():
            n += 1

    burners = [threading.Thread(target=burn, daemon=True) for _ in range(2)]
    for burner in burners:
        burner.start()
    try:
        run = trackmux.init(project="bp", backends=["file"], dir=tmp_path, delivery="thread",
                            doctor=True)
        assert isinstance(run, trackmux.Run)
        data = {f"k{j}": j * 0.5 for j in range(100)}
        deepest = 0
        for step in range(20_000):
            run.log({**data, "reward": 0.5 + (step % 7) * 0.01}, step=step)
            deepest = max(deepest, len(run._spool._queue))
        holds_expired = run._spool.holds_expired
        summary = run.finish(timeout=120)
    finally:
        stop.set()
        for burner in burners:
            burner.join(10)
    assert deepest <= spool.HIGH_WATER + 1 + holds_expired, (deepest, holds_expired)
    # the run's events: what it logged, and the doctor's coverage note, said once at the
    # 5th logged step (its keys never change, so its end says nothing new); read once the
    # watch thread has ended, so nothing appends after the count
    from trackmux.core.spool.reader import SpoolReader

    wait_quiet(run)
    reader = SpoolReader(run.dir)
    try:
        notes = [e.step for e in reader.events_of_kind("text") if e.key == "doctor/coverage"]
    finally:
        reader.close()
    assert notes == [4], (notes, summary.problems)
    assert summary.events == 20_000 + 1 and summary.dropped == 0


def _writer_stuck_in_its_first_commit(tmp_path: Path) -> tuple[spool.SpoolWriter, Any]:
    """A writer inside the commit of one event (step 0) that does not come back until the
    returned event is set: a disk that does not answer, an INSERT off the CPU."""
    import threading

    from trackmux.core.events import MetricsEvent

    writer = spool.SpoolWriter(tmp_path / "run")
    entered, release = threading.Event(), threading.Event()
    real_write = writer._write

    def stuck_write(batch: list, meta: dict) -> None:  # type: ignore[type-arg]
        if batch:
            entered.set()
            release.wait(600)
        real_write(batch, meta)

    writer._write = stuck_write  # type: ignore[method-assign]
    writer.append(MetricsEvent({"a": 0.0}, 0, 0.0))
    writer._pacer.wake()
    assert entered.wait(60)
    return writer, release


def test_a_stalled_writer_lets_the_caller_go_after_backpressure_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other side of the bound: a writer blocked in I/O (it moves nothing) holds a
    caller at most BACKPRESSURE_WAIT, then backpressure is off until its next commit."""

    from trackmux.core.events import MetricsEvent

    monkeypatch.setattr(spool, "BACKPRESSURE_WAIT", 0.2)
    writer, release = _writer_stuck_in_its_first_commit(tmp_path)
    try:
        for step in range(1, spool.HIGH_WATER + 500):  # returns: the stall let it go
            writer.append(MetricsEvent({"a": 1.0}, step, 0.0))
        assert not writer._pressure and len(writer._queue) > spool.HIGH_WATER
    finally:
        release.set()
        writer.close(60)
    assert writer.status.committed == spool.HIGH_WATER + 499 + 1


def test_a_held_caller_is_released_when_the_writer_takes_the_queue(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34.9: backpressure holds log() until the writer has taken the queue, not until
    that batch is committed too (which held one call for two commits). Here the commit
    never ends while the caller waits: the caller must be released by the take alone, with
    backpressure still on (not given up after BACKPRESSURE_WAIT)."""
    import threading

    from trackmux.core.events import MetricsEvent

    monkeypatch.setattr(spool, "BACKPRESSURE_WAIT", 600.0)  # only the writer releases it
    monkeypatch.setattr(spool, "BACKPRESSURE_HOLD", 600.0)
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

    class NotedCondition(threading.Condition):
        """Says when a caller is inside its wait (the lock released), not before."""

        def wait(self, timeout: float | None = None) -> bool:
            if threading.current_thread() is not writer._thread:
                waiting.set()
            return super().wait(timeout)

    waiting = threading.Event()
    writer._committed_cond = NotedCondition()
    writer._write = slow_write  # type: ignore[method-assign]
    writer._backpressure = noted_backpressure  # type: ignore[method-assign]
    try:
        writer.append(MetricsEvent({"a": 1.0}, 0, 0.0))
        writer._pacer.wake()
        assert entered.wait(60)  # the writer is inside a commit that does not end
        done = threading.Event()

        def fill() -> None:
            for step in range(spool.HIGH_WATER + 10):
                writer.append(MetricsEvent({"a": 1.0}, step, 0.0))
            done.set()

        threading.Thread(target=fill, daemon=True).start()
        assert held.wait(60) and waiting.wait(60)  # the caller waits inside backpressure
        taken = writer._take()  # what the writer thread does after its commit
        try:
            assert done.wait(30) and writer._pressure  # released by the take, still on
            assert taken and len(writer._queue) <= spool.HIGH_WATER
        finally:
            writer._queue.extendleft(reversed(taken))  # back, for the writer to commit
    finally:
        release.set()
        writer.close(60)


def test_one_call_waits_at_most_backpressure_hold_for_a_writer_that_takes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43 item 17: a writer whose INSERT sits in I/O or off the CPU held one log()
    for its whole stall (10-20 ms). Now each call over the mark waits one hold at most and
    goes on, one event past the mark; backpressure stays on (the writer is not stalled
    until BACKPRESSURE_WAIT of held calls saw it move nothing), and nothing is dropped."""
    import threading

    from trackmux.core.events import MetricsEvent

    monkeypatch.setattr(spool, "BACKPRESSURE_WAIT", 600.0)  # never 'stalled' here
    writer, release = _writer_stuck_in_its_first_commit(tmp_path)
    past = 20
    try:
        done = threading.Event()

        def fill() -> None:
            for step in range(1, spool.HIGH_WATER + past + 1):
                writer.append(MetricsEvent({"a": 1.0}, step, 0.0))
            done.set()

        threading.Thread(target=fill, daemon=True).start()
        assert done.wait(60), "a held call waited past its hold for a writer that took nothing"
        assert writer._pressure  # still on: held, not given up
        assert len(writer._queue) == spool.HIGH_WATER + past
        assert writer.holds_expired == past + 1  # every call from the mark on waited its hold
    finally:
        release.set()
        writer.close(60)
    assert writer.status.committed == spool.HIGH_WATER + past + 1
    assert writer.status.dropped == 0
