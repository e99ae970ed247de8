"""trackmux-csv: metrics as CSV rows ``step,time,key,value``; exactly once under retries.

Options: ``dir`` (default: ``<run dir>/csv``). The file is ``<dir>/<run id>.csv``.

The whole exactly-once story is two lines: ``state()`` returns the file's size after what
core acknowledged, and ``open()`` cuts the file back to that size. Core calls ``open()``
again after a crash, after a lost acknowledgement and after every failed ``write()``, so
rows written by a batch that then failed are cut before the batch is sent again.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trackmux

OPTIONS = {"dir"}


class CsvBackend(trackmux.Backend):
    name = "csv"
    capabilities = frozenset({"metrics"})  # other kinds get core's fallback or are noted

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        # No I/O here: trackmux builds the backend once at init() just to check options.
        super().__init__(options)
        unknown = sorted(set(self.options) - OPTIONS)
        if unknown:
            raise ValueError(f"unknown csv option(s) {unknown}; known: {sorted(OPTIONS)}")
        if not isinstance(self.options.get("dir", ""), str):
            raise TypeError("csv option 'dir' must be a str")

    def open(self, run: trackmux.RunInfo, resume: trackmux.ResumeState) -> None:
        directory = Path(self.options.get("dir") or run.run_dir / "csv")
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{run.run_id}.csv"
        self._file = open(self.path, "ab+")  # noqa: SIM115 - kept open until close()
        self._file.truncate(int(resume.state.get("size", 0)))  # drop unacknowledged rows
        if self._file.tell() == 0:
            self._file.write(b"step,time,key,value\r\n")

    def write(self, events: Sequence[trackmux.Event]) -> None:
        lines: list[list[Any]] = []
        for event in events:
            if isinstance(event, trackmux.MetricsEvent):
                lines.extend([event.step, event.time, key, repr(value)]
                             for key, value in event.data.items())
        text = _Rows()
        csv.writer(text).writerows(lines)
        self._file.write("".join(text.parts).encode("utf-8"))

    def flush(self) -> None:
        self._file.flush()

    def state(self) -> dict[str, Any]:
        return {"size": self._file.tell()}

    def close(self, status: str) -> None:
        self._file.close()


class _Rows:
    """A minimal text sink for csv.writer."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> None:
        self.parts.append(text)


@trackmux.hookimpl
def trackmux_register_backends(register: Any) -> None:
    register("csv", CsvBackend, description="metrics as CSV rows")
