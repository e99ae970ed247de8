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
    message quotes at a step, each the value logged at that step.

    A finding that grows (doctor/episodes.py) says how its first key goes bad:
    ``direction`` +1 (higher is worse) or -1 (lower is worse; 0: it does not grow),
    ``level`` the level it left (None: unknown), ``critical`` the rule's critical line,
    past which the episode becomes ``critical`` (None: none), and ``peak`` the worst
    ``(step, value)`` its rule saw from the onset to where it was sure (rules/series.py
    fills it in). ``began``: the step the change began, where the curve last stood at the
    level it left (None: the onset); what moved with the episode is read from before it,
    so a curve that left its level long before the onset its rule could date (a slow fall
    found late) is not told beside signals that had already moved with it."""

    rule: str
    severity: str
    step: int
    keys: tuple[str, ...]
    message: str
    time: float = 0.0
    related: list[Finding] = field(default_factory=list)
    evidence: list[tuple[str, int, float | str]] = field(default_factory=list)
    direction: int = 0
    level: float | None = None
    critical: float | None = None
    peak: tuple[int, float] | None = None
    began: int | None = None

    def event(self) -> FindingEvent:
        return FindingEvent(self.rule, self.severity, self.keys, self.message, self.step,
                            self.time, evidence=tuple(self.evidence))

    def grows(self, direction: int, level: float | None = None,
              critical: float | None = None) -> Finding:
        """This finding, followed while its episode lasts (see the class docstring)."""
        self.direction, self.level, self.critical = direction, level, critical
        return self
