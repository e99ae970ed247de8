"""Resolve RUN arguments to run folders (both reports), and read a run's spool into
plain data for the ``--static`` report: metric series, tables, images, text, config and
the delivery state of each backend."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from trackmux.core import settings
from trackmux.core.configmerge import merge_config
from trackmux.core.events import (
    ArtifactEvent,
    ConfigEvent,
    HistogramEvent,
    ImageEvent,
    MetricsEvent,
    ProvenanceEvent,
    TableEvent,
    TextEvent,
)
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.writer import SPOOL_FILE
from trackmux.core.values.redact import redact_text


class RunNotFound(LookupError):
    """The RUN argument names neither a run directory nor a run id under the spool root."""


@dataclass(frozen=True)
class Delivery:
    """How far one backend got: events up to ``acked`` of ``last`` are in its storage."""

    backend: str
    acked: int
    last: int
    remote_id: str | None
    updated: float | None

    @property
    def pending(self) -> int:
        return max(0, self.last - self.acked)


@dataclass
class RunData:
    run_dir: Path
    meta: dict[str, Any]
    metrics: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    tables: list[TableEvent] = field(default_factory=list)
    images: list[ImageEvent] = field(default_factory=list)
    texts: list[TextEvent] = field(default_factory=list)
    histograms: list[HistogramEvent] = field(default_factory=list)
    artifacts: list[ArtifactEvent] = field(default_factory=list)
    config: dict[str, Any] | None = None
    #: what produced the run (issue 25), the latest attempt's
    provenance: ProvenanceEvent | None = None
    delivery: list[Delivery] = field(default_factory=list)
    last_seq: int = 0
    damage: list[str] = field(default_factory=list)
    label: str = ""
    #: wall time of the last event in the spool (the end of a run that never finished)
    last_time: float | None = None

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.run_dir.name)

    @property
    def name(self) -> str:
        return str(self.meta.get("name") or self.run_id)

    @property
    def last_step(self) -> int | None:
        steps = [points[-1][0] for points in self.metrics.values() if points]
        return max(steps) if steps else None


def resolve_run(arg: str | os.PathLike[str], root: str | os.PathLike[str] | None = None
                ) -> Path:
    """A run directory from ``arg``: a run directory, its spool.db, ``project/run_id``
    or a run id under the spool root (``root``, else ``TRACKMUX_DIR``, else ./trackmux);
    with a store selected (``--store``) the run in that store (trackmux/readers/);
    :class:`SpoolUnreadableError` if its spool cannot be read at all."""
    from trackmux.core.spool.runs import check_readable
    from trackmux.readers import resolve_in_selected_store

    try:
        found = resolve_in_selected_store(arg)
    except FileNotFoundError as exc:
        raise RunNotFound(str(exc)) from None
    if found is not None:
        return found
    return check_readable(_find_run(arg, root))


def _find_run(arg: str | os.PathLike[str], root: str | os.PathLike[str] | None) -> Path:
    path = Path(arg).expanduser()
    if path.is_file() and path.name == SPOOL_FILE:
        return path.parent.absolute()
    if (path / SPOOL_FILE).is_file():
        return path.absolute()
    base = settings.spool_root(root)
    text = str(arg)
    if (base / text / SPOOL_FILE).is_file():
        return (base / text).absolute()
    matches = sorted(p.parent for p in base.glob(f"*/{_glob_escape(text)}/{SPOOL_FILE}"))
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        where = ", ".join(str(m) for m in matches)
        raise RunNotFound(f"run id {text!r} exists in several projects ({where}); "
                          f"pass PROJECT/RUN_ID or the run directory")
    from trackmux.core.spool.runs import run_named

    try:
        named = run_named(text, base) if base.is_dir() else None
    except FileNotFoundError as exc:  # several runs share the name: they are listed
        raise RunNotFound(str(exc)) from None
    if named is not None:
        return named
    raise RunNotFound(f"no run {text!r}: not a run directory (no {SPOOL_FILE} in it) and no "
                      f"run with that id or name under {base} (set TRACKMUX_DIR or pass "
                      "--dir)")


def _glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def load_run(run_dir: Path) -> RunData:
    """Everything the report shows about one run, read once from its spool."""
    reader = SpoolReader(run_dir)
    try:
        data = RunData(run_dir=run_dir, meta=reader.meta())
        for event in reader.iter_events(skip=frozenset({"samples"})):  # samples: read per step
            if data.last_time is None or event.time > data.last_time:
                data.last_time = event.time
            if isinstance(event, MetricsEvent):
                for key, value in event.data.items():
                    data.metrics.setdefault(key, []).append((event.step, float(value)))
            elif isinstance(event, TableEvent):
                data.tables.append(event)
            elif isinstance(event, ImageEvent):
                data.images.append(event)
            elif isinstance(event, TextEvent):
                data.texts.append(event)
            elif isinstance(event, HistogramEvent):
                data.histograms.append(event)
            elif isinstance(event, ArtifactEvent):
                data.artifacts.append(event)
            elif isinstance(event, ConfigEvent):
                data.config = merge_config(data.config or {}, event.config)
            elif isinstance(event, ProvenanceEvent):
                data.provenance = event
                if event.diff and not event.data.get("git", {}).get("diff_redacted"):
                    # a spool older than issue 34, whose diff was not redacted at the source
                    data.provenance = replace(event, diff=redact_text(event.diff))
        data.last_seq = reader.last_seq()
        cursors = reader.cursors()
        names = list(data.meta.get("backends") or [])
        names += [name for name in sorted(cursors) if name not in names]
        for name in names:
            cursor = cursors.get(name)
            data.delivery.append(Delivery(
                name, cursor.acked_seq if cursor else 0, data.last_seq,
                cursor.remote_id if cursor else None, cursor.updated if cursor else None))
        data.damage = list(reader.damage.errors)
    finally:
        reader.close()
    for points in data.metrics.values():
        points.sort(key=lambda p: p[0])
    return data


def load_runs(args: list[str], root: str | os.PathLike[str] | None = None) -> list[RunData]:
    """Load each RUN argument and give every run a legend label that tells them apart."""
    runs = [load_run(resolve_run(arg, root)) for arg in args]
    names = [run.name for run in runs]
    for run in runs:
        run.label = run.name if names.count(run.name) == 1 else f"{run.name} ({run.run_id})"
    return runs
