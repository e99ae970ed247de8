"""The doctor itself: every enabled detector of a run, fed in spool order.

Findings raised by one event are told together (the most severe first, the others in the
same message); a finding within ``TOGETHER_STEPS`` steps of an earlier one names it, so
a KL that runs away, a reward that falls and samples that degenerate read as one story.
A detector that raises is switched off for the run and reported once, as an ``info``
finding of the rule ``doctor`` (so every backend shows it), never stopping anything.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from trackmux.core.events import Event, FindingEvent
from trackmux.doctor.detector import Detector
from trackmux.doctor.findings import Finding, severity_rank

log = logging.getLogger("trackmux")

TOGETHER_STEPS = 50
#: the resolved settings' entry for the user's key -> signal mappings (config.resolve)
SIGNALS_KEY = "signals"


class Doctor:
    """Detectors of one run. ``feed`` and ``tick`` return new findings as events."""

    def __init__(self, rules: Mapping[str, Mapping[str, Any]],
                 detectors: Sequence[Detector] | None = None) -> None:
        from trackmux.doctor.dialects import Signals

        rules = dict(rules)
        self.signals = Signals(rules.pop(SIGNALS_KEY, None))
        if detectors is None:
            from trackmux.doctor.registry import rules as known

            specs = known()
            detectors = [specs[name].factory(params) for name, params in rules.items()]
            for detector, name in zip(detectors, rules, strict=False):
                detector.rule = detector.rule or name
        for detector in detectors:
            if isinstance(detector, Detector):
                detector.bind(self.signals)
        self.detectors = list(detectors)
        self._told_keys = False
        self.findings: list[FindingEvent] = []
        self._by_kind: dict[str, list[Detector]] = {}

    @property
    def kinds(self) -> frozenset[str] | None:
        """The event kinds some detector reads (None: a detector reads every kind)."""
        wanted: set[str] = set()
        for detector in self.detectors:
            if detector.kinds is None:
                return None
            wanted |= detector.kinds
        return frozenset(wanted)

    def _for(self, kind: str) -> list[Detector]:
        """The detectors that read ``kind``, worked out once per kind (a run has a few)."""
        hit = self._by_kind.get(kind)
        if hit is None:
            hit = self._by_kind[kind] = [d for d in self.detectors
                                         if d.kinds is None or kind in d.kinds]
        return hit

    def feed(self, event: Event) -> list[FindingEvent]:
        if event.kind == "finding":  # our own output, read back from the spool
            return []
        raised: list[Finding] = []
        for detector in tuple(self._for(event.kind)):
            try:
                raised.extend(detector.update(event))
            except Exception as exc:
                raised.append(self._broken(detector, "update", exc, event.step, event.time))
        if self.signals.too_many and not self._told_keys:
            from trackmux.doctor.dialects import MAX_KEYS

            self._told_keys = True
            raised.append(Finding("doctor", "info", event.step, (), (
                f"a metrics event at step {event.step} has more than {MAX_KEYS} keys; the "
                f"doctor reads its first {MAX_KEYS} (docs/doctor.md, Limits)"), event.time))
        return self._tell(raised) if raised else []

    def explain(self) -> dict[str, Any]:
        """Which key fed which signal, and which rules read nothing (``--explain``)."""
        out = self.signals.explain()
        out["rules"] = {d.rule: list(d.read) for d in self.detectors if d.read}
        out["unread_rules"] = sorted(d.rule for d in self.detectors if not d.read)
        return out

    def coverage(self) -> dict[str, Any]:
        """Which signals it read from which keys, which rules could not run and why, and
        whether the run is judged at all (doctor/coverage.py)."""
        from trackmux.doctor import coverage

        read = self.signals.read()
        return coverage.build(
            read, {d.rule: bool(d.read) for d in self.detectors},
            {d.rule: coverage.why_not(d.params, d.kinds, read) for d in self.detectors
             if not d.read}, self.signals.declared_unseen(), self.signals.keys_seen)

    def tick(self, now: float, alive: bool) -> list[FindingEvent]:
        raised: list[Finding] = []
        for detector in list(self.detectors):
            try:
                raised.extend(detector.tick(now, alive))
            except Exception as exc:
                raised.append(self._broken(detector, "tick", exc, 0, now))
        return self._tell(raised) if raised else []

    def _broken(self, detector: Detector, method: str, exc: Exception, step: int,
                time: float) -> Finding:
        self.detectors.remove(detector)
        self._by_kind.clear()
        message = (f"the detector of rule {detector.rule!r} raised {type(exc).__name__}: "
                   f"{exc} in {method}(); it is switched off for this run")
        log.warning("trackmux doctor: %s", message)
        return Finding("doctor", "info", step, (detector.rule,), message, time)

    def _tell(self, raised: list[Finding]) -> list[FindingEvent]:
        raised.sort(key=lambda f: -severity_rank(f.severity))
        head, rest = raised[0], raised[1:]
        message = head.message
        keys = list(head.keys)
        if rest:
            message += "; " + "; ".join(f.message for f in rest)
            for f in rest:
                keys += [k for k in f.keys if k not in keys]
        onset = min(f.step for f in raised)
        earlier = [f for f in self.findings if f.rule not in {x.rule for x in raised}
                   and f.rule != "doctor" and 0 <= onset - f.step <= TOGETHER_STEPS]
        if earlier:
            message += " (after " + ", ".join(f"{f.rule} at step {f.step}"
                                              for f in earlier[-3:]) + ")"
        evidence = [e for f in raised for e in f.evidence]
        event = FindingEvent(head.rule, head.severity, tuple(keys), message,
                             head.step, head.time, evidence=tuple(dict.fromkeys(evidence)))
        self.findings.append(event)
        return [event]
