"""trackio's local database: ``<TRACKIO_DIR>/<project>.db`` (SQLite), a project or a run.

Sources: the ``.db`` file (every run in it), ``trackio:PROJECT`` or ``trackio:PROJECT/RUN``
(the database under ``TRACKIO_DIR``, else ``$HF_HOME/trackio``, where trackio keeps it).

The file is read read-only with its own schema (``metrics``: id, run, ISO timestamp, step,
a JSON object of values; ``configs``: one JSON config per run) rather than through
trackio's ``SQLiteStorage``: that reads a project by name under the ``TRACKIO_DIR``
fixed when trackio is first imported, and a run's whole history at once, while an import
wants any file and only the rows past its cursor (the last ``metrics.id`` imported).
Values are decoded as trackio stores them (``"NaN"``, ``"Infinity"``, ``"-Infinity"``
for the non-finite); media values (images, tables) and system metrics are not carried.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from trackmux.core.events import MetricsEvent
from trackmux.importers.base import Chunk, Damage, SourceError, SourceRun, scalar

PAGE = 20_000


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)


def _seconds(text: str) -> float:
    try:
        stamp = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return stamp.timestamp()


class TrackioRun(SourceRun):
    format = "trackio"

    def __init__(self, db: Path, column: str, ident: str, name: str, where: str) -> None:
        super().__init__(f"{db.resolve()}\0{ident}", name, where, db.stem)
        self.db = db
        self.column = column  # run_id in current trackio, run_name in older databases
        self.ident = ident

    def config(self) -> dict[str, Any]:
        conn = _connect(self.db)
        try:
            row = conn.execute(f"SELECT config FROM configs WHERE {self.column} = ? "
                               "ORDER BY id DESC LIMIT 1", (self.ident,)).fetchone()
        except sqlite3.Error:
            return {}
        finally:
            conn.close()
        config = json.loads(row[0]) if row else {}
        return config if isinstance(config, dict) else {"config": config}

    def started_at(self) -> float | None:
        conn = _connect(self.db)
        try:
            row = conn.execute(f"SELECT min(timestamp) FROM metrics WHERE {self.column} = ?",
                               (self.ident,)).fetchone()
        finally:
            conn.close()
        return _seconds(row[0]) if row and row[0] else None

    def read(self, cursors: Mapping[str, Any], live: bool) -> Iterator[Chunk]:
        last = int((cursors.get("metrics") or {}).get("id", 0))
        conn = _connect(self.db)
        try:
            while True:
                rows = conn.execute(f"SELECT id, timestamp, step, metrics FROM metrics WHERE "
                                    f"{self.column} = ? AND id > ? ORDER BY id LIMIT ?",
                                    (self.ident, last, PAGE)).fetchall()
                if not rows:
                    return
                chunk = Chunk()
                for row_id, stamp, step, body in rows:
                    last = int(row_id)
                    try:
                        data = json.loads(body)
                    except ValueError as exc:
                        chunk.damage.append(Damage(str(self.db), -1, 1, f"metrics row {row_id} "
                                                   f"is not JSON: {exc}"))
                        continue
                    values = {str(k): v for k, v in ((k, scalar(v)) for k, v in data.items())
                              if v is not None and not str(k).startswith("_")}
                    if values:
                        chunk.events.append(MetricsEvent(values, int(step), _seconds(stamp)))
                chunk.cursors["metrics"] = {"id": last}
                yield chunk
        except sqlite3.DatabaseError as exc:
            yield Chunk(damage=[Damage(str(self.db), -1, 1, f"cannot read: {exc}")])
        finally:
            conn.close()


def runs_in(db: Path, only: str | None = None) -> list[SourceRun]:
    try:
        conn = _connect(db)
        try:
            columns = {r[1] for r in conn.execute("PRAGMA table_info(metrics)")}
            column = "run_id" if "run_id" in columns else "run_name"
            found = conn.execute(f"SELECT {column}, run_name, min(id) FROM metrics GROUP BY "
                                 f"{column} ORDER BY min(id)").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise SourceError(f"{db}: not a trackio database ({exc})") from None
    runs: list[SourceRun] = [TrackioRun(db, column, str(ident), str(name),
                                        f"{db}#{name}") for ident, name, _ in found
                             if only is None or only in (name, ident)]
    if only is not None and not runs:
        raise SourceError(f"{db}: no run {only!r} in it")
    return runs


def find(source: str, options: Mapping[str, Any]) -> list[SourceRun]:
    if source.startswith("trackio:"):
        project, _, run = source.removeprefix("trackio:").partition("/")
        home = os.environ.get("TRACKIO_DIR") or os.path.join(
            os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"), "trackio")
        db = Path(home) / f"{project}.db"
        if not db.is_file():
            raise SourceError(f"{source}: no trackio project database {db}")
        return runs_in(db, run or None)
    path = Path(source).expanduser()
    if not path.is_file():
        raise SourceError(f"{source}: not a trackio database file")
    return runs_in(path)
