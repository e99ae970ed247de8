"""What every importer shares: a source run, the chunks it reads, the damage it names.

An importer turns one kind of foreign storage into :class:`SourceRun` objects. A source
run reads its files from the cursors a previous import left (one JSON value per file,
kept in the run's spool meta) and yields :class:`Chunk` objects: events, the cursors past
them, and the damage found on the way. The engine commits each chunk's events with its
cursors in one transaction, so a second import (or a ``--follow`` poll) reads only what
is new, and a crash between two chunks loses nothing and doubles nothing.

Damage is never silent: a record whose checksum fails, a line cut in half, a file that
cannot be opened is a :class:`Damage` (file, byte offset, how many, what), reported by the
CLI and reflected in its exit status; what could be read around it is imported.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from trackmux.core.events import Event, MetricsEvent

#: recorded in each run's config (``_import.importer_version``); bump when a format is read
#: differently, so a reader can tell which rules made a run
IMPORTER_VERSION = 1


class SourceError(Exception):
    """A source that cannot be imported at all (not found, not this format): one line."""


@dataclass(frozen=True)
class Damage:
    """Part of a source that could not be read: ``count`` records (lines, rows) lost at
    byte ``offset`` of ``file`` (-1 when the format has no offsets), and why."""

    file: str
    offset: int
    count: int
    what: str
    #: False for damage that may heal (a tail still being written, a reader that
    #: stopped): named by this import only, looked at again by the next
    lasting: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "offset": self.offset, "count": self.count,
                "what": self.what}

    def line(self) -> str:
        where = f" at byte {self.offset}" if self.offset >= 0 else ""
        return f"{self.file}{where}: {self.what} ({self.count} lost)"


@dataclass
class Chunk:
    """Events read from a source, the cursors past them (file -> JSON value) and the
    damage met while reading them. ``points``: values carried (each metric value, each
    other event)."""

    events: list[Event] = field(default_factory=list)
    cursors: dict[str, Any] = field(default_factory=dict)
    damage: list[Damage] = field(default_factory=list)

    @property
    def points(self) -> int:
        return sum(len(e.data) if isinstance(e, MetricsEvent) else 1 for e in self.events)


class SourceRun:
    """One run found in a source. Subclasses set the attributes and implement ``read``."""

    #: the format's name (``--format``)
    format: str = ""

    def __init__(self, key: str, name: str, where: str, project: str | None = None) -> None:
        #: identity of the run in its source: same source, same key, same trackmux run
        self.key = key
        self.name = name
        #: the source as the user would name it (a path, ``mlflow:RUN_ID``)
        self.where = where
        #: the source's own project (wandb project, mlflow experiment), if it has one
        self.project = project

    @property
    def run_id(self) -> str:
        """A stable run id: the format and a hash of the source's identity."""
        digest = hashlib.sha1(f"{self.format}\0{self.key}".encode()).hexdigest()[:12]
        return f"{self.format}-{digest}"

    def config(self) -> dict[str, Any]:
        """The source's own config (hyperparameters), JSON values; {} when it has none."""
        return {}

    def started_at(self) -> float | None:
        """When the source run started (its own clock), if known before reading."""
        return None

    def read(self, cursors: Mapping[str, Any], live: bool) -> Iterator[Chunk]:
        """Chunks from the cursors on. ``live``: the source may still be written, so a
        torn tail is waited for, not reported as damage."""
        raise NotImplementedError

    def finished(self) -> bool:
        """Whether the source says its run ended (``--follow`` stops then)."""
        return False

    def close(self) -> None:
        """Stop what reading started (a follower's reader process); called once, at the
        end of an import."""


# -- values ----------------------------------------------------------------------------------
_WRAPPED = re.compile(r"^(?:np\.|numpy\.)?(?:float\d*|int\d*|double)\((.*)\)$|^tensor\((.*?)"
                      r"(?:,\s*device=[^)]*)?(?:,\s*dtype=[^)]*)?\)$")
_NONFINITE = {"nan": math.nan, "-nan": math.nan, "+nan": math.nan, "inf": math.inf,
              "+inf": math.inf, "-inf": -math.inf, "infinity": math.inf,
              "-infinity": -math.inf, "+infinity": math.inf}


def number(text: str) -> float | int | None:
    """A number written as text in a log: ``0.5``, ``3``, ``np.float64(0.5)``,
    ``tensor(0.5)``, ``nan``, ``-inf``; None for anything else (a word, a list)."""
    text = text.strip()
    match = _WRAPPED.match(text)
    if match:
        text = (match.group(1) if match.group(1) is not None else match.group(2) or "").strip()
    special = _NONFINITE.get(text.lower())
    if special is not None:
        return special
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


def scalar(value: Any) -> float | int | None:
    """A JSON value as a metric value: numbers (not bools), numeric text; else None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        return number(value)
    return None


def flat_numbers(data: Mapping[str, Any], prefix: str = "") -> dict[str, float | int]:
    """Numeric leaves of nested ``data`` under ``/``-joined keys (others left out)."""
    out: dict[str, float | int] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat_numbers(value, name + "/"))
            continue
        found = scalar(value)
        if found is not None:
            out[name] = found
    return out
