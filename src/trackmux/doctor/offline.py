"""The doctor over a run's spool, finished or live: the same detectors, in spool order.

A live run (its lock held) is ticked once at the end with the clock, so a run that stopped
logging long ago while its trainer lives is found stalled, as the live doctor would.

Some findings can only be judged live: a ``stall`` of a trainer that then crashed leaves no
trace in the events (no later step shows the gap), and a rule's thresholds may have been
another rules file's. So :func:`diagnose_run` merges the findings the live doctor stored in
the spool with the re-run's, one per finding id in its latest state, the stored one kept
where both have it."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trackmux.core.events import FindingEvent, latest_findings
from trackmux.doctor.config import resolve
from trackmux.doctor.coverage import RULE as COVERAGE_RULE
from trackmux.doctor.engine import Doctor


@dataclass
class Diagnosis:
    """A run's findings (stored live and re-run, merged, by step), the spool damage the
    read went past (with damage, the findings cover only what could be read) and the
    doctor's explanation (which key fed which signal, which rules read nothing:
    ``trackmux doctor --explain``). ``coverage`` (doctor/coverage.py) says what the re-run
    read and whether the run is judged at all; the live doctor's own coverage finding is
    left out of ``findings`` (the re-run read the same events)."""

    findings: list[FindingEvent]
    damage: list[str] = field(default_factory=list)
    stored: int = 0
    explain: dict[str, Any] = field(default_factory=dict)
    coverage: dict[str, Any] = field(default_factory=dict)


def diagnose(run_dir: Path, setting: Any = True) -> list[FindingEvent]:
    """Every finding of the rules ``setting`` enables (config.resolve) over ``run_dir``,
    re-run over its events (the live doctor's stored findings left out), one per finding
    id in its latest state (a finding that grew was updated while its episode lasted)."""
    return latest_findings(_rerun(run_dir, setting, [], [])[0])


def diagnose_explained(run_dir: Path, setting: Any = True
                       ) -> tuple[list[FindingEvent], dict[str, Any]]:
    """The re-run's findings and the doctor's explanation (``trackmux doctor --explain``)."""
    return _rerun(run_dir, setting, [], [])


def _rerun(run_dir: Path, setting: Any, damage: list[str], stored: list[FindingEvent]
           ) -> tuple[list[FindingEvent], dict[str, Any]]:
    """The re-run's findings and explanation; the spool's damage and stored findings are
    appended to the lists given (the same read)."""
    from trackmux.core.spool.reader import SpoolReader
    from trackmux.core.spool.runs import lock_is_held

    rules = resolve(setting)
    reader = SpoolReader(run_dir)
    try:
        declared = live_declaration(reader.meta())
        if declared and rules:  # the run's own declaration; --rules' [signals] wins
            rules["signals"] = {**declared, **rules.get("signals", {})}
        doctor = Doctor(rules)
        found: list[FindingEvent] = []
        for event in reader.iter_events(page=5000):
            if isinstance(event, FindingEvent):
                stored.append(event)
            found += doctor.feed(event)
        found += doctor.tick(time.time(), lock_is_held(run_dir))
        damage += reader.damage.errors
        return found, {**doctor.explain(), "coverage": doctor.coverage()}
    finally:
        reader.close()


def live_declaration(meta: dict[str, Any]) -> dict[str, list[str]]:
    """The keys ``init(signals=...)`` (or the live rules file) declared for the run, as
    the live doctor's options in the spool's meta keep them; {} if none."""
    from trackmux.doctor.live import TARGET

    options = (meta.get("watcher_options") or {}).get(TARGET) or {}
    declared = (options.get("rules") or {}).get("signals") or {}
    return {str(k): list(v) for k, v in declared.items() if isinstance(v, list)}


def diagnose_run(run_dir: Path, setting: Any = True) -> Diagnosis:
    """What ``trackmux doctor`` reports: the stored findings of the live doctor, whatever
    ``setting`` says (they were judged on the live run), plus the re-run's findings that
    are not among them; one per finding id, in its latest state (of the same revision,
    the stored one)."""
    damage: list[str] = []
    stored: list[FindingEvent] = []
    found, why = _rerun(run_dir, setting, damage, stored)
    coverage = why.pop("coverage")
    stored = [f for f in stored if f.rule != COVERAGE_RULE]
    merged = latest_findings([*found, *stored])
    merged.sort(key=lambda f: (f.step, f.seq == 0, f.seq))
    return Diagnosis(merged, list(dict.fromkeys(damage)), len(stored), why, coverage)


def coverage_of(run_dir: Path, setting: Any = True) -> dict[str, Any]:
    """What the doctor reads of ``run_dir`` (doctor/coverage.py), from a re-run."""
    return dict(_rerun(run_dir, setting, [], [])[1]["coverage"])


def scan_coverage(run_dir: Path, setting: Any = True) -> dict[str, Any]:
    """The coverage of a run's spool, read cheaply for the UI and the report: the rules
    are fed one metrics event per distinct key set and one event per kind and key of the
    rest (what a rule could read, not what it would find), with the run's own declaration
    (``init(signals=...)``) as ``trackmux doctor`` uses it."""
    from trackmux.core.events import EVENT_KINDS
    from trackmux.core.spool.reader import SpoolReader

    rules = resolve(setting)
    reader = SpoolReader(run_dir)
    try:
        declared = live_declaration(reader.meta())
        if declared and rules:
            rules["signals"] = {**declared, **rules.get("signals", {})}
        doctor = Doctor(rules)
        wanted = doctor.kinds
        skip = frozenset(EVENT_KINDS) - wanted if wanted is not None else frozenset()
        seen: set[Any] = set()
        for event in reader.iter_events(page=5000, skip=skip | {"finding"}):
            data = getattr(event, "data", None)
            mark = (tuple(data) if event.kind == "metrics" and isinstance(data, Mapping)
                    else (event.kind, getattr(event, "key", "")))
            if mark in seen:
                continue
            if len(seen) < 10_000:
                seen.add(mark)
            doctor.feed(event)
        return doctor.coverage()
    finally:
        reader.close()
