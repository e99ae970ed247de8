"""The trackmux conformance suite, run against this backend: a few lines are enough."""

from __future__ import annotations

import csv
from pathlib import Path

from trackmux_csv import CsvBackend

from trackmux.testing import BackendConformance, Readback


class TestCsvBackend(BackendConformance):
    kinds = frozenset({"metrics", "time"})
    invalid_options = {"directory": "typo"}

    def make_backend(self, tmp_path: Path) -> CsvBackend:
        return CsvBackend({"dir": str(tmp_path / "csv")})

    def read_back(self, tmp_path: Path) -> Readback:
        out = Readback()
        for path in (tmp_path / "csv").glob("*.csv"):
            with open(path, newline="", encoding="utf-8") as handle:
                for row in csv.DictReader(handle):
                    value = float(row["value"])
                    out.metrics.setdefault(row["key"], []).append((int(row["step"]), value))
                    out.times.setdefault(row["key"], []).append(
                        (int(row["step"]), float(row["time"])))
        return out
