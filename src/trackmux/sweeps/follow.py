"""Following a trial's run from the agent: its metric and the doctor's findings, read-only.

The agent opens the run's spool read-only (``mode=ro``: it never writes while the trainer
lives), reads the rows after the last one it saw, only of the kinds ``metrics`` and
``finding``, and keeps the sweep metric's points and the findings. A read that fails (the
spool not created yet, a busy moment) is tried again at the next poll.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trackmux.core.events import FindingEvent, MetricsEvent
from trackmux.core.spool import codec
from trackmux.core.spool.writer import SPOOL_FILE, connect

PAGE = 5000


@dataclass
class Progress:
    """What the agent knows of a trial's run so far."""

    points: list[tuple[int, float]] = field(default_factory=list)  # (step, metric value)
    findings: list[dict[str, Any]] = field(default_factory=list)
    last_step: int = -1
    #: the trainer's step when each finding was appended (the step of the last metrics
    #: event before it in the spool): how late the doctor said it
    found_at: list[int] = field(default_factory=list)


class Follower:
    def __init__(self, run_dir: Path, metric: str | None) -> None:
        self.run_dir = run_dir
        self.metric = metric
        self.progress = Progress()
        self._after = 0
        self._conn: sqlite3.Connection | None = None

    def poll(self) -> tuple[list[tuple[int, float]], list[dict[str, Any]]]:
        """New (step, value) points of the metric and new findings since the last poll."""
        points: list[tuple[int, float]] = []
        found: list[dict[str, Any]] = []
        try:
            rows = self._rows()
        except (sqlite3.DatabaseError, FileNotFoundError):
            self.close()
            return points, found
        for seq, kind, step, ts, body, crc in rows:
            self._after = seq
            if not isinstance(body, bytes) or not codec.crc_ok(seq, kind, step, ts, body, crc):
                continue
            event = codec.decode(seq, kind, step, ts, body, None)
            if isinstance(event, MetricsEvent):
                self.progress.last_step = max(self.progress.last_step, event.step)
                value = event.data.get(self.metric) if self.metric else None
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    points.append((event.step, float(value)))
            elif isinstance(event, FindingEvent):
                found.append(event.as_dict())
                self.progress.found_at.append(self.progress.last_step)
        self.progress.points += points
        self.progress.findings += found
        return points, found

    def _rows(self) -> list[tuple[Any, ...]]:
        if self._conn is None:
            path = self.run_dir / SPOOL_FILE
            if not path.is_file():
                raise FileNotFoundError(path)
            self._conn = connect(path, readonly=True)
        out: list[tuple[Any, ...]] = []
        while True:
            rows = self._conn.execute(
                "SELECT seq, kind, step, time, body, crc FROM events WHERE seq > ? AND kind "
                "IN ('metrics', 'finding') ORDER BY seq LIMIT ?",
                (out[-1][0] if out else self._after, PAGE)).fetchall()
            out += rows
            if len(rows) < PAGE:
                return out

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
