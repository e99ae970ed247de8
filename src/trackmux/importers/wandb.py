"""wandb run folders (``wandb/run-*``, ``wandb/offline-run-*``), read by wandb's own
transaction-log reader: ``wandb leet inspect --json`` (wandb-core), one JSON record a line.

A wandb run may span several folders (each ``wandb.init`` of a resumed run writes its own
``run-<id>.wandb``): they are one trackmux run, read oldest first. Carried over:

- history rows: every numeric value at its ``_step`` with its ``_timestamp`` (nested
  keys as wandb flattens them, ``a.b``); ``NaN``/``Infinity`` kept;
- tables (``table-file``: the table's JSON in the run's ``files/``), images
  (``image-file``: the PNG), histograms (``histogram``: wandb's bins and values);
- config (the run record and later config records) and the last summary (under
  ``_wandb.summary``), the project, the run's name and start time.

Not carried over: system metrics (``stats`` records), console output, artifacts' files,
other media (audio, video, 3D, HTML). Each log file's cursor is the number of its last
record imported (wandb numbers them), so a run that went on adds only its new records;
``--follow`` keeps a ``leet inspect --follow`` reader per file and stops at the run's exit
record. What wandb's reader says about damage (a corrupt chunk skipped, an incomplete
file) is named as damage, as is a log written by a wandb newer than the installed one
(wandb's reader refuses it: "a newer wandb version is required"), with the offset of the
first corrupt chunk when there is one.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from trackmux.core.events import (
    Cell,
    Event,
    HistogramEvent,
    ImageEvent,
    MetricsEvent,
    TableEvent,
)
from trackmux.importers.base import Chunk, Damage, SourceError, SourceRun, scalar

CHUNK_EVENTS = 20_000
_FOLDER = re.compile(r"^(?:offline-)?run-(\d{8}_\d{6})-(.+)$")


def leet(path: Path, follow: bool = False) -> list[str]:
    """The command that prints ``path``'s records (wandb's own reader)."""
    return [sys.executable, "-m", "wandb", "leet", "inspect", "--json",
            *(["--follow", "--idle-timeout", "0"] if follow else []), str(path)]


class WandbRun(SourceRun):
    format = "wandb"

    def __init__(self, wandb_id: str, files: list[Path], where: str) -> None:
        key = f"{files[0].parent.parent.resolve()}\0{wandb_id}"
        super().__init__(key, wandb_id, where)
        self.wandb_id = wandb_id
        self.files = files
        self._config: dict[str, Any] = {}
        self._summary: dict[str, Any] = {}
        self._started: float | None = None
        self._exited = False
        self._tails: dict[Path, Tail] = {}

    def config(self) -> dict[str, Any]:
        config = {k: v for k, v in self._config.items() if k != "_wandb"}
        summary = {k: v for k, v in unflatten(self._summary).items()
                   if not k.startswith("_") and not (isinstance(v, dict) and "_type" in v)}
        return {**config, "_wandb": {"run_id": self.wandb_id, "summary": summary}}

    def started_at(self) -> float | None:
        return self._started

    def finished(self) -> bool:
        return self._exited

    def close(self) -> None:
        for tail in self._tails.values():
            tail.stop()
        self._tails.clear()

    def read(self, cursors: Mapping[str, Any], live: bool) -> Iterator[Chunk]:
        for path in self.files:
            name = f"{path.parent.name}/{path.name}"
            done = int((cursors.get(name) or {}).get("num", 0))
            if live:
                tail = self._tails.get(path)
                if tail is None:
                    tail = self._tails[path] = Tail(path)
                lines, problems = tail.drain()
            else:
                lines, problems = _read_all(path)
            chunk = Chunk()
            for problem in problems:
                if "incomplete" in problem:  # a torn tail: read again when the log grows
                    chunk.damage.append(Damage(str(path), -1, 1, f"truncated: {problem}",
                                               lasting=False))
                else:
                    offset = first_bad_chunk(path) if "corrupt" in problem else -1
                    chunk.damage.append(Damage(str(path), offset, 1, problem))
            last = done
            for line in lines:
                try:
                    record = json.loads(line)
                except ValueError:
                    chunk.damage.append(Damage(str(path), -1, 1, "wandb's reader printed a "
                                               f"line that is not JSON: {line[:80]!r}"))
                    continue
                num = int(record.get("num") or 0)
                kind = record.get("type")
                if kind in ("run", "config", "summary", "exit"):  # read whole each time:
                    self._meta_record(kind, record, path, chunk)  # the config is compared
                if num <= done:
                    continue
                last = max(last, num)
                self._record(kind, record, path, chunk)
                if len(chunk.events) >= CHUNK_EVENTS:
                    chunk.cursors[name] = {"num": last}
                    yield chunk
                    chunk = Chunk()
            chunk.cursors[name] = {"num": last}
            yield chunk

    def _meta_record(self, kind: str, record: dict[str, Any], path: Path, chunk: Chunk
                     ) -> None:
        body = record.get(kind) or {}
        if kind == "exit":
            self._exited = True
            return
        if kind == "summary":
            self._summary.update(body.get("update") or {})
            for item in body.get("remove") or []:
                self._summary.pop(str(item.get("key") if isinstance(item, dict) else item),
                                  None)
            return
        if kind == "run":
            started = body.get("start_time")
            if started and self._started is None:
                self._started = _seconds(started)
        update = (body.get("config") or {}).get("update") if kind == "run" else \
            body.get("update")
        if isinstance(update, dict):
            self._config.update(update)
        for item in (body.get("remove") or []) if kind == "config" else []:
            self._config.pop(str(item.get("key") if isinstance(item, dict) else item), None)

    def _record(self, kind: str, record: dict[str, Any], path: Path, chunk: Chunk) -> None:
        body = record.get(kind) or {}
        if kind == "history":
            self._history(body, path, chunk)

    def _history(self, body: dict[str, Any], path: Path, chunk: Chunk) -> None:
        item = body.get("item") or {}
        step = (body.get("step") or {}).get("num", item.get("_step", 0))
        step = int(step) if isinstance(step, (int, float)) else 0
        stamp = item.get("_timestamp")
        when = float(stamp) if isinstance(stamp, (int, float)) else time.time()
        tree = unflatten({k: v for k, v in item.items() if not k.startswith("_")})
        values: dict[str, float | int] = {}
        others: list[Event] = []
        self._walk(tree, "", values, others, step, when, path, chunk)
        if values:
            chunk.events.append(MetricsEvent(values, step, when))
        chunk.events += others

    def _walk(self, node: dict[str, Any], prefix: str, values: dict[str, float | int],
              others: list[Event], step: int, when: float, path: Path, chunk: Chunk) -> None:
        for key, value in node.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict):
                if "_type" in value:
                    try:
                        event = media(name, value, path.parent / "files", step, when)
                    except Exception as exc:  # a media file gone: named, the row goes on
                        chunk.damage.append(Damage(str(path), -1, 1, f"{name!r} at step "
                                                   f"{step} not read: {type(exc).__name__}: "
                                                   f"{exc}"))
                        continue
                    if event is not None:
                        others.append(event)
                    continue
                self._walk(value, name + ".", values, others, step, when, path, chunk)
                continue
            number = scalar(value)
            if number is not None and not isinstance(value, bool):
                values[name] = number


def unflatten(item: Mapping[str, Any]) -> dict[str, Any]:
    """wandb's dotted history keys back into the nested dicts they were logged as."""
    out: dict[str, Any] = {}
    for key, value in item.items():
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {} if child is None else {"": child}
            node = child
        if isinstance(node.get(parts[-1]), dict):
            node[parts[-1]][""] = value
        else:
            node[parts[-1]] = value
    return out


