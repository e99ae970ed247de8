"""trackmux-csv: metrics as CSV rows ``step,time,key,value``; exactly once on redelivery.

Options: ``dir`` (default: ``<run dir>/csv``). The file is ``<dir>/<run id>.csv``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trackmux


class CsvBackend(trackmux.Backend):
    name = "csv"
    capabilities = frozenset({"metrics"})

    def open(self, run: trackmux.RunInfo, resume: trackmux.ResumeState) -> None:
        directory = Path(self.options.get("dir") or run.run_dir / "csv")
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{run.run_id}.csv"
        self._file = open(self.path, "a+", newline="", encoding="utf-8")  # noqa: SIM115
        # Redelivery after a lost acknowledgement: cut back to the acknowledged size.
        self._file.truncate(int(resume.state.get("size", 0)))
        self._file.seek(0, io.SEEK_END)
        if self._file.tell() == 0:
            self._file.write("step,time,key,value\n")
        self._writer = csv.writer(self._file)

    def write(self, events: Sequence[trackmux.Event]) -> None:
        for event in events:
            if isinstance(event, trackmux.MetricsEvent):
                for key, value in event.data.items():
                    self._writer.writerow([event.step, event.time, key, repr(value)])

    def flush(self) -> None:
        self._file.flush()

    def state(self) -> dict[str, Any]:
        return {"size": self._file.tell()}

    def close(self, status: str) -> None:
        self._file.close()


@trackmux.hookimpl
def trackmux_register_backends(register: Any) -> None:
    register("csv", CsvBackend, description="metrics as CSV rows")
