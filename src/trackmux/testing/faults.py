"""Backends that fail on purpose, for testing that failures stay isolated.

- ``raising``: raises in ``open`` (unless option ``where="write"``), ``write``, ``flush``
  and ``close``;
- ``hanging``: blocks in ``write`` (or in ``open`` with option ``where="open"``) until
  :data:`release` is set; ``hanging-open`` always blocks in ``open``;
- ``slow``: sleeps option ``delay`` seconds (default 5) per batch, then keeps the batch
  size in :data:`SlowBackend.batches`.

:func:`register_fault_backends` registers them as a real pluggy plugin under a name
prefix, so separate test suites in one process do not clash.
"""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Sequence
from typing import Any

from trackmux.core.backends.contract import Backend, ResumeState, RunInfo
from trackmux.core.backends.registry import get_registry
from trackmux.core.events import Event
from trackmux.hookspecs import hookimpl

ALL_KINDS = frozenset({"metrics", "table", "image", "text", "config"})
#: Set it to let hanging backends return (tests set it at teardown so threads end).
release = threading.Event()


class RaisingBackend(Backend):
    capabilities = ALL_KINDS

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        if self.options.get("where", "all") != "write":
            raise RuntimeError("open exploded")

    def write(self, events: Sequence[Event]) -> None:
        raise RuntimeError("write exploded")

    def flush(self) -> None:
        raise RuntimeError("flush exploded")

    def close(self, status: str) -> None:
        raise RuntimeError("close exploded")


class HangingBackend(Backend):
    capabilities = ALL_KINDS

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        if self.options.get("where", "write") == "open":
            release.wait()

    def write(self, events: Sequence[Event]) -> None:
        release.wait()

    def close(self, status: str) -> None:
        pass


class HangingInOpenBackend(HangingBackend):
    def open(self, run: RunInfo, resume: ResumeState) -> None:
        release.wait()


class SlowBackend(Backend):
    capabilities = frozenset({"metrics"})
    batches: list[int] = []

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        self.delay = float(self.options.get("delay", 5.0))

    def write(self, events: Sequence[Event]) -> None:
        time.sleep(self.delay)
        SlowBackend.batches.append(len(events))

    def close(self, status: str) -> None:
        pass


def register_fault_backends(prefix: str = "") -> None:
    """Register ``<prefix>raising``, ``<prefix>hanging``, ``<prefix>hanging-open`` and
    ``<prefix>slow`` (once per prefix)."""
    if f"{prefix}raising" in get_registry().backends:
        return

    @hookimpl
    def trackmux_register_backends(register: Any) -> None:
        register(f"{prefix}raising", RaisingBackend)
        register(f"{prefix}hanging", HangingBackend)
        register(f"{prefix}hanging-open", HangingInOpenBackend)
        register(f"{prefix}slow", SlowBackend)

    plugin = types.SimpleNamespace(trackmux_register_backends=trackmux_register_backends)
    get_registry().register_plugin(plugin, f"trackmux.testing.faults[{prefix}]")