def media(key: str, value: dict[str, Any], files: Path, step: int, when: float
          ) -> Event | None:
    """A wandb media value as an event (None for a kind that is not carried over)."""
    kind = value.get("_type")
    if kind == "table-file":
        data = json.loads((files / str(value["path"])).read_text())
        rows = tuple(tuple(_cell(c) for c in row) for row in data.get("data") or [])
        return TableEvent(key, tuple(str(c) for c in data.get("columns") or []), rows, step,
                          when)
    if kind == "image-file":
        png = (files / str(value["path"])).read_bytes()
        from io import BytesIO

        from PIL import Image

        with Image.open(BytesIO(png)) as image:
            width, height, mode = image.width, image.height, image.mode
            if not png.startswith(b"\x89PNG"):
                out = BytesIO()
                image.save(out, format="PNG")
                png = out.getvalue()
        return ImageEvent(key, png, width, height, mode, step, when, value.get("caption"))
    if kind == "histogram":
        bins = [float(b) for b in value.get("bins") or []]
        counts = [int(c) for c in value.get("values") or []]
        total = sum(counts)
        if len(bins) != len(counts) + 1 or total <= 0:
            return HistogramEvent(key, (), (), 0, None, None, None, None, step, when)
        centres = [(bins[i] + bins[i + 1]) / 2 for i in range(len(counts))]
        mean = sum(c * n for c, n in zip(centres, counts, strict=True)) / total
        variance = sum((c - mean) ** 2 * n for c, n in zip(centres, counts, strict=True)) / total
        return HistogramEvent(key, tuple(counts), tuple(bins), total, bins[0], bins[-1], mean,
                              variance ** 0.5, step, when)
    return None


def _cell(value: Any) -> Cell:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.dumps(value, default=str)


def _seconds(text: str) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _problems(stderr: str) -> list[str]:
    """What wandb's reader said about damage (its own words)."""
    return [line.split("wandb leet inspect:", 1)[-1].strip()
            for line in stderr.splitlines() if line.strip()
            and ("corrupt" in line or "incomplete" in line or "error" in line.lower())]


