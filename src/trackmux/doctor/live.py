"""The doctor as a watcher of a live run (core/delivery/watch.py builds it by name in the
delivery process, or on a thread of the trainer with ``delivery="thread"``).

Once the run has logged metrics at :data:`SETTLE` steps, a run the doctor cannot judge
(no reward and no KL read) although it logs training signals it knows (an entropy, a
length ...) is told so, once, as an ``info`` finding of rule ``coverage`` ("not judged:
..."), so its silence is never read as health; so is a run that declared keys
(``init(signals=...)``, ``[signals]``): what was read, and declared keys never logged.
Other runs get no such line: a finding would be an extra event in every run's spool;
``trackmux doctor``, the UI and the report say every run's coverage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trackmux.core.backends.contract import RunInfo
from trackmux.core.events import Event, FindingEvent
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

    def feed(self, event: Event) -> Sequence[FindingEvent]:
        found = self.doctor.feed(event)
        if self._settled or event.kind != "metrics":
            return found
        self._steps.add(event.step)
        if len(self._steps) < SETTLE:
            return found
        self._settled = True
        from trackmux.doctor import coverage

        told = coverage.live_finding(self.doctor.coverage(), event.step, event.time)
        return [*found, told] if told is not None else found

    def tick(self, now: float, alive: bool) -> Sequence[FindingEvent]:
        return self.doctor.tick(now, alive)


def watcher(options: Mapping[str, Any], info: RunInfo) -> DoctorWatcher:
    """``options``: ``{"rules": {rule: params}}`` as config.resolve checked them."""
    return DoctorWatcher(Doctor(options["rules"]))
