"""When a backend alerts for a finding that grows (docs/plugins.md "Findings that grow").

The doctor appends an update of a finding while its episode lasts; an alert (a terminal
line, an email, a chat message) is for what a person must act on: a finding first seen,
or an update whose severity rose above what was alerted for its id, not every new worst
value. Backends that also store rows store every update.
"""

from __future__ import annotations

from trackmux.core.events import SEVERITIES, FindingEvent

#: ids remembered (a run with more findings than this alerts again for the oldest)
MAX_IDS = 100_000


class AlertGate:
    """Per finding id, the highest severity alerted so far. One per backend instance."""

    def __init__(self) -> None:
        self._alerted: dict[str, int] = {}

    def due(self, event: FindingEvent) -> bool:
        """True (and remembered) for a finding first seen or a severity that rose."""
        rank = SEVERITIES.index(event.severity) if event.severity in SEVERITIES else -1
        fid = event.finding_id
        alerted = self._alerted.get(fid)
        if alerted is not None and rank <= alerted:
            return False
        if alerted is not None or len(self._alerted) < MAX_IDS:
            self._alerted[fid] = rank
        return True