def _read_all(path: Path) -> tuple[list[str], list[str]]:
    try:
        done = subprocess.run(leet(path), capture_output=True, text=True, timeout=600,
                              env={**os.environ, "WANDB_SILENT": "true"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], [f"wandb's reader did not run: {exc}"]
    problems = _problems(done.stderr)
    if done.returncode != 0 and not problems:
        problems = [f"wandb's reader failed ({done.returncode}): {done.stderr.strip()[:300]}"]
    return done.stdout.splitlines(), problems


def first_bad_chunk(path: Path) -> int:
    """Offset of the first chunk of a wandb log whose CRC fails (-1 if none is found):
    wandb's reader names the damage, not where it is."""
    import struct
    import zlib

    block, header = 32768, 7
    try:
        data = path.read_bytes()
    except OSError:
        return -1
    pos = 7  # the file header (":W&B", magic, version)
    while pos + header <= len(data):
        room = block - pos % block
        if room < header:
            pos += room
            continue
        crc, length, kind = struct.unpack_from("<IHB", data, pos)
        if kind == 0 and length == 0:
            pos += room
            continue
        payload = data[pos + header:pos + header + length]
        if len(payload) < length or zlib.crc32(payload, zlib.crc32(bytes([kind]))) != crc:
            return pos
        pos += header + length
    return -1


def peek(path: Path) -> dict[str, Any]:
    """The run record of a log (project, display name), read by wandb's reader up to it."""
    proc = subprocess.Popen(leet(path), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env={**os.environ, "WANDB_SILENT": "true"})
    try:
        assert proc.stdout is not None
        for line, _ in zip(proc.stdout, range(50), strict=False):
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if record.get("type") == "run":
                    return dict(record.get("run") or {})
        return {}
    finally:
        proc.kill()
        proc.wait()


class Tail:
    """A ``leet inspect --follow`` reader of one live log, its lines gathered by a
    thread (``--follow``)."""

    def __init__(self, path: Path) -> None:
        self.lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.errors: list[str] = []
        self.proc = subprocess.Popen(leet(path, follow=True), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "WANDB_SILENT": "true"})
        self._threads = [threading.Thread(target=self._pump, args=(stream, sink), daemon=True,
                                          name="trackmux-import-wandb")
                         for stream, sink in ((self.proc.stdout, self.lines.put),
                                              (self.proc.stderr, self.errors.append))]
        for thread in self._threads:
            thread.start()

    @staticmethod
    def _pump(stream: Any, sink: Any) -> None:
        for line in stream:
            sink(line.rstrip("\n"))

    def drain(self) -> tuple[list[str], list[str]]:
        out: list[str] = []
        with contextlib.suppress(queue.Empty):
            while True:
                out.append(self.lines.get_nowait())
        problems = _problems("\n".join(self.errors))
        self.errors.clear()
        return out, [p for p in problems if "incomplete" not in p]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _run_folders(root: Path) -> list[Path]:
    """wandb run folders at or below ``root`` (a run folder, a ``wandb`` dir, or a folder
    holding one), without the ``latest-run`` link."""
    if _FOLDER.match(root.name) and any(root.glob("run-*.wandb")):
        return [root]
    found: list[Path] = []
    for base in (root, root / "wandb"):
        found += [p for p in base.glob("*run-*") if p.is_dir() and not p.is_symlink()
                  and _FOLDER.match(p.name) and any(p.glob("run-*.wandb"))]
    return sorted(set(found))


def find(source: str, options: Mapping[str, Any]) -> list[SourceRun]:
    if source.startswith("wandb:"):
        from trackmux.importers.wandb_api import find_remote

        return find_remote(source)
    path = Path(source).expanduser()
    if path.is_file() and path.suffix == ".wandb":
        single = WandbRun(path.stem.removeprefix("run-"), [path], source)
        single.project = peek(path).get("project") or None
        return [single]
    if not path.is_dir():
        raise SourceError(f"{source}: no such folder")
    by_id: dict[str, list[Path]] = {}
    for folder in _run_folders(path):
        for log in folder.glob("run-*.wandb"):
            by_id.setdefault(log.stem.removeprefix("run-"), []).append(log)
    if not by_id:
        raise SourceError(f"{source}: no wandb run folders (run-*/ or offline-run-*/ holding "
                          "run-<id>.wandb) at or below it")
    runs: list[SourceRun] = []
    for wandb_id, logs in sorted(by_id.items()):
        logs.sort(key=lambda p: (_FOLDER.match(p.parent.name).group(1)  # type: ignore[union-attr]
                                 if _FOLDER.match(p.parent.name) else "", p.parent.name))
        where = str(logs[0].parent) if len(logs) == 1 else f"{source} (wandb run {wandb_id})"
        run = WandbRun(wandb_id, logs, where)
        first = peek(logs[0])
        run.project = first.get("project") or None
        run.name = first.get("display_name") or wandb_id
        runs.append(run)
    return runs
