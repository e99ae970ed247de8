"""``trackmux import``: runs people already have, in any tracker, turned into trackmux runs.

A wing over core: each module here reads one foreign format with the library that owns
it and yields ordinary events (:mod:`trackmux.importers.base`); :mod:`.engine` commits
them to an ordinary spool with a cursor per source file, so ``runs``, ``show``,
``doctor``, ``report``, ``ui`` and ``sync`` work on an imported run unchanged, a second
import adds only what is new, and ``--follow`` is the same reader, tailing.

Formats (``--format``) and the module that reads each; modules load on use, so a format
whose library is not installed costs nothing until it is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from trackmux.importers.base import SourceError, SourceRun

__all__ = ["FORMATS", "SourceError", "SourceRun", "detect", "find_runs"]

#: format -> module; each module has ``find(source, options) -> list[SourceRun]``
FORMATS: dict[str, str] = {
    "tensorboard": "trackmux.importers.tensorboard",
    "wandb": "trackmux.importers.wandb",
    "mlflow": "trackmux.importers.mlflow",
    "trackio": "trackmux.importers.trackio",
    "trainer_state": "trackmux.importers.trainer_state",
    "console": "trackmux.importers.console",
    "jsonl": "trackmux.importers.tabular",
    "csv": "trackmux.importers.tabular",
}

#: what the library of each format is installed with (named when it is missing)
EXTRAS = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow",
          "trackio": "trackio"}


class Finder(Protocol):
    def __call__(self, source: str, options: Mapping[str, Any]) -> list[SourceRun]: ...


def _finder(fmt: str) -> Finder:
    module = importlib.import_module(FORMATS[fmt])
    finder: Finder = module.find_jsonl if fmt == "jsonl" else (
        module.find_csv if fmt == "csv" else module.find)
    return finder


def detect(source: str) -> str:
    """The format of ``source`` from its prefix, its name and a look inside; raises
    :class:`SourceError` naming what was looked for when nothing matches."""
    for prefix in ("mlflow", "wandb", "trackio"):
        if source.startswith(prefix + ":"):
            return prefix
    path = Path(source).expanduser()
    if not path.exists():
        raise SourceError(f"{source}: no such file or folder")
    if path.is_dir():
        return _detect_dir(path)
    name = path.name
    if name.startswith("events.out.tfevents"):
        return "tensorboard"
    if name.endswith(".wandb"):
        return "wandb"
    if name == "trainer_state.json":
        return "trainer_state"
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".db" and _is_trackio_db(path):
        return "trackio"
    if suffix == ".json":
        return "jsonl"
    return "console"


def _detect_dir(path: Path) -> str:
    if path.name.startswith(("run-", "offline-run-")) and any(path.glob("run-*.wandb")):
        return "wandb"
    if (path / "trainer_state.json").is_file() or any(path.glob("checkpoint-*/trainer_state.json")):
        return "trainer_state"
    if any(path.glob("run-*/run-*.wandb")) or any(path.glob("offline-run-*/run-*.wandb")) \
            or any(path.glob("wandb/*run-*/run-*.wandb")):
        return "wandb"
    if any(path.rglob("events.out.tfevents*")):
        return "tensorboard"
    if any(path.glob("*.db")) and all(_is_trackio_db(p) for p in path.glob("*.db")):
        return "trackio"
    raise SourceError(f"{path}: a folder with no TensorBoard event files, wandb run folders, "
                      "trainer_state.json or trackio databases in it; name a file, or pass "
                      "--format")


def _is_trackio_db(path: Path) -> bool:
    import sqlite3

    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        finally:
            conn.close()
    except sqlite3.Error:
        return False
    return "metrics" in tables and "configs" in tables


def find_runs(source: str, fmt: str | None, options: Mapping[str, Any]) -> list[SourceRun]:
    """Every run ``source`` holds, read as ``fmt`` (None: detected)."""
    fmt = fmt or detect(source)
    if fmt not in FORMATS:
        raise SourceError(f"--format {fmt!r} is not one of {', '.join(sorted(FORMATS))}")
    try:
        return _finder(fmt)(source, options)
    except ModuleNotFoundError as exc:  # the format's library, imported on use
        extra = EXTRAS.get(fmt, fmt)
        raise SourceError(f"reading {fmt} needs {exc.name}: pip install 'trackmux[{extra}]'"
                          ) from None
