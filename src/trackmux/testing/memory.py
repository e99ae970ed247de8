"""An in-memory backend: every delivered event kept per run, for assertions in tests.

Usable anywhere, not only under pytest: :func:`use_memory_backend` registers it in the
process and returns the store. Redelivery is made harmless the way a real backend would:
events with a seq at or below the last one stored are ignored.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trackmux.core.backends.contract import Backend, ResumeState, RunInfo
from trackmux.core.events import Event, MetricsEvent
from trackmux.hookspecs import RegisterBackend, hookimpl


@dataclass
class MemoryRun:
    info: RunInfo
    events: list[Event] = field(default_factory=list)
    opened: int = 0
    closed: str | None = None
    rewinds: list[int] = field(default_factory=list)
    seen: int = 0  # highest seq written (rewind drops events; redelivery stays harmless)

    def metrics(self) -> dict[str, list[tuple[int, float]]]:
        """key -> [(step, value), ...] in delivery order."""
        out: dict[str, list[tuple[int, float]]] = {}
        for event in self.events:
            if isinstance(event, MetricsEvent):
                for key, value in event.data.items():
                    out.setdefault(key, []).append((event.step, value))
        return out

    def of_kind(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]


class MemoryStore:
    """Process-wide store of what memory backends received, keyed by run id."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: dict[str, MemoryRun] = {}

    def clear(self) -> None:
        with self.lock:
            self.runs.clear()

    def __getitem__(self, run_id: str) -> MemoryRun:
        return self.runs[run_id]


memory_store = MemoryStore()


class MemoryBackend(Backend):
    name = "memory"
    capabilities = frozenset({"metrics", "config", "table", "image", "text"})

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.store: MemoryStore = self.options.get("store", memory_store)

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        with self.store.lock:
            self.run = self.store.runs.setdefault(run.run_id, MemoryRun(run))
            self.run.opened += 1

    @property
    def remote_id(self) -> str:
        return "memory-" + self.run.info.run_id

    def write(self, events: Sequence[Event]) -> None:
        with self.store.lock:
            last = self.run.seen
            self.run.events.extend(e for e in events if e.seq > last)
            self.run.seen = max([last, *(e.seq for e in events)])

    def rewind(self, step: int) -> None:
        """Replace what it shows: events beyond ``step`` (config aside) are dropped."""
        with self.store.lock:
            self.run.rewinds.append(step)
            self.run.events = [e for e in self.run.events
                               if e.step <= step or e.kind == "config"]

    def close(self, status: str) -> None:
        self.run.closed = status


@hookimpl
def trackmux_register_backends(register: RegisterBackend) -> None:
    register("memory", MemoryBackend, description="in-memory, for tests")


def use_memory_backend() -> MemoryStore:
    """Register the ``memory`` backend in this process (once) and return its store, so
    ``trackmux.init(backends=["memory"])`` works in a script, a notebook or any test runner."""
    import sys

    from trackmux.core.backends.registry import get_registry

    registry = get_registry()
    if "memory" not in registry.backends:
        registry.register_plugin(sys.modules[__name__], "trackmux.testing.memory", "trackmux",
                                 "")
    return memory_store
