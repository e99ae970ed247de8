"""pytest plugin (entry point ``pytest11``): the ``memory`` backend for any test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from trackmux.testing import memory

if TYPE_CHECKING:
    from trackmux.testing.pacer import HeldCommits


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


@pytest.fixture
def held_commits() -> Iterator[HeldCommits]:
    """Spool writers made during the test commit only when woken (flush, close, meta,
    backpressure), never by time; ``held_commits.settle()`` returns once every writer waits
    with no wake pending. See trackmux.testing.pacer."""
    from trackmux.testing.pacer import hold_commits

    with hold_commits() as held:
        yield held
