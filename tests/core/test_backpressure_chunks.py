"""A caller held by backpressure waits for one chunk of the writer's round, not the round
(issue 43 item 17: one log() waited out a whole 4,000-event encode and insert)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from trackmux.core.events import MetricsEvent
from trackmux.core.spool import writer as spool


class FirstRoundOnCue(spool.CommitPacer):
    """The writer's first round starts when the test says; later rounds as usual."""

    def __init__(self) -> None:
        super().__init__()
        self.cue = threading.Event()

    def wait(self, interval: float) -> None:
        if not self.cue.is_set():
            self.cue.wait(60)
        else:
            super().wait(interval)


def test_a_held_caller_is_released_within_the_round_not_after_its_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spool, "BACKPRESSURE_WAIT", 600.0)  # only the writer releases it
    monkeypatch.setattr(spool, "BACKPRESSURE_HOLD", 600.0)
    pacer = FirstRoundOnCue()
    writer = spool.SpoolWriter(tmp_path / "run", pacer=pacer)
    in_round, caller_waits, caller_recorded = (threading.Event(), threading.Event(),
                                               threading.Event())
    encodes = 0
    real_encode = writer._encode

    def paced_encode(batch: list[Any], start: int) -> list[tuple[Any, ...]]:
        nonlocal encodes
        encodes += 1
        if encodes == 1:  # the round's first chunk: the caller fills the queue meanwhile
            in_round.set()
            assert caller_waits.wait(60)
        elif encodes == 3:  # the round goes on only once the caller said when it ran
            assert caller_recorded.wait(60)
        return real_encode(batch, start)

    class NotedCondition(threading.Condition):
        """Says when the caller is inside its wait (the lock released), not before."""

        def wait(self, timeout: float | None = None) -> bool:
            if threading.current_thread() is not writer._thread:
                caller_waits.set()
            return super().wait(timeout)

    writer._committed_cond = NotedCondition()
    writer._encode = paced_encode  # type: ignore[method-assign]
    committed_when_released: list[int] = []
    try:
        for step in range(spool.HIGH_WATER - 1):
            writer.append(MetricsEvent({"a": 1.0}, step, 0.0))
        pacer.cue.set()
        assert in_round.wait(60)  # the round took its first chunk of HIGH_WATER - 1

        def fill() -> None:
            try:
                for step in range(spool.TAKE_CHUNK + 1):  # the last one meets HIGH_WATER
                    writer.append(MetricsEvent({"a": 2.0}, step, 0.0))
                committed_when_released.append(writer._written)
            finally:
                caller_recorded.set()

        caller = threading.Thread(target=fill, daemon=True)
        caller.start()
        caller.join(120)
        assert not caller.is_alive()
        # released by the round's next chunk, before the round committed anything
        assert committed_when_released == [0]
        assert writer._pressure
        assert writer.flush(60)
        assert writer.status.committed == spool.HIGH_WATER + spool.TAKE_CHUNK
        assert writer.status.dropped == 0
    finally:
        caller_waits.set()
        caller_recorded.set()
        writer.close(60)
