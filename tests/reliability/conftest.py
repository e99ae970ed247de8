"""Shared pieces of the reliability suite: faulty backends registered as a real plugin,
and fixtures; helpers for child processes live in _reliability.py.

Backend names carry a ``rel-`` prefix so they never clash with tests/core's test backends
in one pytest session (the registry is process-wide).
"""

from __future__ import annotations

import threading
import types
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

import trackmux
from trackmux.core.registry import get_registry
from trackmux.core.run import Run


class RaisingEverywhere(trackmux.Backend):
    """Raises in open (unless ``where=write``), write, flush and close."""

    capabilities = frozenset({"metrics", "table", "image", "text", "config"})

    def open(self, run: trackmux.RunInfo, resume: trackmux.ResumeState) -> None:
        if self.options.get("where", "all") == "all":
            raise RuntimeError("open exploded")

    def write(self, events: Sequence[trackmux.Event]) -> None:
        raise RuntimeError("write exploded")

    def flush(self) -> None:
        raise RuntimeError("flush exploded")

    def close(self, status: str) -> None:
        raise RuntimeError("close exploded")


class Hanging(trackmux.Backend):
    """Blocks in ``open`` or ``write`` until the test ends."""

    capabilities = frozenset({"metrics", "table", "image", "text", "config"})
    release = threading.Event()
    where = "write"

    def open(self, run: trackmux.RunInfo, resume: trackmux.ResumeState) -> None:
        if self.where == "open":
            Hanging.release.wait()

    def write(self, events: Sequence[trackmux.Event]) -> None:
        Hanging.release.wait()

    def close(self, status: str) -> None:
        pass


class HangingInOpen(Hanging):
    where = "open"


def _plugin() -> types.SimpleNamespace:
    @trackmux.hookimpl
    def trackmux_register_backends(register: Any) -> None:
        register("rel-raising", RaisingEverywhere)
        register("rel-hang-write", Hanging)
        register("rel-hang-open", HangingInOpen)

    return types.SimpleNamespace(trackmux_register_backends=trackmux_register_backends)


@pytest.fixture
def faulty_backends(memory_backend: Any) -> Iterator[Any]:
    """Registers rel-raising / rel-hang-write / rel-hang-open (and memory); yields the
    memory store. Hanging backends are released at teardown so their threads end."""
    registry = get_registry()
    if "rel-raising" not in registry.backends:
        registry.register_plugin(_plugin(), "tests.reliability.conftest")
    Hanging.release.clear()
    yield memory_backend
    Hanging.release.set()


@pytest.fixture(autouse=True)
def _fresh_fork_warning() -> Iterator[None]:
    """The fork warning is once per process; each test starts without it."""
    Run._fork_warned = False
    yield
