"""Shared pieces of the reliability suite: faulty backends registered as a real plugin,
and fixtures; helpers for child processes live in _reliability.py.

Backend names carry a ``rel-`` prefix so they never clash with tests/core's test backends
in one pytest session (the registry is process-wide).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from trackmux.core.lifecycle.run import Run
from trackmux.testing import faults


@pytest.fixture
def faulty_backends(memory_backend: Any) -> Iterator[Any]:
    """Registers rel-raising / rel-hanging / rel-hanging-open / rel-slow (and memory) from
    trackmux.testing.faults; yields the memory store. Hanging backends are released at
    teardown so their threads end."""
    faults.register_fault_backends("rel-")
    faults.release.clear()
    yield memory_backend
    faults.release.set()


@pytest.fixture(autouse=True)
def _fresh_fork_warning() -> Iterator[None]:
    """The fork warning is once per process; each test starts without it."""
    Run._fork_warned = False
    yield
