"""Reading an imported run back, and one ``trackmux import`` call's result."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson

from trackmux.core.events import Event, MetricsEvent
from trackmux.core.spool.reader import SpoolReader


class Imported:
    """One ``trackmux import`` call: exit code, output, and the ``--json`` objects."""

    def __init__(self, code: int, output: str, stderr: str) -> None:
        self.code = code
        self.output = output
        self.stderr = stderr
        self.runs: list[dict[str, Any]] = [orjson.loads(line) for line in output.splitlines()
                                           if line.startswith("{")]

    @property
    def run(self) -> dict[str, Any]:
        assert len(self.runs) == 1, self.output
        return self.runs[0]


def events(run_dir: str | Path) -> list[Event]:
    reader = SpoolReader(Path(run_dir))
    try:
        return list(reader.iter_events())
    finally:
        reader.close()


def series(run_dir: str | Path) -> dict[str, list[tuple[int, float]]]:
    """Every metric of a run as (step, value) in spool order."""
    out: dict[str, list[tuple[int, float]]] = {}
    for event in events(run_dir):
        if isinstance(event, MetricsEvent):
            for key, value in event.data.items():
                out.setdefault(key, []).append((event.step, value))
    return out


def meta(run_dir: str | Path) -> dict[str, Any]:
    reader = SpoolReader(Path(run_dir))
    try:
        return reader.meta()
    finally:
        reader.close()


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b
