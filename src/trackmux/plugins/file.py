"""File backend: JSON lines in the format of verl's ``file`` logger, media beside it.

- metrics: ``<path>`` gets one line per ``log()``: ``{"step": N, "data": {...}}`` (NaN and
  inf are written as ``null``, as verl's logger does);
- tables: ``<stem>.tables.jsonl``, one line ``{"step", "key", "columns", "rows"}`` per table;
- text: ``<stem>.text.jsonl``; config: ``<stem>.config.json``;
- histograms: ``<stem>.histograms.jsonl``, one JSON record per histogram
  ``{"step", "key", "counts", "edges", "count", "min", "max", "mean", "std", "nan", "inf",
  "neginf"}``;
- artifacts: a copy of each file under ``<stem>_artifacts/<name>/step<step>/<path>`` and one
  line per artifact in ``<stem>.artifacts.jsonl`` (name, type, step, files with sha256);
- images: PNG files in ``<stem>_media/`` through core's fallback.

Where: option ``path``, else ``VERL_FILE_LOGGER_PATH``, else
``<root>/<project>/<run name>.jsonl`` with ``root`` from option ``root``, else
``VERL_FILE_LOGGER_ROOT``, else ``.`` (verl's rules). A new run truncates the file, as
verl does; a resumed delivery continues the same file (its path is kept with each
acknowledgement) and truncates each file to its last acknowledged size, so a redelivered
batch is written exactly once.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import orjson

from trackmux.core.backend import Backend, ResumeState, RunInfo
from trackmux.core.events import (
    ArtifactEvent,
    ConfigEvent,
    Event,
    HistogramEvent,
    MetricsEvent,
    TableEvent,
    TextEvent,
)
from trackmux.core.fallbacks import contained, path_component
from trackmux.hookspecs import RegisterBackend, hookimpl


def resolve_path(options: dict[str, Any], run: RunInfo) -> Path:
    explicit = options.get("path") or os.environ.get("VERL_FILE_LOGGER_PATH")
    if explicit:
        return Path(explicit).expanduser().absolute()
    root = options.get("root") or os.environ.get("VERL_FILE_LOGGER_ROOT") or "."
    return (Path(root).expanduser().absolute() / path_component(run.project)
            / f"{path_component(run.name)}.jsonl")


class FileBackend(Backend):
    name = "file"
    capabilities = frozenset({"metrics", "table", "text", "config", "histogram", "artifact"})

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        earlier = (resume.state or {}).get("path")
        explicit = self.options.get("path") or self.options.get("root") or any(
            os.environ.get(v) for v in ("VERL_FILE_LOGGER_PATH", "VERL_FILE_LOGGER_ROOT"))
        # A resumed delivery (e.g. `trackmux sync` from another directory) continues the
        # same file unless told otherwise.
        self.path = Path(earlier) if earlier and not explicit else resolve_path(self.options, run)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        stem = self.path.with_suffix("")
        self._paths = {
            "metrics": self.path,
            "table": stem.with_name(stem.name + ".tables.jsonl"),
            "text": stem.with_name(stem.name + ".text.jsonl"),
            "histogram": stem.with_name(stem.name + ".histograms.jsonl"),
            "artifact": stem.with_name(stem.name + ".artifacts.jsonl"),
        }
        self.artifacts_dir = stem.with_name(stem.name + "_artifacts")
        self.config_path = stem.with_name(stem.name + ".config.json")
        self._media = stem.with_name(stem.name + "_media")
        offsets = resume.state.get("offsets", {}) if resume.state else {}
        self._files: dict[str, IO[bytes]] = {}
        for kind, path in self._paths.items():
            handle = open(path, "ab+")  # noqa: SIM115 - kept open for the run
            handle.truncate(int(offsets.get(kind, 0)))
            handle.seek(0, os.SEEK_END)
            self._files[kind] = handle

    def write(self, events: Sequence[Event]) -> None:
        for event in events:
            if isinstance(event, MetricsEvent):
                line = {"step": event.step, "data": event.data}
                self._files["metrics"].write(orjson.dumps(line) + b"\n")
            elif isinstance(event, TableEvent):
                line = {"step": event.step, "key": event.key, "columns": event.columns,
                        "rows": event.rows}
                self._files["table"].write(orjson.dumps(line) + b"\n")
            elif isinstance(event, TextEvent):
                line = {"step": event.step, "key": event.key, "text": event.text}
                self._files["text"].write(orjson.dumps(line) + b"\n")
            elif isinstance(event, HistogramEvent):
                line = {"step": event.step, "key": event.key, "counts": event.counts,
                        "edges": event.edges, "count": event.count, "min": event.min,
                        "max": event.max, "mean": event.mean, "std": event.std,
                        **event.nonfinite}
                self._files["histogram"].write(orjson.dumps(line) + b"\n")
            elif isinstance(event, ArtifactEvent):
                self._copy_artifact(event)
            elif isinstance(event, ConfigEvent):
                tmp = self.config_path.with_suffix(".json.tmp")
                tmp.write_bytes(orjson.dumps(event.config, option=orjson.OPT_INDENT_2))
                tmp.replace(self.config_path)

    def _copy_artifact(self, event: ArtifactEvent) -> None:
        folder = contained(self.artifacts_dir, path_component(event.name)) / f"step{event.step}"
        files = []
        for file, local in zip(event.files, event.local, strict=True):
            target = contained(folder, file.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp")
            shutil.copyfile(local, tmp)
            tmp.replace(target)
            files.append({"path": file.path, "size": file.size, "sha256": file.sha256})
        line = {"step": event.step, "name": event.name, "type": event.type,
                "dir": str(folder), "files": files}
        self._files["artifact"].write(orjson.dumps(line) + b"\n")

    def flush(self) -> None:
        for handle in self._files.values():
            handle.flush()

    def state(self) -> dict[str, Any]:
        return {"path": str(self.path),
                "offsets": {kind: handle.tell() for kind, handle in self._files.items()}}

    def media_dir(self) -> Path:
        return self._media

    def close(self, status: str) -> None:
        for handle in self._files.values():
            handle.close()


@hookimpl
def trackmux_register_backends(register: RegisterBackend) -> None:
    register("file", FileBackend, description="verl-style JSON lines, PNG images beside them")
