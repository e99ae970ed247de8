"""Reading a run's findings, for other packages (report, UI, CLI).

    load_findings(run_dir) -> [{"rule", "severity", "step", "keys", "message"}, ...]

ordered by step, one per finding id in its latest state (a finding that grows is appended
again at each update: core/events.py ``FindingEvent``). The findings the live doctor
appended to the spool are read back; a run that has none (the doctor was off, or an older
trackmux wrote it) is diagnosed now with the default rules, the same detectors over the
same events.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trackmux.core.events import FindingEvent, latest_findings


def stored_findings(run_dir: Path) -> list[FindingEvent] | None:
    """The findings in the spool; None if the doctor never ran on this run live."""
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run_dir)
    try:
        found = [e for e in reader.events_of_kind("finding") if isinstance(e, FindingEvent)]
        if found:
            return found
        from trackmux.doctor.live import TARGET

        return [] if TARGET in (reader.meta().get("watchers") or []) else None
    finally:
        reader.close()


def load_stored_findings(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]] | None:
    """Only what the live doctor stored, without diagnosing (one read of the finding rows:
    cheap enough for a run list over hundreds of runs); None if it never watched the run."""
    found = stored_findings(Path(run_dir))
    if found is None:
        return None
    return [f.as_dict() for f in sorted(latest_findings(found), key=lambda f: (f.step, f.seq))]


def load_findings(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    path = Path(run_dir)
    found = stored_findings(path)
    if found is None:
        from trackmux.doctor.offline import diagnose

        found = diagnose(path)
    return [f.as_dict() for f in sorted(latest_findings(found), key=lambda f: (f.step, f.seq))]
