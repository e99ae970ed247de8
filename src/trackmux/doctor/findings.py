"""A finding as detectors raise it, before the engine tells related ones together."""

from __future__ import annotations

from dataclasses import dataclass, field

from trackmux.core.events import SEVERITIES, FindingEvent


def severity_rank(severity: str) -> int:
    """0 info, 1 warning, 2 critical (unknown: -1)."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else -1


@dataclass
class Finding:
    """One detector's finding: ``rule``, ``severity``, onset ``step``, the ``keys`` and a
    ``message`` a researcher can act on. ``time`` is the wall time of the event that
    completed it (0: unknown). ``evidence``: ``(key, step, value)`` of every number the
    message quotes at a step, each the value logged at that step."""

    rule: str
    severity: str
    step: int
    keys: tuple[str, ...]
    message: str
    time: float = 0.0
    related: list[Finding] = field(default_factory=list)
    evidence: list[tuple[str, int, float | str]] = field(default_factory=list)

    def event(self) -> FindingEvent:
        return FindingEvent(self.rule, self.severity, self.keys, self.message, self.step,
                            self.time, evidence=tuple(self.evidence))
