"""swanlab backend: metrics, config, tables, images and text in a swanlab run.

Where and how, read as verl's swanlab logger reads them (an option wins over the variable):

- ``mode`` / ``SWANLAB_MODE``: ``offline`` (the default here), ``disabled``, ``cloud`` or
  ``online``, ``local``. verl defaults to ``cloud``; trackmux defaults to ``offline``
  because the spool already keeps every event for later delivery, so nothing should reach
  the network (or prompt for a login) unless it was asked for.
- ``log_dir`` / ``SWANLAB_LOG_DIR``: default the run's own folder ``<run dir>/swanlog``
  (the verl drop-in sets verl's default, ``swanlog`` in the working directory). An
  offline run is the folder ``<log_dir>/run-<time>-<id>/``.
- ``api_key`` / ``SWANLAB_API_KEY``: ``swanlab.login`` with it, only in cloud mode.
- ``workspace``, ``description``, ``drain_timeout`` (seconds ``flush`` waits for swanlab's
  background writer, default 10).

Event kinds: metrics with ``run.log(data, step=)``; config with ``run.config.update`` (nested,
already redacted); tables as ``swanlab.echarts.Table`` (swanlab's own table, shown as a
grid); images as ``swanlab.Image`` with their caption; text as ``swanlab.Text``.

Keys: swanlab trims `` \t\n\r./`` from both ends of a key and cuts it at 255 characters,
so ``loss/`` and `` loss`` would both land on ``loss``. Each key is sent already in the
form swanlab keeps, and two keys of one run never share one: a key whose trimmed form
another key already has gets a suffix from its own hash (core/backends/keynames.py; the
names are kept in ``state()`` so resume and sync give every key the same name).

Exactly-once: swanlab keeps the first value of a (key, step) in one process and drops
the rest. A resumed delivery (a crash after ``write`` but before the acknowledgement)
is a new swanlab process-level run, so that dedupe does not reach back: ``open`` reads the
earlier run folders of this run (from the offset recorded at the last acknowledgement on)
and skips each (key, step) they already hold. ``flush`` waits until swanlab's background
thread has written what it was given and flushes its file, so what core acknowledges is
on disk.

Resume: the swanlab run id is the ``remote_id``. A resumed delivery calls
``swanlab.init(id=..., resume="allow")``; offline, swanlab writes a new folder with the
same id (``swanlab sync`` of both folders continues one cloud experiment). The new folder
is created only once there is something to write.

Rewind (core/spool/attempts.py): an attempt that went back to step N writes its values for the
steps > N into the new folder; the earlier folder keeps the superseded values (swanlab has
no call to delete a point). A fresh ``trackmux sync`` sends only the live events.
"""

from __future__ import annotations

import glob
import io
import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from trackmux.core.backends.contract import Backend, ResumeState, RunInfo
from trackmux.core.backends.keynames import KeyNames
from trackmux.core.events import (
    ConfigEvent,
    Event,
    ImageEvent,
    MetricsEvent,
    ProvenanceEvent,
    TableEvent,
    TextEvent,
)
from trackmux.hookspecs import RegisterBackend, hookimpl

log = logging.getLogger(__name__)

MODES = ("offline", "disabled", "cloud", "online", "local")
OPTIONS = frozenset({"mode", "log_dir", "api_key", "workspace", "description", "drain_timeout"})
#: swanlab trims these from both ends of a key and cuts keys at 255 characters.
_KEY_STRIP = " \t\n\r./"
_KEY_MAX = 255

# The run file is a LevelDB-style log (swanlab's store): a 7-byte file header, then
# records of crc32 (4) + length (2) + type (1) + data in 32 KiB blocks.
_FILE_HEADER = 7
_BLOCK = 32768
_RECORD_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_IDENT = b":SWL"


def swanlab_key(key: str) -> str:
    """The key as swanlab stores it (trimmed, at most 255 characters)."""
    return key.strip(_KEY_STRIP)[:_KEY_MAX].strip(_KEY_STRIP) or "_"


