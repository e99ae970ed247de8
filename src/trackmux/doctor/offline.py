"""The doctor over a run's spool, finished or live: the same detectors, in spool order.

A live run (its lock held) is ticked once at the end with the clock, so a run that stopped
logging long ago while its trainer lives is found stalled, as the live doctor would."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from trackmux.core.events import FindingEvent
from trackmux.doctor.config import resolve
from trackmux.doctor.engine import Doctor


def diagnose(run_dir: Path, setting: Any = True) -> list[FindingEvent]:
    """Every finding of the rules ``setting`` enables (config.resolve) over ``run_dir``."""
    return diagnose_explained(run_dir, setting)[0]


def diagnose_explained(run_dir: Path, setting: Any = True
                       ) -> tuple[list[FindingEvent], dict[str, Any]]:
    """The findings and the doctor's explanation (which key fed which signal, which
    rules read nothing: ``trackmux doctor --explain``)."""
    from trackmux.core.spool.reader import SpoolReader
    from trackmux.core.spool.runs import lock_is_held

    doctor = Doctor(resolve(setting))
    reader = SpoolReader(run_dir)
    try:
        found: list[FindingEvent] = []
        for event in reader.iter_events(page=5000):
            found += doctor.feed(event)
        found += doctor.tick(time.time(), lock_is_held(run_dir))
        return found, doctor.explain()
    finally:
        reader.close()
