"""pytest plugin (entry point ``pytest11``): the ``memory`` backend for any test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from trackmux.testing import memory


@pytest.fixture
def memory_backend() -> Iterator[memory.MemoryStore]:
    """Registers the ``memory`` backend; yields the store of what it received."""
    memory.use_memory_backend()
    memory.memory_store.clear()
    yield memory.memory_store
    memory.memory_store.clear()
