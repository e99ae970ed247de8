"""Fixtures for core tests: the fault backends of trackmux.testing.faults, registered as
a plugin the real way (pluggy)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trackmux.testing import faults


@pytest.fixture
def test_backends(memory_backend: Any) -> Iterator[Any]:
    """Registers slow/raising/hanging (and memory); yields the memory store."""
    faults.register_fault_backends()
    faults.release.clear()
    faults.SlowBackend.batches.clear()
    yield memory_backend
    faults.release.set()


@pytest.fixture
def spool_dir(tmp_path: Path) -> Path:
    return tmp_path / "spool"
