"""A source run into its spool: created once, then only what is new, exactly once.

The run's folder is ``<root>/<project>/<run id>`` with the run id derived from the source
(:attr:`SourceRun.run_id`), so importing the same source again finds the same run. Its
meta holds ``import_cursors`` (one value per source file: how far it was read) and each
chunk's events are appended together with the cursors past them, in one transaction
(:func:`~trackmux.core.spool.writer.append_events` with ``meta``): a crash between two
chunks leaves a spool and cursors that agree, and the next import goes on from there.

While importing, the import process holds the run's ``run.lock`` and the run is
``running`` (so ``trackmux ui`` shows a followed run live and a killed ``--follow`` reads
as crashed); at the end the run is ``finished``. A second import of a run whose lock is
held (a ``--follow`` still going) is refused, naming the holder.

The run keeps the project and name its first import gave it; a later import without
``--project`` finds it under whichever project it is (a wandb run first read while its
log held no run record yet went to ``imported``).

Meta written (besides the usual run_id, project, name, state, started_at, finished_at):
``imported`` (format, source, importer version), ``import_cursors``, ``import_points``
(values carried so far) and ``import_damage`` (damage found inside files, kept so every
later import names it again). The first event is a config event ``{"_import": {format,
source, importer_version}, ...the source's own config}``; a later import whose source
config changed appends the new one.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock
import orjson

from trackmux.core import settings
from trackmux.core.errors import SpoolLockedError
from trackmux.core.events import ConfigEvent, Event
from trackmux.core.spool import attempts
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.writer import (
    RUN_LOCK,
    SCHEMA,
    SPOOL_FILE,
    append_events,
    connect,
    index_if_new,
    make_private_dir,
    touch_private,
)
from trackmux.core.values import normalize
from trackmux.importers.base import IMPORTER_VERSION, Chunk, Damage, SourceError, SourceRun

#: events gathered from a source's chunks before one commit (one transaction)
COMMIT_EVENTS = 5_000
#: default project of an imported run whose source has none
DEFAULT_PROJECT = "imported"


@dataclass
class Outcome:
    """What one import (or one ``--follow`` session) did to one run."""

    source: str
    format: str
    run: str
    dir: Path
    points: int = 0
    steps: int = 0
    new_points: int = 0
    damage: list[Damage] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"source": self.source, "format": self.format, "run": self.run,
                "dir": str(self.dir), "points": self.points, "steps": self.steps,
                "new_points": self.new_points,
                "damage": [d.as_dict() for d in self.damage]}


def _version() -> str:
    from trackmux import __version__

    return __version__


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):
        return ""


class RunImport:
    """One source run being imported into its spool; open, pull (as often as wanted),
    close."""

    def __init__(self, source: SourceRun, root: Path, project: str | None = None,
                 name: str | None = None) -> None:
        self.source = source
        self.project = normalize.check_name(
            project or source.project or DEFAULT_PROJECT, "--project", 1000)
        self.name = normalize.check_name(name or source.name or source.run_id, "--name", 1000)
        self.run_id = source.run_id
        self.dir = root / settings.safe_dirname(self.project) / settings.safe_dirname(
            self.run_id)
        if project is None:  # imported before: the same run, whatever project it got then
            earlier = sorted(root.glob(f"*/{settings.safe_dirname(self.run_id)}/{SPOOL_FILE}"))
            if earlier:
                self.dir = earlier[0].parent
        self.outcome = Outcome(source.where, source.format, self.run_id, self.dir)
        self._lock: filelock.BaseFileLock | None = None
        self._meta: dict[str, Any] = {}
        self._cursors: dict[str, Any] = {}
        self._lasting: dict[tuple[str, int], Damage] = {}
        self._transient: list[Damage] = []  # this import's damage that may heal
        self._new = True
        self._check_config = True
        self._last_time = 0.0

    # -- lifecycle -----------------------------------------------------------------------
    def open(self) -> None:
        """Create the spool if needed, take the run's lock, read where the last import
        stopped. Raises :class:`SourceError` when another process holds the run."""
        make_private_dir(self.dir)
        path = self.dir / SPOOL_FILE
        touch_private(path)
        conn = connect(path)
        try:
            conn.executescript(SCHEMA)
            index_if_new(conn)
        finally:
            conn.close()
        lock = filelock.FileLock(str(self.dir / RUN_LOCK), thread_local=False, mode=0o600)
        try:
            attempts.acquire_run_lock(lock, self.dir)
        except SpoolLockedError as exc:
            raise SourceError(f"{self.source.where}: {exc}") from None
        self._lock = lock
        reader = SpoolReader(self.dir)
        try:
            self._meta = reader.meta()
        finally:
            reader.close()
        imported = self._meta.get("imported")
        if self._meta.get("run_id") and not isinstance(imported, dict):
            self.close(None)
            raise SourceError(f"{self.dir} holds a run that was not imported; not touched")
        self._new = not self._meta.get("run_id")
        # a run keeps the project and name of its first import
        self.project = str(self._meta.get("project") or self.project)
        self.name = str(self._meta.get("name") or self.name)
        self._cursors = dict(self._meta.get("import_cursors") or {})
        for item in self._meta.get("import_damage") or []:
            damage = Damage(str(item["file"]), int(item["offset"]), int(item["count"]),
                            str(item["what"]))
            self._lasting[(damage.file, damage.offset)] = damage
        self.outcome.points = int(self._meta.get("import_points") or 0)
        self._last_time = float(self._meta.get("finished_at") or 0.0)

    def pull(self, live: bool = False) -> int:
        """Read what the source holds past the cursors and commit it; returns the number
        of new points. ``live``: a torn tail is waited for (``--follow``), not damage."""
        before = self.outcome.new_points
        transient = self._transient = []
        pending: list[Event] = []
        cursors: dict[str, Any] = {}
        points = 0
        config = self._check_config  # once per import, at its first commit
        self._check_config = False
        for chunk in self._chunks(live):
            pending += chunk.events
            cursors.update(chunk.cursors)
            points += chunk.points
            for damage in chunk.damage:
                if not damage.lasting:  # a torn tail: read again when the file grows
                    transient.append(damage)
                else:
                    self._lasting[(damage.file, damage.offset)] = damage
            if len(pending) >= COMMIT_EVENTS:
                self._commit(pending, cursors, points, config)
                pending, cursors, points, config = [], {}, 0, False
        if pending or cursors or self._new or config:
            self._commit(pending, cursors, points, config)
        self.outcome.damage = [*self._lasting.values(), *transient]
        return self.outcome.new_points - before

    def _chunks(self, live: bool) -> Iterator[Chunk]:
        try:
            yield from self.source.read(dict(self._cursors), live)
        except SourceError:
            raise
        except Exception as exc:  # a reader's surprise is damage, never a traceback
            yield Chunk(damage=[Damage(self.source.where, -1, 1,
                                       f"reading stopped: {type(exc).__name__}: {exc}",
                                       lasting=False)])

    def _commit(self, events: list[Event], cursors: dict[str, Any], points: int,
                config: bool) -> None:
        self._cursors.update(cursors)
        meta: dict[str, Any] = {"import_cursors": self._cursors,
                                "import_points": self.outcome.points + points,
                                "import_damage": [d.as_dict() for d in self._lasting.values()]}
        if events:
            self._last_time = max(self._last_time, max(e.time for e in events))
        if self._new:
            meta.update(self._first_meta(events))
            self._new = False
        if config:
            found = self._config_events(events)
            if found:
                meta["import_config"] = self._meta["import_config"]
                events = [*found, *events]
        append_events(self.dir, events, meta)
        self.outcome.points += points
        self.outcome.new_points += points

    def _first_meta(self, events: list[Event]) -> dict[str, Any]:
        started = self.source.started_at()
        if started is None:
            started = min((e.time for e in events), default=time.time())
        return {"run_id": self.run_id, "project": self.project, "name": self.name,
                "state": "running", "started_at": started, "pid": os.getpid(),
                "host": settings.host_name(), "user": _user(), "backends": [],
                "durability": "default", "tags": ["imported", self.source.format],
                "trackmux_version": _version(),
                "imported": self._import_record()}

    def _import_record(self) -> dict[str, Any]:
        return {"format": self.source.format, "source": self.source.where,
                "importer_version": IMPORTER_VERSION}

    def _config_events(self, events: list[Event]) -> list[Event]:
        """The config event when the source's config is new or changed, else []."""
        try:
            config = normalize.to_json_value(self.source.config())
        except Exception as exc:  # tried again by the next import
            self._transient.append(Damage(self.source.where, -1, 1, "config not read: "
                                          f"{type(exc).__name__}: {exc}", lasting=False))
            return []
        full = {"_import": self._import_record(), **config}
        digest = orjson.dumps(full, option=orjson.OPT_SORT_KEYS).decode()
        if digest == self._meta.get("import_config"):
            return []
        self._meta["import_config"] = digest
        when = min((e.time for e in events), default=None) or float(
            self._meta.get("started_at") or time.time())
        return [ConfigEvent(full, 0, when)]

    def close(self, state: str | None = "finished") -> None:
        """Mark the run ``state`` (None: leave it) and free its lock."""
        try:
            if state is not None and self._lock is not None:
                append_events(self.dir, [], {
                    "state": state, "finished_at": self._last_time or time.time()})
                self.outcome.steps = _steps(self.dir)
        finally:
            with contextlib.suppress(Exception):
                self.source.close()
            if self._lock is not None:
                with contextlib.suppress(Exception):
                    self._lock.release()
                self._lock = None


def _steps(run_dir: Path) -> int:
    """Distinct steps holding metrics in the run."""
    conn = connect(run_dir / SPOOL_FILE, readonly=True)
    try:
        return int(conn.execute("SELECT count(DISTINCT step) FROM events "
                                "WHERE kind = 'metrics'").fetchone()[0])
    finally:
        conn.close()
