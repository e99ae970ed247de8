"""The reader interface: what every wing (UI, report, doctor, CLIs) asks of a place
that holds runs. Two implementations: spools on disk (trackmux/readers/spool.py) and
the team store (trackmux/store/read.py), chosen by URI in :func:`trackmux.readers.open_source`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from trackmux.core.events import Event, FindingEvent, SamplesEvent, latest_findings


@dataclass(frozen=True)
class RunEntry:
    """One run as a list shows it. ``ref`` names it inside its source (a run folder for
    spools, the store's id for the store); ``host`` and ``user`` are the trainer's."""

    ref: str
    run_id: str
    project: str
    name: str
    host: str
    user: str
    state: str
    started_at: float | None
    finished_at: float | None
    events: int
    last_seq: int
    last_step: int | None
    meta: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "run_id": self.run_id, "project": self.project,
                "name": self.name, "host": self.host, "user": self.user,
                "state": self.state, "started_at": self.started_at,
                "finished_at": self.finished_at, "events": self.events,
                "last_seq": self.last_seq, "last_step": self.last_step}


@dataclass(frozen=True)
class Series:
    """One metric of one run from a cursor: parallel lists, and the cursor to ask from
    next time (the highest seq seen)."""

    seqs: list[int]
    steps: list[int]
    times: list[float]
    values: list[float]
    cursor: int

    @classmethod
    def of(cls, rows: Sequence[tuple[Any, ...]], after: int) -> Series:
        return cls([int(r[0]) for r in rows], [int(r[1]) for r in rows],
                   [float(r[2]) for r in rows], [float(r[3]) for r in rows],
                   int(rows[-1][0]) if rows else after)


@runtime_checkable
class RunSource(Protocol):
    """Where runs are read from. Not for training code: the trainer writes its spool."""

    uri: str

    def runs(self, project: str | None = None) -> list[RunEntry]: ...
    def find(self, arg: str) -> RunEntry: ...
    def keys(self, run: RunEntry) -> list[str]: ...
    def series(self, run: RunEntry, key: str, after: int = 0) -> Series: ...
    def events(self, run: RunEntry, kind: str, after: int = 0) -> list[Event]: ...
    def samples(self, run: RunEntry, key: str, step: int) -> list[SamplesEvent]: ...
    def findings(self, run: RunEntry) -> list[dict[str, Any]]: ...
    def config(self, run: RunEntry) -> dict[str, Any]: ...
    def provenance(self, run: RunEntry) -> dict[str, Any] | None: ...
    def replica(self, run: RunEntry, root: Path) -> Path: ...
    def close(self) -> None: ...


def best_effort_findings(events: Sequence[Event]) -> list[dict[str, Any]]:
    """Stored findings as dicts, ordered by step (what the live doctor appended), one per
    finding id in its latest state (an update of a finding is appended as a new event)."""
    found = latest_findings(e for e in events if isinstance(e, FindingEvent))
    return [f.as_dict() for f in sorted(found, key=lambda f: (f.step, f.seq))]
