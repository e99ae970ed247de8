"""The doctor as a watcher of a live run (core/delivery/watch.py builds it by name in the
delivery process, or on a thread of the trainer with ``delivery="thread"``).

Every run that logs an RL signal the doctor knows, or declared keys, is told what the
doctor reads of it (doctor/coverage.py): once the run has logged metrics at :data:`SETTLE`
steps, and again when the trainer is gone if it changed (or first then, for a run of fewer
steps). A supervised loop's loss, or keys it reads nothing of, are not told (a line on
every script would be noise; ``trackmux doctor`` says their coverage). A run the doctor
cannot judge (no reward and no KL read) although it logs training signals it knows (an
entropy, a length ...), and a run that declared keys (``init(signals=...)``,
``[signals]``), are told at :data:`SETTLE` as an ``info`` finding of rule ``coverage``
("not judged: ...", what was read of the declared keys): something to act on. Every other
telling is a note, a text event of key ``doctor/coverage``: the console prints it as its
own line, backends that show text show it, and nothing that counts findings (the UI's
column, alerts, stores of findings, ``run.findings()``) sees it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trackmux.core.backends.contract import RunInfo
from trackmux.core.delivery.watch import WatchEvent
from trackmux.core.events import Event
from trackmux.doctor.engine import Doctor

TARGET = "trackmux.doctor.live:watcher"
#: logged steps after which the run's key names are taken as settled
SETTLE = 5


class DoctorWatcher:
    def __init__(self, doctor: Doctor) -> None:
        self.doctor = doctor
        #: the runner decodes only these kinds of event for the doctor
        self.kinds = doctor.kinds
        self._steps: set[int] = set()
        self._settled = False
        #: the last metrics event's step (None: none yet), and the coverage line said last
        self._last_step: int | None = None
        self._said = ""

    def feed(self, event: Event) -> Sequence[WatchEvent]:
        found: Sequence[WatchEvent] = self.doctor.feed(event)
        if event.kind != "metrics":
            return found
        self._last_step = event.step
        if self._settled:
            return found
        self._steps.add(event.step)
        if len(self._steps) < SETTLE:
            return found
        self._settled = True
        self._steps.clear()
        return [*found, *self._coverage(event.step, event.time, settled=True)]

    def tick(self, now: float, alive: bool) -> Sequence[WatchEvent]:
        found: Sequence[WatchEvent] = self.doctor.tick(now, alive)
        if alive or self._last_step is None:
            return found
        return [*found, *self._coverage(self._last_step, now, settled=False)]

    def _coverage(self, step: int, time: float, settled: bool) -> list[WatchEvent]:
        """The coverage, if it is not what was said last: a finding where there is
        something to act on, once, when the keys settled; else a note."""
        from trackmux.doctor import coverage

        now = self.doctor.coverage()
        text = coverage.line(now)
        if text == self._said or not coverage.said_live(now):
            return []
        self._said = text
        if settled:
            told = coverage.live_finding(now, step, time)
            if told is not None:
                return [told]
        return [coverage.live_note(now, step, time)]


def watcher(options: Mapping[str, Any], info: RunInfo) -> DoctorWatcher:
    """``options``: ``{"rules": {rule: params}}`` as config.resolve checked them."""
    return DoctorWatcher(Doctor(options["rules"]))
