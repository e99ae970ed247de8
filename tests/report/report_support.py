"""Shared by the demo and report tests (a uniquely named module: several conftest.py exist)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEMO_STEPS = 200  # the demo's default


@dataclass(frozen=True)
class DemoRun:
    root: Path
    run_dir: Path
    output: str
    seconds: float
