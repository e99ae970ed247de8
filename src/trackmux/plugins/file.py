"""File backend: JSON lines in the format of verl's ``file`` logger, media beside it.

- metrics: ``<path>`` gets one line per ``log()``: ``{"step": N, "data": {...}}`` (NaN and
  inf are written as ``null``, as verl's logger does);
- tables: ``<stem>.tables.jsonl``, one line ``{"step", "key", "columns", "rows"}`` per table;
- text: ``<stem>.text.jsonl``; config: ``<stem>.config.json`` (the merged config so far,
  rewritten whole on each config event);
- images: PNG files in ``<stem>_media/`` through core's fallback;
- histograms: ``<stem>.histograms.jsonl``, one JSON record per histogram
  ``{"step", "key", "counts", "edges", "count", "min", "max", "mean", "std", "nan", "inf",
  "neginf"}``;
- provenance (issue 25): ``<stem>.provenance.json`` (what produced the run) and, when the
  tree had uncommitted changes, ``<stem>.provenance.diff``;
- findings of the doctor: ``<stem>.findings.jsonl``, one line ``{"step", "rule",
  "severity", "keys", "message"}`` per finding;
- artifacts: a copy of each file under ``<stem>_artifacts/<name>/step<step>/<path>`` and one
  line per artifact in ``<stem>.artifacts.jsonl`` (name, type, step, files with sha256).

Where: option ``path``, else ``VERL_FILE_LOGGER_PATH``, else
``<root>/<project>/<run name>.jsonl`` with ``root`` from option ``root``, else
``VERL_FILE_LOGGER_ROOT`` (verl's rules; a name too long for a file name is shortened
with a hash). With none of them set the output is in the run's own folder,
``<run dir>/file/<run name>.jsonl``, so nothing is written beside the run folders or in
the working directory; under verl the drop-in sets verl's default root (the working
directory) as the option ``root``.

One run per file. ``<stem>.run-id`` names the run that owns the output, and a live
delivery holds an exclusive lock on it. Another run with the same path (live at the same
time or later) writes ``<stem>-<run id>.jsonl`` instead of interleaving with or
overwriting the first run's delivered output. A file without an owner mark (verl's own,
or older) is truncated by a new run, as verl does.

Exactly once: a resumed delivery continues the same file (its path and sizes are kept with
each acknowledgement) and truncates each file to its last acknowledged size, so a
redelivered batch is written once. A batch that fails midway (disk full) is cut back to
where it started before the error is raised, so its retry writes it once. When the output
is shorter than what was acknowledged (deleted, truncated, replaced) it is never padded:
the backend rewrites it from the run's spool and says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from trackmux.core.backends.contract import Backend, ResumeState, RunInfo
from trackmux.core.delivery.fallbacks import contained, path_component
from trackmux.core.delivery.rebuild import acknowledged_batches
from trackmux.core.events import (
    ArtifactEvent,
    ConfigEvent,
    Event,
    FindingEvent,
    HistogramEvent,
    MetricsEvent,
    ProvenanceEvent,
    TableEvent,
    TextEvent,
)
from trackmux.hookspecs import RegisterBackend, hookimpl

log = logging.getLogger("trackmux")
KINDS = ("metrics", "table", "text", "histogram", "artifact", "finding")


def resolve_path(options: dict[str, Any], run: RunInfo) -> Path:
    explicit = options.get("path") or os.environ.get("VERL_FILE_LOGGER_PATH")
    if explicit:
        return Path(explicit).expanduser().absolute()
    root = options.get("root") or os.environ.get("VERL_FILE_LOGGER_ROOT")
    if not root:  # the run's own folder: never beside the run folders of the trackmux dir
        return run.run_dir / "file" / f"{path_component(run.name)}.jsonl"
    return (Path(root).expanduser().absolute() / path_component(run.project)
            / f"{path_component(run.name)}.jsonl")


def _sibling(path: Path, suffix: str) -> Path:
    stem = path.with_suffix("")
    return stem.with_name(stem.name + suffix)
OPTIONS = ("path", "root")


class FileBackend(Backend):
    name = "file"
    capabilities = frozenset({"metrics", "table", "text", "config", "histogram", "artifact",
                              "provenance", "finding"})
    destination_options = ("path", "root")
    max_sample_rows = 256  # samples shown per log_samples batch (docs/samples.md)

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        for key, value in self.options.items():
            if key not in OPTIONS:
                raise ValueError(f"unknown file option {key!r}; known: {list(OPTIONS)}")
            if value is not None and not isinstance(value, (str, os.PathLike)):
                raise TypeError(f"file option {key!r} must be a path (str), got "
                                f"{type(value).__name__}")

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        try:
            self._open(run, resume)
        except BaseException:
            # A failed open (a full disk while writing the owner mark) must not keep its
            # files locked: the retry binds them again, from a fresh backend object.
            self.close("retrying")
            raise

    def _open(self, run: RunInfo, resume: ResumeState) -> None:
        state = dict(resume.state or {})
        earlier = state.get("path")
        explicit = self.options.get("path") or self.options.get("root") or any(
            os.environ.get(v) for v in ("VERL_FILE_LOGGER_PATH", "VERL_FILE_LOGGER_ROOT"))
        # A resumed delivery (e.g. `trackmux sync` from another directory) continues the
        # same file unless told otherwise.
        path = Path(earlier) if earlier and not explicit else resolve_path(self.options, run)
        offsets = {k: int(v) for k, v in (state.get("offsets") or {}).items()}
        continuing = bool(earlier) and Path(str(earlier)) == path and resume.acked_seq > 0
        self.run = run
        refused = self._bind(path, run.run_id)
        if refused:  # never overwrite or interleave another run
            alt = _sibling(path, f"-{run.run_id}.jsonl")
            log.warning("trackmux: file output %s %s; run %s is written to %s",
                        path, refused, run.run_id, alt)
            continuing = False
            if self._bind(alt, run.run_id):
                raise RuntimeError(f"file output {path} and {alt} are both in use by another "
                                   "process")
        sizes = {kind: os.fstat(self._fds[kind]).st_size for kind in KINDS}
        rebuild = resume.acked_seq > 0 and not continuing
        if continuing and self._owner(self.path) != run.run_id:
            rebuild = True  # the owner mark is gone: the output was replaced or deleted
        short = [k for k in KINDS if sizes[k] < offsets.get(k, 0)]
        if continuing and short:
            log.warning("trackmux: file output %s is shorter than what was delivered (%s); "
                        "it was deleted or truncated, so it is rewritten from the spool",
                        self._paths[short[0]], ", ".join(
                            f"{k}: {sizes[k]} of {offsets.get(k, 0)} bytes" for k in short))
            rebuild = True
        for kind in KINDS:
            keep = offsets.get(kind, 0) if continuing and not rebuild else 0
            os.ftruncate(self._fds[kind], keep)
            os.lseek(self._fds[kind], keep, os.SEEK_SET)
        self._write_owner(run.run_id)
        if rebuild:
            self._rebuild(run, resume.acked_seq)

    def _bind(self, path: Path, run_id: str) -> str | None:
        """Open the files at ``path`` and lock them for this run: None when bound, else why
        not. The owner mark is read under the lock, so a run that finished between a
        check and the lock (its output complete, its lock released) is never truncated."""
        path.parent.mkdir(parents=True, exist_ok=True)
        paths = {"metrics": path, "table": _sibling(path, ".tables.jsonl"),
                 "text": _sibling(path, ".text.jsonl"),
                 "histogram": _sibling(path, ".histograms.jsonl"),
                 "artifact": _sibling(path, ".artifacts.jsonl"),
                 "finding": _sibling(path, ".findings.jsonl")}
        metrics = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _lock(metrics)
        except BlockingIOError:
            os.close(metrics)
            return "is in use by another live run"
        owner = self._owner(path)
        if owner not in (None, run_id):
            os.close(metrics)  # releases the lock
            return f"belongs to run {owner}"
        fds = {kind: metrics if kind == "metrics" else os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
               for kind, p in paths.items()}
        self.path = path
        self._paths = paths
        self._fds = fds
        self.config_path = _sibling(path, ".config.json")
        self._media = _sibling(path, "_media")
        self.artifacts_dir = _sibling(path, "_artifacts")
        return None

    @staticmethod
    def _owner(path: Path) -> str | None:
        try:
            return _sibling(path, ".run-id").read_text().strip() or None
        except (OSError, UnicodeDecodeError):
            return None

    def _write_owner(self, run_id: str) -> None:
        mark = _sibling(self.path, ".run-id")
        tmp = mark.with_suffix(".run-id.tmp")
        tmp.write_text(run_id + "\n")
        tmp.replace(mark)

    def _copy_artifact(self, event: ArtifactEvent) -> dict[str, Any]:
        """Copy the artifact's files under ``<stem>_artifacts``; its line for the index."""
        folder = contained(self.artifacts_dir, path_component(event.name)) / f"step{event.step}"
        files = []
        for file, local in zip(event.files, event.local, strict=True):
            target = contained(folder, file.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp")
            shutil.copyfile(local, tmp)
            tmp.replace(target)
            files.append({"path": file.path, "size": file.size, "sha256": file.sha256})
        return {"step": event.step, "name": event.name, "type": event.type,
                "dir": str(folder), "files": files}

    def _rebuild(self, run: RunInfo, upto: int) -> None:
        """Write events 1..``upto`` again from the spool: the output of what was already
        acknowledged is gone, and core delivers only what comes after it."""
        for batch in acknowledged_batches(run, self, upto):
            self.write(batch)

    def write(self, events: Sequence[Event]) -> None:
        out: dict[str, list[bytes]] = {kind: [] for kind in KINDS}
        config: ConfigEvent | None = None
        for event in events:
            if isinstance(event, MetricsEvent):
                line = {"step": event.step, "data": event.data}
                out["metrics"].append(orjson.dumps(line))
            elif isinstance(event, TableEvent):
                line = {"step": event.step, "key": event.key, "columns": event.columns,
                        "rows": event.rows}
                out["table"].append(orjson.dumps(line))
            elif isinstance(event, TextEvent):
                line = {"step": event.step, "key": event.key, "text": event.text}
                out["text"].append(orjson.dumps(line))
            elif isinstance(event, HistogramEvent):
                line = {"step": event.step, "key": event.key, "counts": event.counts,
                        "edges": event.edges, "count": event.count, "min": event.min,
                        "max": event.max, "mean": event.mean, "std": event.std,
                        **event.nonfinite}
                out["histogram"].append(orjson.dumps(line))
            elif isinstance(event, ArtifactEvent):
                out["artifact"].append(orjson.dumps(self._copy_artifact(event)))
            elif isinstance(event, FindingEvent):
                out["finding"].append(orjson.dumps({"step": event.step, **event.as_dict()}))
            elif isinstance(event, ConfigEvent):
                config = event
            elif isinstance(event, ProvenanceEvent):
                self._provenance(event)
        starts = {kind: os.lseek(fd, 0, os.SEEK_CUR) for kind, fd in self._fds.items()}
        try:
            for kind, lines in out.items():
                if lines:
                    _write_all(self._fds[kind], b"\n".join(lines) + b"\n")
            if config is not None:
                tmp = self.config_path.with_suffix(".json.tmp")
                tmp.write_bytes(orjson.dumps(config.config, option=orjson.OPT_INDENT_2))
                tmp.replace(self.config_path)
        except BaseException:
            # Cut every file back to where this batch began: the retry writes it once.
            for kind, fd in self._fds.items():
                try:
                    os.ftruncate(fd, starts[kind])
                    os.lseek(fd, starts[kind], os.SEEK_SET)
                except OSError:
                    pass
            raise

    def _provenance(self, event: ProvenanceEvent) -> None:
        """Rewritten whole (an attempt's provenance replaces the earlier one's)."""
        for suffix, body in ((".provenance.json", orjson.dumps(
                {"step": event.step, "time": event.time, **event.data},
                option=orjson.OPT_INDENT_2)), (".provenance.diff", event.diff.encode())):
            target = _sibling(self.path, suffix)
            if not body:
                continue
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_bytes(body)
            tmp.replace(target)

    def state(self) -> dict[str, Any]:
        return {"path": str(self.path),
                "offsets": {kind: os.lseek(fd, 0, os.SEEK_CUR)
                            for kind, fd in self._fds.items()}}

    def media_dir(self) -> Path:
        return self._media

    def where(self) -> str:
        return str(self.path)

    def close(self, status: str) -> None:
        fds = getattr(self, "_fds", {})
        for kind, fd in fds.items():
            # A run that logged no tables, text, histograms or artifacts leaves no empty
            # side files (opening them lazily would complicate the offset bookkeeping).
            # Removed while the lock on the metrics file is still held.
            with contextlib.suppress(OSError):
                if kind != "metrics" and os.fstat(fd).st_size == 0:
                    self._paths[kind].unlink()
        for fd in fds.values():
            os.close(fd)
        self._fds = {}


def _lock(fd: int) -> None:
    """An exclusive, non-blocking lock held while a live delivery writes (released when the
    process ends, however it ends). Where there is no ``fcntl`` there is no lock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX
        return
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


@hookimpl
def trackmux_register_backends(register: RegisterBackend) -> None:
    register("file", FileBackend, description="verl-style JSON lines, PNG images beside them")
