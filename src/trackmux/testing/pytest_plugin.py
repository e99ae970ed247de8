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


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """A private PostgreSQL cluster for the session (trackmux.testing.postgres); skipped
    where PostgreSQL is not installed."""
    from trackmux.testing.postgres import postgres_available, private_postgres

    if not postgres_available():
        pytest.skip("PostgreSQL is not installed (initdb/pg_ctl not found)")
    with private_postgres() as pg:
        yield pg
