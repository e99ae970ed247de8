"""Errors from backends, reported once per backend and kind instead of once per call.

Nothing here ever raises into the training loop. Reports go to the ``trackmux`` logger
(WARNING) and are kept, with counts, for ``Run.problems()`` and ``finish()``'s summary.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("trackmux")


@dataclass
class Problem:
    backend: str
    kind: str
    message: str
    count: int = 1


class Reporter:
    """Thread-safe, deduplicating problem log shared by a run's delivery workers."""

    def __init__(self, listener: Callable[[str, str, str, str], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._problems: dict[tuple[str, str], Problem] = {}
        self._notes: dict[tuple[str, str], Problem] = {}
        # The delivery process forwards every call (op, backend, kind, message) to the
        # trainer, whose own Reporter replays it: problems reach run.problems() there.
        self._listener = listener

    def _forward(self, op: str, backend: str, kind: str, message: str) -> None:
        if self._listener is not None:
            self._listener(op, backend, kind, message)

    def replay(self, op: str, backend: str, kind: str, message: str) -> None:
        """Apply a call forwarded from another process's Reporter."""
        if op == "report":
            self.report(backend, kind, message)
        elif op == "note":
            self.note(backend, kind, message)
        elif op == "resolve":
            self.resolve(backend, kind, message)
        elif op == "fail":
            self.fail(backend, message)

    def report(self, backend: str, kind: str, message: str) -> bool:
        """Record a problem; log it only the first time (backend, kind) is seen.
        Returns True when this call logged."""
        self._forward("report", backend, kind, message)
        with self._lock:
            known = self._problems.get((backend, kind))
            if known is not None:
                known.count += 1
                return False
            self._problems[(backend, kind)] = Problem(backend, kind, message)
        log.warning("trackmux: backend %r: %s: %s (reported once; delivery continues)",
                    backend, kind, message)
        return True

    def fail(self, backend: str, message: str) -> None:
        """A permanent failure: delivery to ``backend`` stopped (kind "failed"), said once."""
        self._forward("fail", backend, "failed", message)
        with self._lock:
            if (backend, "failed") in self._problems:
                return
            self._problems[(backend, "failed")] = Problem(backend, "failed", message)
        log.error("trackmux: backend %r failed permanently and is not retried: %s. Its "
                  "events stay in the spool; fix the cause, then deliver them with "
                  "trackmux sync", backend, message)

    def note(self, backend: str, kind: str, message: str) -> None:
        """An expected limit (a kind a backend cannot show), logged once at INFO. Kept apart
        from problems, so ``problems == []`` can serve as a health check."""
        self._forward("note", backend, kind, message)
        with self._lock:
            known = self._notes.get((backend, kind))
            if known is not None:
                known.count += 1
                return
            self._notes[(backend, kind)] = Problem(backend, kind, message)
        log.info("trackmux: backend %r: %s", backend, message)

    def notes(self) -> list[Problem]:
        with self._lock:
            return [Problem(p.backend, p.kind, p.message, p.count)
                    for p in self._notes.values()]

    def resolve(self, backend: str, kind: str, message: str) -> None:
        """Forget a problem that went away (a backend that came back), saying so once."""
        self._forward("resolve", backend, kind, message)
        with self._lock:
            gone = self._problems.pop((backend, kind), None)
        if gone is not None:
            log.warning("trackmux: backend %r: %s", backend, message)

    def problems(self) -> list[Problem]:
        with self._lock:
            return [Problem(p.backend, p.kind, p.message, p.count)
                    for p in self._problems.values()]
