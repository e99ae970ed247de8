"""The contract between trackmux and a backend plugin.

A backend is a small class that core drives from its own delivery thread, never from the
trainer's thread: ``open`` the remote run once, ``write`` batches of events in spool
order, ``flush``, ``close``. Everything a backend needs to resume later (its remote
identity, a file offset, ...) it returns from ``state()``; core stores that next to the
acknowledged position in the spool and hands it back to ``open`` on the next delivery,
live or from ``trackmux sync``.

Call order: the constructor (also once at ``init()`` just to check options: no I/O
there), ``open``, ``state``, then per batch ``write``, ``flush``, ``state``; ``close`` at
the end. Retry contract: after a failed ``write`` core calls ``close("retrying")``, builds
a new backend and ``open``s it with the last acknowledged state, as after a crash. So the
one rule is: events redelivered after ``open`` must be harmless (dedupe on seq, truncate
to the checkpoint in ``state()``, or rely on the store's own dedupe of identical points).
Raise ``PermanentBackendError`` for what retrying cannot fix and ``EventRejected`` for one
event the store can never take (see docs/plugins.md).
"""

from __future__ import annotations

import abc
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from trackmux.core.events import Event


@dataclass(frozen=True)
class RunInfo:
    """What a backend knows about the run it delivers."""

    project: str
    name: str
    run_id: str
    run_dir: Path
    started_at: float
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResumeState:
    """What an earlier delivery of this run to this backend left behind.

    ``remote_id`` is the backend's own identity of the run (wandb run id, mlflow run_id);
    ``state`` is whatever the backend returned from ``state()`` at the last acknowledgement;
    ``acked_seq`` is the last event seq the backend acknowledged (0: nothing yet).
    """

    remote_id: str | None = None
    state: Mapping[str, Any] = field(default_factory=dict)
    acked_seq: int = 0


def check_option_types(backend: str, options: Mapping[str, Any], known: Iterable[str], *,
                       strings: Iterable[str] = (), paths: Iterable[str] = ()) -> None:
    """The usual checks of a backend's options, before any I/O: no unknown name, and the
    named string and path options (when given) of the right type. Raises naming both."""
    known = frozenset(known)
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"unknown {backend} option(s) {unknown}; known: {sorted(known)}")
    for name in strings:
        if options.get(name) is not None and not isinstance(options[name], str):
            raise TypeError(f"{backend} option {name} must be a string, got "
                            f"{type(options[name]).__name__}")
    for name in paths:
        if options.get(name) is not None and not isinstance(options[name], (str, os.PathLike)):
            raise TypeError(f"{backend} option {name} must be a path, got "
                            f"{type(options[name]).__name__}")


def check_max_rows(value: object, argument: str = "max_rows") -> int:
    """A row cap: an int >= 1; errors name ``argument``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{argument} must be an int or None, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{argument} must be >= 1, got {value}")
    if value > (1 << 63) - 1:  # stores keep 64-bit ints
        raise ValueError(f"{argument} must be at most 2**63-1, got an int of "
                         f"{len(str(value))} digits")
    return value


#: how a backend chooses the samples it shows (core/delivery/sample_rows.py)
SAMPLE_POLICIES = ("spread", "best", "worst", "extremes", "random")


class Backend(abc.ABC):
    """Base class of every backend. Subclasses set ``name`` and ``capabilities``.

    ``capabilities`` lists the event kinds the backend shows natively. For the others core
    applies a fallback before ``write`` (a table as markdown text, an image as a PNG file
    in ``media_dir()``), so no plugin re-implements them.
    """

    name: ClassVar[str] = ""
    capabilities: ClassVar[frozenset[str]] = frozenset({"metrics", "config"})
    #: the most rows of one table this backend is given (None: all); the option
    #: ``max_rows`` overrides it. Core samples deterministically (see fallbacks.cap_rows).
    max_table_rows: ClassVar[int | None] = None
    #: options that choose where the output goes (a folder, a server, a project):
    #: ``trackmux sync RUN -o NAME.OPTION=NEW`` with a value other than the run's delivers
    #: to that new destination from the first event, with acknowledgements of its own.
    destination_options: ClassVar[tuple[str, ...]] = ()
    #: the most samples of one ``log_samples`` batch this backend is shown (None: all);
    #: the option ``sample_rows`` overrides it, ``sample_policy`` and ``sample_seed``
    #: choose which (core/delivery/sample_rows.py; the spool keeps every sample)
    max_sample_rows: ClassVar[int | None] = 64

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.options: dict[str, Any] = dict(options or {})
        # which plugin serves a shared name: read by the registry, not by the backend
        self.options.pop("provider", None)
        cap = self.options.pop("max_rows", self.max_table_rows)
        self.table_cap: int | None = None if cap is None else check_max_rows(
            cap, f"{self.name or type(self).__name__} option max_rows")
        sample_cap = self.options.pop("sample_rows", self.max_sample_rows)
        self.sample_cap: int | None = None if sample_cap is None else check_max_rows(
            sample_cap, f"{self.name or type(self).__name__} option sample_rows")
        who = self.name or type(self).__name__
        self.sample_policy: str = self.options.pop("sample_policy", "spread")
        if self.sample_policy not in SAMPLE_POLICIES:
            raise ValueError(f"{who} option sample_policy must be one of "
                             f"{list(SAMPLE_POLICIES)}, got {self.sample_policy!r}")
        self.sample_seed: int = self.options.pop("sample_seed", 0)
        if isinstance(self.sample_seed, bool) or not isinstance(self.sample_seed, int):
            raise TypeError(f"{who} option sample_seed must be an int, got "
                            f"{type(self.sample_seed).__name__}")

    @abc.abstractmethod
    def open(self, run: RunInfo, resume: ResumeState) -> None:
        """Create the remote run, or continue ``resume.remote_id`` if it is set."""

    @abc.abstractmethod
    def write(self, events: Sequence[Event]) -> None:
        """Deliver events in order. Return only once the backend has them (or raise)."""

    def flush(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Push anything the backend buffers. Called before each acknowledgement."""

    @abc.abstractmethod
    def close(self, status: str) -> None:
        """End the remote run; ``status`` is "finished", "failed", "crashed" or "stopped"
        (the doctor's ``stop_on`` asked the trainer to stop and it ended cleanly: show it
        where the backend has run states or tags; the finding is the spool meta's
        ``stop_reason``, one line from ``core.spool.runs.stop_reason_line``). "retrying":
        a write failed and the run is opened again at once; release, do not end it."""

    @property
    def remote_id(self) -> str | None:
        """The backend's identity of the run, stored so a later sync continues it. A
        read-only property: override it (do not assign to it)."""
        return None

    def state(self) -> dict[str, Any]:
        """A small JSON-compatible checkpoint, asked right after ``open`` and after each
        batch, and stored with the acknowledgement; ``open`` gets it back."""
        return {}

    def where(self) -> str | None:
        """Where the output went (a directory, a file, a URL), shown by ``trackmux sync``
        and in the log when a default location was chosen; None: not a place to show."""
        return None

    def rewind(self, step: int) -> None:  # noqa: B027 - optional hook, empty by default
        """A resumed attempt went back to ``step``: events with a higher step that this
        backend got from earlier attempts are superseded. Called just before the first
        event of that attempt, when this backend delivered the run before (it may hold
        such events, acknowledged or not); a fresh destination never gets superseded
        events and is not told. Replace or hide them where the backend can (its docs page
        says how); the default keeps them. Called again if the ack after it was lost."""

    def media_dir(self) -> Path | None:
        """Where core's image fallback may write PNG files; None: images are reported skipped."""
        return None
