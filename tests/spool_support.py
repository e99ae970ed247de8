"""Shared by the suites that read what a run left in its spool (tests/core, tests/doctor,
tests/hf, tests/reliability, tests/verl): tests/ is on sys.path because tests/conftest.py
lives there."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def spool_meta(run_dir: Path) -> dict[str, Any]:
    """The spool meta of the run in ``run_dir`` (state, stop reason, dropped input); the
    reader is closed before it returns."""
    from trackmux.core.spool.reader import SpoolReader  # after a suite's importorskip

    reader = SpoolReader(run_dir)
    try:
        return reader.meta()
    finally:
        reader.close()
