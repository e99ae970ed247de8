"""A spool writer whose commits a test holds on purpose.

A test that checks what is *not yet* committed (steps logged, the checkpoint not written)
cannot rely on ``COMMIT_INTERVAL`` being long: any wake of the writer (a flush whose wake
arrived while the writer was already committing, a queue past ``LOW_WATER``) commits early,
and on a loaded machine it does (issue 46). :class:`HeldPacer` takes the clock away (the
interval never elapses) and lets a test wait until the writer is parked with no wake
pending, so from then until the next explicit wake nothing is committed, by construction.

Use the ``held_commits`` fixture (trackmux.testing.pytest_plugin) or :func:`hold_commits`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from trackmux.core.spool import writer


class HeldPacer(writer.CommitPacer):
    """Commits only at a wake (flush, close, meta, backpressure); time never passes."""

    def __init__(self) -> None:
        super().__init__()
        self._cond = threading.Condition()
        self._woken = False
        self._parked = False
        #: wakes asked for so far (a test may assert that something woke the writer)
        self.wakes = 0

    def wake(self) -> None:
        with self._cond:
            self._woken = True
            self.wakes += 1
            self._cond.notify_all()

    def wait(self, interval: float) -> None:
        with self._cond:
            self._parked = True
            self._cond.notify_all()
            while not self._woken:
                self._cond.wait()
            self._woken = False
            self._parked = False

    def settle(self, timeout: float = 60.0) -> None:
        """Return once the writer waits for a wake and none is pending: from here until the
        next wake it commits nothing. A wake that is pending is let through first."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._parked and not self._woken, timeout):
                raise TimeoutError(f"the spool writer did not park within {timeout} s")


class HeldCommits:
    """The pacers of the writers made while held, newest last."""

    def __init__(self) -> None:
        self.pacers: list[HeldPacer] = []

    def _new(self) -> HeldPacer:
        pacer = HeldPacer()
        self.pacers.append(pacer)
        return pacer

    def settle(self, timeout: float = 60.0) -> None:
        """:meth:`HeldPacer.settle` for every writer made so far."""
        if not self.pacers:
            raise AssertionError("no spool writer was made while commits were held")
        for pacer in self.pacers:
            pacer.settle(timeout)


@contextlib.contextmanager
def hold_commits() -> Iterator[HeldCommits]:
    """Spool writers made inside the block commit only when woken (see module doc)."""
    held = HeldCommits()
    previous = writer.new_pacer
    writer.new_pacer = held._new
    try:
        yield held
    finally:
        writer.new_pacer = previous
