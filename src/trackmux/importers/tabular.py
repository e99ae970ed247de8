"""verl's file logger (JSONL of ``{"step": N, "data": {...}}``) and plain JSONL or CSV
with a step column.

A row's step is its ``step`` (or ``global_step``, ``_step``, ``iteration``, ``iter``,
``trainer/global_step``) column; a file without one numbers its rows from 1. Its time is
its ``_timestamp``/``timestamp``/``wall_time``/``time`` column (seconds since the epoch)
when it has one, else the file's modification time. Nested objects are flattened with
``/``; text values are left out. The cursor is the byte offset after the last row read
(CSV also keeps the header), so a file that grew adds only its new rows.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from trackmux.core.events import MetricsEvent
from trackmux.importers.base import Chunk, Damage, SourceError, SourceRun, flat_numbers, scalar
from trackmux.importers.lines import LineFile

STEP_COLUMNS = ("step", "global_step", "_step", "trainer/global_step", "iteration", "iter",
                "Step")
TIME_COLUMNS = ("_timestamp", "timestamp", "wall_time", "time")


class TableFile(LineFile):
    """One JSONL or CSV file: one run."""

    def __init__(self, path: Path, fmt: str) -> None:
        self.format = fmt
        super().__init__(path)

    def take_line(self, raw: bytes, complete: bool, cursor: dict[str, Any], chunk: Chunk,
                  offset: int, mtime: float, live: bool) -> bool:
        row, why = self._row(raw, cursor)
        if row is None and why and not complete:
            chunk.damage.append(Damage(str(self.path), offset, 1,
                                       f"truncated row at the end ({why})", lasting=False))
            return False
        if why:
            chunk.damage.append(Damage(str(self.path), offset, 1, why))
        if row is not None:
            step, values, when = self._event(row, cursor)
            if values:
                chunk.events.append(MetricsEvent(values, step, when or mtime))
        return True

    def _row(self, raw: bytes, cursor: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        """The row of one line (None for a blank line or the CSV header) and what is wrong
        with it ("" when nothing)."""
        if not raw.strip():
            return None, ""
        if self.format == "csv":
            try:
                cells = next(csv.reader([raw.decode("utf-8", errors="replace")]))
            except csv.Error as exc:
                return None, f"unreadable CSV row: {exc}"
            header = cursor.get("header")
            if header is None:
                cursor["header"] = [c.strip() for c in cells]
                return None, ""
            if len(cells) != len(header):
                return None, f"{len(cells)} cells, the header has {len(header)}"
            return dict(zip(header, cells, strict=True)), ""
        try:
            row = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return None, f"not JSON: {exc}"
        if not isinstance(row, dict):
            return None, "a JSON line that is not an object"
        return row, ""

    def _event(self, row: dict[str, Any], cursor: dict[str, Any]
               ) -> tuple[int, dict[str, float | int], float | None]:
        cursor["ordinal"] = int(cursor.get("ordinal", 0)) + 1
        data = row.get("data")
        if isinstance(data, dict) and "step" in row:  # verl's file logger
            values = flat_numbers(data)
        else:
            values = flat_numbers(row)
        step: Any = None
        for name in STEP_COLUMNS:
            if name in row:
                step = scalar(row[name])
                values.pop(name, None)
                break
        when: Any = None
        for name in TIME_COLUMNS:
            if name in row:
                when = scalar(row[name])
                values.pop(name, None)
                break
        if not isinstance(step, (int, float)) or step != step or step < 0:
            step = cursor["ordinal"]
        return int(step), values, float(when) if isinstance(when, (int, float)) else None


def _one(source: str, fmt: str) -> list[SourceRun]:
    path = Path(source).expanduser()
    if not path.is_file():
        raise SourceError(f"{source}: not a file ({fmt} is one file)")
    return [TableFile(path, fmt)]


def find_jsonl(source: str, options: Mapping[str, Any]) -> list[SourceRun]:
    return _one(source, "jsonl")


def find_csv(source: str, options: Mapping[str, Any]) -> list[SourceRun]:
    return _one(source, "csv")
