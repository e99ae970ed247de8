"""TensorBoard backend: event files written with tensorboard's own protos, no torch, no TF.

- metrics: one ``Event`` per ``log()`` call holding every key as a ``simple_value``
  (float32, as ``SummaryWriter.add_scalar`` writes them; NaN and inf are kept);
- text: the text plugin's string tensor (``text_pb``); tables arrive as markdown text
  through core's fallback, so ``table`` is deliberately not a capability;
- images: ``Summary.Image`` with the PNG core already encoded, width, height, colorspace;
- histograms: the native ``HistogramProto`` (min, max, num, sum, sum_squares, bucket
  limits and counts, as ``SummaryWriter.add_histogram`` writes it), plus scalars
  ``<key>/nan``, ``<key>/inf``, ``<key>/neginf`` when values were not finite;
- provenance (issue 25): markdown text under the tag ``provenance`` (the JSON record and
  the uncommitted diff, cut to 20 kB);
- config: a markdown table of the flattened params under tag ``config`` plus the hparams
  plugin's session-start summary (secrets were redacted by core before the spool).

Where: option ``log_dir``, else ``TENSORBOARD_DIR``, else
``<root>/<project>/<run name>`` with ``root`` from option ``root`` (verl's rule, with
verl's ``tensorboard_log`` set as ``root`` by the verl drop-in), else the run's own folder
``<run dir>/tensorboard`` (``tensorboard --logdir <trackmux dir>`` finds every run). Each
run gets one file,
``events.out.tfevents.<start time>.trackmux.<run id>``.

The default location is announced in the log and by ``trackmux sync``.

Exactly-once: ``state()`` records the file and its byte size after each flushed batch;
a resumed delivery truncates the file back to that size before writing, so a batch
whose acknowledgement was lost (or that was torn by a kill) is written exactly once. A
batch whose write fails (disk full) is cut back before the error is raised, so its retry
writes it once; a file shorter than what was delivered is rewritten from the spool.
This holds for every reader of the file, unlike a ``SessionLog.START`` marker, which
only hides duplicates from readers that purge orphaned data and assumes steps increase.

Resume (core/spool/attempts.py): the same file continues (its name and offset are in the spool).
When an attempt rewound to step N and this file already holds later steps, ``rewind``
writes ``SessionLog(status=START)`` at step N + 1 before the attempt's first event, which
is what ``SummaryWriter(purge_step=N + 1)`` writes: TensorBoard then drops every point at
step > N written before it, so each step shows one point, the resumed one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trackmux.core.backends.contract import Backend, ResumeState, RunInfo
from trackmux.core.delivery.fallbacks import (
    path_component,
    provenance_markdown,
    safe_filename,
    table_to_markdown,
)
from trackmux.core.delivery.rebuild import acknowledged_batches
from trackmux.core.events import (
    ConfigEvent,
    Event,
    HistogramEvent,
    ImageEvent,
    MetricsEvent,
    ProvenanceEvent,
    TableEvent,
    TextEvent,
)
from trackmux.core.values.normalize import flatten
from trackmux.hookspecs import RegisterBackend, hookimpl

log = logging.getLogger("trackmux")

OPTIONS = ("log_dir", "root")
CONFIG_TAG = "config"
FILE_VERSION = "brain.Event:2"
_COLORSPACE = {"L": 1, "1": 1, "I;16": 1, "LA": 2, "RGB": 3, "P": 3, "RGBA": 4}


def resolve_log_dir(options: dict[str, Any], run: RunInfo) -> Path:
    explicit = options.get("log_dir") or os.environ.get("TENSORBOARD_DIR")
    if explicit:
        return Path(explicit).expanduser().absolute()
    if not options.get("root"):
        return run.run_dir / "tensorboard"
    root = Path(options["root"]).expanduser().absolute()
    return root / path_component(run.project) / path_component(run.name)


def event_file_name(run: RunInfo) -> str:
    """One deterministic name per run, so a delivery that lost its cursor rewrites it."""
    return f"events.out.tfevents.{int(run.started_at):010d}.trackmux.{safe_filename(run.run_id)}"


class Framer:
    """TFRecord framing of many records at once: length, masked CRC-32C, data, masked CRC.

    tensorboard's own ``masked_crc32c`` is pure Python (about 0.1 us a byte, most of the
    cost of writing scalars), so records of similar length are checksummed together, one
    numpy lane per record; odd sizes fall back to tensorboard's function.
    """

    MIN_LANES = 16

    def __init__(self) -> None:
        import numpy as np
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

        self.np = np
        self.slow_crc = masked_crc32c
        table = []
        for byte in range(256):
            crc = byte
            for _ in range(8):
                crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
            table.append(crc)
        self.table = np.array(table, dtype=np.uint32)

    def frame(self, records: Sequence[bytes]) -> bytes:
        headers = [struct.pack("<Q", len(data)) for data in records]
        crcs = self.masked_crcs([*headers, *records])
        n = len(records)
        pack = struct.Struct("<I").pack
        return b"".join(b"".join((headers[i], pack(crcs[i]), records[i], pack(crcs[n + i])))
                        for i in range(n))

    def masked_crcs(self, records: Sequence[bytes]) -> list[int]:
        """The masked CRC-32C of each record (as TFRecord framing needs it)."""
        out = [0] * len(records)
        order = sorted(range(len(records)), key=lambda i: len(records[i]))
        group: list[int] = []
        for i in order:
            length = len(records[i])
            if group and (length > len(records[group[0]]) * 5 // 4 + 64 or len(group) >= 4096):
                self._group(records, group, out)
                group = []
            group.append(i)
        if group:
            self._group(records, group, out)
        return out

    def _group(self, records: Sequence[bytes], group: list[int], out: list[int]) -> None:
        if len(group) < self.MIN_LANES or len(records[group[0]]) < 4:
            for i in group:
                out[i] = self.slow_crc(records[i])
            return
        np = self.np
        lengths = np.array([len(records[i]) for i in group], dtype=np.int64)
        width = int(lengths.max())
        lanes = len(group)
        # Left-pad each record with zeros into a (width, lanes) matrix. Starting from 0,
        # leading zeros leave the CRC at 0; the usual 0xFFFFFFFF start is the same as
        # flipping the first four real bytes.
        flat = np.frombuffer(b"".join(records[i] for i in group), dtype=np.uint8)
        lane_of_byte = np.repeat(np.arange(lanes), lengths)
        first = np.repeat(np.cumsum(lengths) - lengths, lengths)
        row = np.arange(flat.size) - first + np.repeat(width - lengths, lengths)
        matrix = np.zeros((width, lanes), dtype=np.uint8)
        matrix[row, lane_of_byte] = flat
        for k in range(4):
            matrix[width - lengths + k, np.arange(lanes)] ^= 0xFF
        table = self.table
        crc = np.zeros(lanes, dtype=np.uint32)
        for j in range(width):
            crc = table[(crc ^ matrix[j]) & 0xFF] ^ (crc >> 8)
        crc ^= np.uint32(0xFFFFFFFF)
        masked = ((crc >> 15) | (crc << 17)) + np.uint32(0xA282EAD8)
        for i, value in zip(group, masked.tolist(), strict=True):
            out[i] = value


class TensorBoardBackend(Backend):
    name = "tensorboard"
    capabilities = frozenset({"metrics", "config", "text", "image", "histogram", "provenance"})
    destination_options = ("log_dir", "root")
    max_sample_rows = 16  # samples shown per log_samples batch (docs/samples.md)

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        for key, value in self.options.items():
            if key not in OPTIONS:
                raise ValueError(f"tensorboard backend: unknown option {key!r}; "
                                 f"known options: {', '.join(OPTIONS)}")
            if value is not None and not isinstance(value, (str, os.PathLike)):
                raise TypeError(f"tensorboard backend: option {key!r} must be a path, "
                                f"got {type(value).__name__}")
        self._fd: int | None = None
        self._offset = 0

    # -- lifecycle -------------------------------------------------------------------
    def open(self, run: RunInfo, resume: ResumeState) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.plugins.hparams import summary_v2 as hparams_summary
        from tensorboard.plugins.text import summary_v2 as text_summary

        self._event_pb2 = event_pb2
        self._summary_pb2 = summary_pb2
        self._text_pb = text_summary.text_pb
        self._hparams_pb = hparams_summary.hparams_pb
        self._framer = Framer()
        self.run = run

        state = dict(resume.state or {})
        explicit = self.options.get("log_dir") or os.environ.get("TENSORBOARD_DIR")
        if state.get("dir") and not explicit:
            self.log_dir = Path(str(state["dir"]))  # a later sync continues where it began
        else:
            self.log_dir = resolve_log_dir(self.options, run)
            if not explicit and not self.options.get("root"):
                log.warning("trackmux: tensorboard writes run %s to %s (the default; set "
                            "backend option tensorboard.log_dir or TENSORBOARD_DIR)",
                            run.run_id, self.log_dir)
        name = str(state.get("file") or resume.remote_id or event_file_name(run))
        if Path(name).name != name or "tfevents" not in name:
            raise ValueError(f"tensorboard backend: resume state names file {name!r}, "
                             "which is not an event file name")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.log_dir / name
        offset = state.get("offset")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        size = os.fstat(fd).st_size
        rebuild = False
        if offset is not None and int(offset) > size:
            log.warning("trackmux: tensorboard file %s has %d bytes, fewer than the %d "
                        "already delivered (deleted or truncated); rewriting it from the "
                        "spool", self.path, size, int(offset))
            offset, rebuild = None, resume.acked_seq > 0
        self._fd = fd
        if offset is None:
            os.ftruncate(fd, 0)
            self._offset = 0
            header = event_pb2.Event(wall_time=run.started_at, step=0, file_version=FILE_VERSION)
            self._append(self._framer.frame([header.SerializeToString()]))
        else:
            os.ftruncate(fd, int(offset))  # drop what was written after the last ack
            self._offset = int(offset)
        if rebuild:
            for batch in acknowledged_batches(run, self, resume.acked_seq):
                self.write(batch)

    def _append(self, data: bytes) -> None:
        """Write at the end of what is delivered; on failure cut back to it, so a retried
        batch is written once (no buffered leftovers, no torn record)."""
        assert self._fd is not None, "write() before open()"
        start = self._offset
        view = memoryview(data)
        try:
            while view:
                written = os.pwrite(self._fd, view, start + len(data) - len(view))
                view = view[written:]
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise
        self._offset = start + len(data)

    def write(self, events: Sequence[Event]) -> None:
        assert self._fd is not None, "write() before open()"
        records: list[bytes] = []
        make_event = self._event_pb2.Event
        for event in events:
            if isinstance(event, MetricsEvent):
                proto = make_event(wall_time=event.time, step=event.step)
                values = proto.summary.value
                for key, value in event.data.items():
                    values.add(tag=key, simple_value=value)
                records.append(proto.SerializeToString())
            elif isinstance(event, TextEvent):
                records.append(self._summary(self._text_pb(event.key, event.text), event))
            elif isinstance(event, ImageEvent):
                records.append(self._summary(self._image(event), event))
            elif isinstance(event, HistogramEvent):
                records.append(self._summary(self._histogram(event), event))
            elif isinstance(event, ConfigEvent):
                records.extend(self._config(event))
            elif isinstance(event, ProvenanceEvent):  # issue 25: TEXT tab, tag "provenance"
                records.append(self._summary(self._text_pb(
                    "provenance", provenance_markdown(event)), event))
        if records:  # one write per batch: a kill tears at most this batch
            self._append(self._framer.frame(records))

    def rewind(self, step: int) -> None:
        """Purge steps > ``step`` for TensorBoard's reader (see the module docstring)."""
        assert self._fd is not None, "rewind() before open()"
        marker = self._event_pb2.Event(wall_time=time.time(), step=step + 1)
        marker.session_log.status = self._event_pb2.SessionLog.START
        self._append(self._framer.frame([marker.SerializeToString()]))

    def state(self) -> dict[str, Any]:
        if self._fd is None:
            return {}
        return {"dir": str(self.log_dir), "file": self.path.name, "offset": self._offset}

    def where(self) -> str | None:
        log_dir = getattr(self, "log_dir", None)  # set by open(); kept after close()
        return None if log_dir is None else str(log_dir)

    @property
    def remote_id(self) -> str | None:
        return self.path.name if self._fd is not None else None

    def close(self, status: str) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- encoding --------------------------------------------------------------------
    def _summary(self, summary: Any, event: Event) -> bytes:
        proto = self._event_pb2.Event(wall_time=event.time, step=event.step)
        proto.summary.CopyFrom(summary)
        return bytes(proto.SerializeToString())

    def _image(self, event: ImageEvent) -> Any:
        summary = self._summary_pb2.Summary()
        value = summary.value.add(tag=event.key)
        value.image.height = event.height
        value.image.width = event.width
        value.image.colorspace = _COLORSPACE.get(event.mode, 3)
        value.image.encoded_image_string = event.png
        if event.caption:
            value.metadata.summary_description = event.caption
        return summary

    def _histogram(self, event: HistogramEvent) -> Any:
        summary = self._summary_pb2.Summary()
        if event.count:
            value = summary.value.add(tag=event.key)
            histo = value.histo
            histo.min, histo.max, histo.num = event.min, event.max, event.count
            mean, std = event.mean or 0.0, event.std or 0.0
            histo.sum = mean * event.count
            histo.sum_squares = (std * std + mean * mean) * event.count
            histo.bucket_limit.extend(event.edges[1:])  # right edge of each bucket
            histo.bucket.extend(float(c) for c in event.counts)
        for name, n in event.nonfinite.items():
            if n:
                summary.value.add(tag=f"{event.key}/{name}", simple_value=n)
        return summary

    def _config(self, event: ConfigEvent) -> list[bytes]:
        flat = flatten(event.config)
        rows = tuple((key, _param_text(value)) for key, value in sorted(flat.items()))
        table = TableEvent(CONFIG_TAG, ("param", "value"), rows, event.step, event.time)
        out = [self._summary(self._text_pb(CONFIG_TAG, table_to_markdown(table)), event)]
        hparams = {key: value if isinstance(value, (bool, int, float, str)) else
                   _param_text(value) for key, value in flat.items()}
        if hparams:
            summary = self._hparams_pb(hparams, trial_id=self.run.name,
                                       start_time_secs=self.run.started_at)
            out.append(self._summary(summary, event))
        return out


def _param_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "None"
    return str(value)


@hookimpl
def trackmux_register_backends(register: RegisterBackend) -> None:
    register("tensorboard", TensorBoardBackend, requires=("tensorboard",), extra="tensorboard",
             description="TensorBoard event files (no torch or TensorFlow needed)")
