"""The doctor itself: every enabled detector of a run, fed in spool order.

Findings raised by one event are told together (the most severe first, the others in the
same message); a finding within ``TOGETHER_STEPS`` steps of an earlier one names it, so
a KL that runs away, a reward that falls and samples that degenerate read as one story.
A detector that raises is switched off for the run and reported once, as an ``info``
finding of the rule ``doctor`` (so every backend shows it), never stopping anything.

Every finding has an id (its rule, onset step and first key); one whose rule said how it
goes bad grows while its episode lasts (doctor/episodes.py): its worst value, where it is
now, what moved with it and a severity that rises past the rule's critical line, each
update a new event of the same id.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from trackmux.core.events import Event, FindingEvent, MetricsEvent, finding_id
from trackmux.doctor.detector import Detector
from trackmux.doctor.episodes import MAX_FOLLOWED, Context, Episode
from trackmux.doctor.findings import Finding, severity_rank
from trackmux.doctor.stats import finite

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
        #: the first event of every finding (updates are not kept here)
        self.findings: list[FindingEvent] = []
        self._by_kind: dict[str, list[Detector]] = {}
        self.context = Context()
        #: episodes that grow, by id, and the ones followed, by their first key
        self.episodes: dict[str, Episode] = {}
        self._following: dict[str, list[Episode]] = {}

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
        grown: list[FindingEvent] = []
        if isinstance(event, MetricsEvent):
            self.context.add(self.signals.resolve(event.data).by_signal, event.data,
                             event.step)
            if self._following:
                grown = self._grow(event)
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
        return grown + self._tell(raised, event) if raised else grown

    def _grow(self, event: MetricsEvent) -> list[FindingEvent]:
        """The followed episodes' new points; the updates due now."""
        out: list[FindingEvent] = []
        data = event.data
        for key, episodes in self._following.items():
            if key not in data:
                continue
            value = finite(data[key])
            if value is None:
                continue
            for episode in episodes:
                if episode.observe(event.step, value):
                    out.append(episode.event(event.time, self.context))
        return out

    def _follow(self, episode: Episode, time: float) -> list[FindingEvent]:
        """Start following ``episode``; a older one of the same rule and key is done (its
        last state told if it changed), as is the oldest beyond MAX_FOLLOWED."""
        out: list[FindingEvent] = []
        same = self._following.setdefault(episode.key, [])
        for old in [e for e in same if e.rule == episode.rule]:
            same.remove(old)
            if old.changed:
                out.append(old.event(time, self.context))
        same.append(episode)
        self.episodes[episode.id] = episode
        if len(self.episodes) > MAX_FOLLOWED:
            oldest = self.episodes.pop(next(iter(self.episodes)))
            followed = self._following.get(oldest.key, [])
            if oldest in followed:
                followed.remove(oldest)
        return out

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
        present = {k for d in self.detectors if d.read for k in (d.kinds or ())}
        return coverage.build(
            read, {d.rule: bool(d.read) for d in self.detectors},
            {d.rule: coverage.why_not(d.params, d.kinds, read, present)
             for d in self.detectors if not d.read},
            self.signals.declared_unseen(), self.signals.keys_seen)

    def tick(self, now: float, alive: bool) -> list[FindingEvent]:
        """Wall time for the rules that need it; once the trainer is gone (``alive``
        false), the last state of every episode that changed since its last event."""
        raised: list[Finding] = []
        for detector in list(self.detectors):
            try:
                raised.extend(detector.tick(now, alive))
            except Exception as exc:
                raised.append(self._broken(detector, "tick", exc, 0, now))
        found = self._tell(raised) if raised else []
        if not alive:
            found += [e.event(now, self.context) for e in self.episodes.values() if e.changed]
        return found

    def _broken(self, detector: Detector, method: str, exc: Exception, step: int,
                time: float) -> Finding:
        self.detectors.remove(detector)
        self._by_kind.clear()
        message = (f"the detector of rule {detector.rule!r} raised {type(exc).__name__}: "
                   f"{exc} in {method}(); it is switched off for this run")
        log.warning("trackmux doctor: %s", message)
        return Finding("doctor", "info", step, (detector.rule,), message, time)

    def _tell(self, raised: list[Finding], at: Event | None = None) -> list[FindingEvent]:
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
        evidence = list(dict.fromkeys(e for f in raised for e in f.evidence))
        fid = finding_id(head.rule, head.step, keys)
        if fid in self.episodes or any(f.id == fid for f in self.findings[-64:]):
            fid += f"#{len(self.findings)}"  # another finding of that rule, step and key
        if not (head.direction and keys):
            event = FindingEvent(head.rule, head.severity, tuple(keys), message, head.step,
                                 head.time, evidence=tuple(evidence), id=fid)
            self.findings.append(event)
            return [event]
        found_at = at.step if at is not None else head.step
        episode = Episode(fid, head, head.severity, message, tuple(keys), evidence, found_at,
                          self.context.before(head.step if head.began is None
                                              else min(head.began, head.step)))
        out = self._follow(episode, head.time)
        value = finite(at.data.get(episode.key)) if isinstance(at, MetricsEvent) else None
        if value is not None:
            episode.observe(at.step if at is not None else head.step, value)
        event = episode.event(head.time, self.context)
        self.findings.append(event)
        return [*out, event]