def run_file(run_dir: Path) -> Path | None:
    """The ``run-<id>.swanlab`` log inside a swanlab run folder, if there is one."""
    files = sorted(run_dir.glob("run-*.swanlab"))
    return files[0] if files else None


def scan_records(path: Path) -> Iterator[tuple[int, bytes]]:
    """Yield ``(end offset, payload)`` for each complete record of a swanlab run file.

    A small reader of its own (rather than swanlab's internal one) because resume needs
    byte offsets; it stops quietly at a torn or corrupt tail, as a crashed run leaves.
    """
    with open(path, "rb") as handle:
        header = handle.read(_FILE_HEADER)
        if len(header) < _FILE_HEADER or header[:4] != _IDENT:
            raise ValueError(f"{path} is not a swanlab run file")
        index = _FILE_HEADER
        pending = b""
        while True:
            left = _BLOCK - index % _BLOCK
            if left < _RECORD_HEADER:
                handle.read(left)
                index += left
            head = handle.read(_RECORD_HEADER)
            if len(head) < _RECORD_HEADER:
                return
            checksum, length, kind = struct.unpack("<IHB", head)
            data = handle.read(length)
            if len(data) < length or kind not in (_FULL, _FIRST, _MIDDLE, _LAST):
                return
            if zlib.crc32(data, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != checksum:
                return
            index += _RECORD_HEADER + length
            if kind == _FULL:
                yield index, data
            elif kind == _FIRST:
                pending = data
            elif kind == _MIDDLE:
                pending += data
            else:
                yield index, pending + data
                pending = b""


def stored_points(run_dirs: Sequence[str], checkpoint: dict[str, Any] | None
                  ) -> set[tuple[str, int]]:
    """(key, step) pairs swanlab stored after ``checkpoint`` in ``run_dirs`` (oldest first).

    Records before the checkpoint belong to acknowledged events, which core never sends
    again, so only the tail after it is kept in memory.
    """
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record

    start, offset = 0, 0
    if checkpoint and checkpoint.get("dir") in run_dirs:
        start = list(run_dirs).index(checkpoint["dir"])
        offset = int(checkpoint.get("offset") or 0)
    points: set[tuple[str, int]] = set()
    for position, name in enumerate(run_dirs[start:]):
        path = run_file(Path(name))
        if path is None:
            if Path(name).exists():
                continue
            log.warning("swanlab run folder %s is gone: events redelivered into it may be "
                        "stored twice", name)
            continue
        skip_to = offset if position == 0 else 0
        for end, payload in scan_records(path):
            if end <= skip_to:
                continue
            record = Record()
            record.ParseFromString(payload)
            kind = record.WhichOneof("record_type")
            if kind == "scalar":
                points.add((record.scalar.key, record.scalar.step))
            elif kind == "media":
                points.add((record.media.key, record.media.step))
    return points


def drain(run: Any, timeout: float) -> bool:
    """Wait until swanlab's background thread wrote what it was given, then flush its file.

    swanlab has no public flush: ``log`` queues events, a thread batches them into its
    store about 0.5 s after the queue goes idle, and the file is flushed only at finish.
    This reaches into swanlab's internals; if they moved, it returns False and durability
    is swanlab's own (flushed at finish).
    """
    try:
        queue = run._components.emitter.queue
        consumer = run._components.consumer
        store = run._core._store
        if store is None:
            return True
        deadline = time.monotonic() + timeout
        quiet, last_index = 0, -1
        while time.monotonic() < deadline:
            index = store._index
            idle = queue.empty() and consumer._batch_empty and index == last_index
            quiet = quiet + 1 if idle else 0
            if quiet >= 2:
                break
            last_index = index
            time.sleep(0.02)
        store.ensure_flushed()
        return True
    except (AttributeError, AssertionError, TypeError) as exc:
        log.debug("swanlab internals changed, cannot drain: %s", exc)
        return False


class SwanLabBackend(Backend):
    name = "swanlab"
    capabilities = frozenset({"metrics", "config", "table", "image", "text"})
    destination_options = ("log_dir", "workspace")
    max_sample_rows = 64  # samples shown per log_samples batch (docs/samples.md)
    #: swanlab allows one run per process; deliveries to it take turns.
    _process_lock = threading.Lock()

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        unknown = sorted(set(self.options) - OPTIONS)
        if unknown:
            raise ValueError(f"unknown swanlab option(s) {unknown}; known: {sorted(OPTIONS)}")
        mode = self.options.get("mode") or os.environ.get("SWANLAB_MODE") or "offline"
        if mode not in MODES:
            source = "option mode" if self.options.get("mode") else "SWANLAB_MODE"
            raise ValueError(f"swanlab {source} must be one of {MODES}, got {mode!r}")
        self.mode: str = "online" if mode == "cloud" else mode
        chosen = self.options.get("log_dir") or os.environ.get("SWANLAB_LOG_DIR")
        #: when no folder was chosen, ``open`` sets the run's own folder
        self.log_dir: Path = Path(chosen or "swanlog").expanduser().absolute()
        self._log_dir_chosen = bool(chosen)
        self.api_key: str | None = self.options.get("api_key") or os.environ.get(
            "SWANLAB_API_KEY") or None
        try:
            self.drain_timeout = float(self.options.get("drain_timeout", 10.0))
        except (TypeError, ValueError):
            raise ValueError("swanlab option drain_timeout must be a number of seconds, got "
                             f"{self.options.get('drain_timeout')!r}") from None
        self._run: Any = None
        self._id: str | None = None
        self._run_dirs: list[str] = []
        self._checkpoint: dict[str, Any] | None = None
        self._stored: set[tuple[str, int]] = set()
        self._locked = False
        self._drain_warned = False
        self._names = KeyNames(swanlab_key, "swanlab key", max_length=_KEY_MAX)

    # -- lifecycle ---------------------------------------------------------------------
    def open(self, run: RunInfo, resume: ResumeState) -> None:
        try:
            import swanlab
        except ImportError as exc:
            raise ImportError("the swanlab backend needs swanlab: pip install swanlab (or, "
                              "in the trackmux checkout, pip install -e '.[swanlab]')") from exc
        self._swanlab = swanlab
        self._info = run
        if not self._log_dir_chosen:
            self.log_dir = run.run_dir / "swanlog"
        if self.api_key and self.mode != "online":
            log.info("SWANLAB_API_KEY is set but swanlab mode is %r: nothing is uploaded; "
                     "set SWANLAB_MODE=cloud to upload", self.mode)
        state = dict(resume.state or {})
        names = state.get("names")
        self._names = KeyNames(swanlab_key, "swanlab key", max_length=_KEY_MAX,
                               state=names if isinstance(names, dict) else None)
        self._run_dirs = [str(d) for d in state.get("run_dirs") or []]
        checkpoint = state.get("checkpoint")
        self._checkpoint = dict(checkpoint) if isinstance(checkpoint, dict) else None
        if resume.remote_id:
            self._id = resume.remote_id
            # Folders of this id the state does not name (state lost or from an older
            # trackmux) are read in full.
            pattern = f"run-*-{glob.escape(self._id)}"
            for folder in sorted(p for p in self.log_dir.glob(pattern) if p.is_dir()):
                if str(folder.absolute()) not in self._run_dirs:
                    self._run_dirs.append(str(folder.absolute()))
            self._stored = stored_points(self._run_dirs, self._checkpoint)
        else:
            self._start()

    def _start(self) -> None:
        """Start (or continue) the swanlab run; swanlab holds one run per process."""
        swanlab = self._swanlab
        if not self._process_lock.acquire(blocking=False):
            raise RuntimeError("another trackmux delivery holds this process's swanlab run "
                               "(swanlab allows one run per process); retrying later")
        self._locked = True
        try:
            if swanlab.has_run():
                raise RuntimeError("a swanlab run not started by trackmux is active in this "
                                   "process; swanlab allows one run per process")
            if self.mode == "online" and self.api_key:
                swanlab.login(api_key=self.api_key)
            kwargs: dict[str, Any] = {
                "project": self._info.project, "name": self._info.name, "mode": self.mode,
                "log_dir": str(self.log_dir), "tags": list(self._info.tags) or None,
                "workspace": self.options.get("workspace"),
                "description": self.options.get("description"),
            }
            if self._id:
                kwargs.update(id=self._id, resume="allow")
            self._run = swanlab.init(**{k: v for k, v in kwargs.items() if v is not None})
        except BaseException:
            self._release()
            raise
        self._id = str(self._run.id)
        if self.mode != "disabled":
            run_dir = str(Path(self._run.dir).absolute())
            if run_dir not in self._run_dirs:
                self._run_dirs.append(run_dir)

    def _release(self) -> None:
        if self._locked:
            self._locked = False
            self._process_lock.release()

    def write(self, events: Sequence[Event]) -> None:
        swanlab = self._swanlab
        names = self._names
        for event in events:
            step = event.step
            if isinstance(event, MetricsEvent):
                names.prepare(event.data)
                data = {names(k): v for k, v in event.data.items()
                        if (names(k), step) not in self._stored}
                if data:
                    self._started().log(data, step=step)
                continue
            if isinstance(event, ConfigEvent):
                self._started().config.update(event.config)
                continue
            if isinstance(event, ProvenanceEvent):  # core gives it as config (_provenance)
                continue
            key = names(event.key)
            if (key, step) in self._stored:
                continue
            if isinstance(event, TableEvent):
                table = swanlab.echarts.Table().add(list(event.columns),
                                                    [list(row) for row in event.rows])
                self._started().log({key: swanlab.ECharts(table)}, step=step)
            elif isinstance(event, ImageEvent):
                from PIL import Image

                with Image.open(io.BytesIO(event.png)) as image:
                    image.load()
                    media = swanlab.Image(image, caption=event.caption)
                self._started().log({key: media}, step=step)
            elif isinstance(event, TextEvent):
                self._started().log({key: swanlab.Text(event.text)}, step=step)

    def rewind(self, step: int) -> None:
        """Points beyond ``step`` that earlier folders hold were superseded: the resumed
        attempt's values at those steps are written (into this delivery's folder) instead
        of being skipped as redelivered. swanlab keeps them beside the earlier ones; see
        the Resume section of docs/backends/swanlab.md for what each reader shows."""
        self._stored = {(key, at) for key, at in self._stored if at <= step}

    def _started(self) -> Any:
        """The swanlab run, started on first use when resuming (no empty extra folder)."""
        if self._run is None:
            self._start()
        return self._run

    def flush(self) -> None:
        if self._run is None or self.mode == "disabled":
            return
        if not drain(self._run, self.drain_timeout) and not self._drain_warned:
            self._drain_warned = True
            log.warning("cannot wait for swanlab's writer (internals changed); events are "
                        "on disk only once swanlab flushes them")
        path = run_file(Path(self._run_dirs[-1])) if self._run_dirs else None
        if path is not None:
            self._checkpoint = {"dir": self._run_dirs[-1], "offset": path.stat().st_size}

    @property
    def remote_id(self) -> str | None:
        return self._id

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"run_dirs": list(self._run_dirs),
                                 "checkpoint": self._checkpoint}
        names = self._names.state()
        if names:
            state["names"] = names
        return state

    def close(self, status: str) -> None:
        if self._run is None:
            return
        try:
            if status in ("finished", "stopped"):  # stopped: ended cleanly (the doctor)
                self._run.finish()
            else:
                self._run.finish(state="crashed", error=f"trackmux delivery ended: {status}")
        finally:
            self._run = None
            self._release()


@hookimpl
def trackmux_register_backends(register: RegisterBackend) -> None:
    register("swanlab", SwanLabBackend, requires=("swanlab",), extra="swanlab",
             description="swanlab runs (offline by default): metrics, config, tables, "
                         "images, text")
