"""The doctor as a watcher of a live run (core/delivery/watch.py builds it by name in the
delivery process, or on a thread of the trainer with ``delivery="thread"``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trackmux.core.backends.contract import RunInfo
from trackmux.core.events import Event, FindingEvent
from trackmux.doctor.engine import Doctor

TARGET = "trackmux.doctor.live:watcher"


class DoctorWatcher:
    def __init__(self, doctor: Doctor) -> None:
        self.doctor = doctor
        #: the runner decodes only these kinds of event for the doctor
        self.kinds = doctor.kinds

    def feed(self, event: Event) -> Sequence[FindingEvent]:
        return self.doctor.feed(event)

    def tick(self, now: float, alive: bool) -> Sequence[FindingEvent]:
        return self.doctor.tick(now, alive)


def watcher(options: Mapping[str, Any], info: RunInfo) -> DoctorWatcher:
    """``options``: ``{"rules": {rule: params}}`` as config.resolve checked them."""
    return DoctorWatcher(Doctor(options["rules"]))
