"""Test backends with controlled failures, registered as a plugin the real way (pluggy)."""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import trackmux
from trackmux.core.registry import get_registry


class SlowBackend(trackmux.Backend):
    """Sleeps ``delay`` seconds per batch."""

    capabilities = frozenset({"metrics"})
    batches: list[int] = []

    def open(self, run: trackmux.RunInfo, resume: trackmux.ResumeState) -> None:
        self.delay = float(self.options.get("delay", 5.0))

    def write(self, events: Sequence[trackmux.Event]) -> None:
        time.sleep(self.delay)
        SlowBackend.batches.append(len(events))

    def close(self, status: str) -> None:
        pass


class RaisingBackend(trackmux.Backend):
    """Raises in every method."""

    capabilities = frozenset({"metrics", "table", "image", "text", "config"})
    where = "write"

    def open(self, run: trackmux.RunInfo, resume: trackmux.ResumeState) -> None:
        if self.options.get("where", "write") in ("open", "all"):
            raise RuntimeError("open exploded")

    def write(self, events: Sequence[trackmux.Event]) -> None:
        raise RuntimeError("write exploded")

    def flush(self) -> None:
        raise RuntimeError("flush exploded")

    def close(self, status: str) -> None:
        raise RuntimeError("close exploded")


class HangingBackend(trackmux.Backend):
    """Blocks forever in ``open`` or ``write`` (until the test releases it)."""

    capabilities = frozenset({"metrics"})
    release = threading.Event()

    def open(self, run: trackmux.RunInfo, resume: trackmux.ResumeState) -> None:
        if self.options.get("where") == "open":
            HangingBackend.release.wait()

    def write(self, events: Sequence[trackmux.Event]) -> None:
        HangingBackend.release.wait()

    def close(self, status: str) -> None:
        pass


def _plugin() -> types.SimpleNamespace:
    @trackmux.hookimpl
    def trackmux_register_backends(register: Any) -> None:
        register("slow", SlowBackend)
        register("raising", RaisingBackend)
        register("hanging", HangingBackend)

    return types.SimpleNamespace(trackmux_register_backends=trackmux_register_backends)


@pytest.fixture
def test_backends(memory_backend: Any) -> Iterator[Any]:
    """Registers slow/raising/hanging (and memory); yields the memory store."""
    registry = get_registry()
    if "slow" not in registry.backends:
        registry.register_plugin(_plugin(), "tests.core.conftest")
    HangingBackend.release.clear()
    SlowBackend.batches.clear()
    yield memory_backend
    HangingBackend.release.set()


@pytest.fixture
def spool_dir(tmp_path: Path) -> Path:
    return tmp_path / "spool"
