"""Typed, immutable events: the one data model between the trainer and every backend.

Events are plain data (str, int, float, bytes, lists, dicts) so they can be written to
the spool, sent across processes (a future Ray sink actor) and replayed later exactly
as they were logged. Each carries the step and wall time of the original call; the
spool gives it a sequence number (``seq``) when it is committed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Union

EventKind = Literal["metrics", "config", "table", "image", "text"]
#: Every kind of event; backends declare which of these they show natively.
EVENT_KINDS: frozenset[str] = frozenset({"metrics", "config", "table", "image", "text"})

Scalar = Union[int, float]  # noqa: UP007 - runtime alias, kept readable on 3.10
Cell = Union[str, int, float, bool, None]  # noqa: UP007


@dataclass(frozen=True, slots=True)
class MetricsEvent:
    """Scalar values logged together at one step (one ``Run.log`` call)."""

    data: dict[str, Scalar]
    step: int
    time: float
    seq: int = 0
    kind: Literal["metrics"] = field(default="metrics", init=False)


@dataclass(frozen=True, slots=True)
class ConfigEvent:
    """The run's hyperparameters: nested JSON-compatible data, secrets already redacted.

    In the spool each event holds the keys of one ``log_config`` call; a backend receives
    the config merged so far (nested, :mod:`trackmux.core.configmerge`)."""

    config: dict[str, Any]
    step: int
    time: float
    seq: int = 0
    kind: Literal["config"] = field(default="config", init=False)


@dataclass(frozen=True, slots=True)
class TableEvent:
    """Rows of samples (e.g. prompt, response, reward) logged under ``key`` at ``step``."""

    key: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    step: int
    time: float
    seq: int = 0
    kind: Literal["table"] = field(default="table", init=False)


@dataclass(frozen=True, slots=True)
class ImageEvent:
    """One image, already encoded as PNG; size in pixels, ``mode`` as PIL names it."""

    key: str
    png: bytes
    width: int
    height: int
    mode: str
    step: int
    time: float
    caption: str | None = None
    seq: int = 0
    kind: Literal["image"] = field(default="image", init=False)


@dataclass(frozen=True, slots=True)
class TextEvent:
    """Free text (markdown) logged under ``key`` at ``step``."""

    key: str
    text: str
    step: int
    time: float
    seq: int = 0
    kind: Literal["text"] = field(default="text", init=False)


Event = Union[MetricsEvent, ConfigEvent, TableEvent, ImageEvent, TextEvent]  # noqa: UP007
