"""TensorBoard log folders: every folder holding ``events.out.tfevents*`` files is a run.

Records are read by :mod:`.tfrecord` and parsed with tensorboard's own ``Event`` proto;
tensor values are decoded with tensorboard's ``tensor_util``. Carried over:

- scalars, legacy (``simple_value``, as ``SummaryWriter.add_scalar`` and trackmux's own
  backend write them) and TF2 (a scalar tensor of the ``scalars`` plugin), with their
  steps and wall times; consecutive scalars of one step become one metrics event;
- histograms: legacy ``HistogramProto`` (bucket limits and counts, min, max, sum) and
  the ``histograms`` plugin's (k, 3) tensors;
- images: legacy ``Summary.Image`` and the ``images`` plugin's string tensors (PNG kept,
  other encodings converted to PNG with Pillow);
- text: the ``text`` plugin's string tensors.

Not carried over: audio, graphs, PR curves, meshes, hparams, profiles (named in
docs/import.md, not reported as damage). The cursor of each event file is the byte offset
after the last record committed, with the plugin of each tensor tag seen so far (TF2
writes a tag's plugin only with its first value).
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from trackmux.core.events import Event, HistogramEvent, ImageEvent, MetricsEvent, TextEvent
from trackmux.importers.base import Chunk, Damage, SourceError, SourceRun
from trackmux.importers.tfrecord import Bad, records

PATTERN = "events.out.tfevents*"
#: records per chunk (one commit at most)
CHUNK_RECORDS = 20_000
#: tensor plugins read ("": a tensor written without a plugin, read when it is a scalar)
CARRIED = frozenset({"scalars", "histograms", "images", "text", ""})


class TensorBoardRun(SourceRun):
    format = "tensorboard"

    def __init__(self, folder: Path, name: str, where: str, only: Path | None = None) -> None:
        folder = folder.resolve()
        super().__init__(str(only.resolve() if only else folder), name, where)
        self.folder = folder
        self.only = only

    def files(self) -> list[Path]:
        if self.only is not None:
            return [self.only]
        return sorted(p for p in self.folder.glob(PATTERN) if p.is_file())

    def started_at(self) -> float | None:
        return None

    def read(self, cursors: Mapping[str, Any], live: bool) -> Iterator[Chunk]:
        for path in self.files():
            cursor = cursors.get(path.name) or {"offset": 0}
            offset = int(cursor["offset"])
            try:
                size = os.stat(path).st_size
            except OSError as exc:
                yield Chunk(damage=[Damage(str(path), -1, 1, f"cannot read: {exc}")])
                continue
            if size < offset:
                yield Chunk(damage=[Damage(str(path), size, 0, "the file is shorter than "
                                           f"what was imported from it ({offset} bytes)")])
                continue
            if size == offset:
                continue
            yield from FileReader(path, cursor).chunks(live)


class FileReader:
    """One event file from its cursor: records -> events, in chunks with the cursor."""

    def __init__(self, path: Path, cursor: Mapping[str, Any]) -> None:
        from tensorboard.compat.proto.event_pb2 import Event as EventProto

        self.path = path
        self.parse = EventProto.FromString
        self.offset = int(cursor.get("offset", 0))
        self.plugins: dict[str, str] = dict(cursor.get("plugins") or {})
        self.chunk = Chunk()
        self._group: dict[str, float] = {}
        self._step = -1
        self._time = 0.0

    def _cursor(self) -> dict[str, Any]:
        out: dict[str, Any] = {"offset": self.offset}
        if self.plugins:
            out["plugins"] = dict(self.plugins)
        return out

    def _flush_group(self) -> None:
        if self._group:
            self.chunk.events.append(MetricsEvent(self._group, self._step, self._time))
            self._group = {}

    def chunks(self, live: bool) -> Iterator[Chunk]:
        """The hot path of an import (one record per scalar, as ``add_scalar`` writes
        them): scalars are gathered here with local names only; anything else goes
        through :meth:`_other`."""
        from google.protobuf.message import DecodeError

        parse = self.parse
        count = 0
        group = self._group
        for item in records(self.path, self.offset):
            if type(item) is not tuple:
                assert isinstance(item, Bad)
                if item.torn and live:
                    break
                self.chunk.damage.append(Damage(str(self.path), item.start, 1, item.what,
                                                lasting=not item.torn))
                if item.torn:
                    break
                self.offset = item.end
                continue
            data, end = item
            try:
                event = parse(data)
            except DecodeError as exc:
                self.chunk.damage.append(Damage(str(self.path), self.offset, 1,
                                                f"a record that is not an Event: {exc}"))
                event = None
            values = event.summary.value if event is not None else ()
            if values:
                step, when = event.step, event.wall_time
                for value in values:
                    kind = value.WhichOneof("value")
                    if kind == "simple_value":
                        tag = value.tag
                        if group and (step != self._step or tag in group):
                            self.chunk.events.append(MetricsEvent(group, self._step,
                                                                  self._time))
                            group = self._group = {}
                        if not group:
                            self._step, self._time = step, when
                        group[tag] = value.simple_value
                        continue
                    self._guarded(kind, value, step, when)
                    group = self._group
            self.offset = end
            count += 1
            if count >= CHUNK_RECORDS:
                self._flush_group()
                group = self._group
                self.chunk.cursors[self.path.name] = self._cursor()
                yield self.chunk
                self.chunk, count = Chunk(), 0
        self._flush_group()
        self.chunk.cursors[self.path.name] = self._cursor()
        yield self.chunk

    def _guarded(self, kind: str | None, value: Any, step: int, when: float) -> None:
        try:
            self._other(kind, value, step, when)
        except Exception as exc:  # one odd value is damage, the file goes on
            self.chunk.damage.append(Damage(str(self.path), self.offset, 1,
                                            f"{value.tag!r} at step {step} not read: "
                                            f"{type(exc).__name__}: {exc}"))

    def _scalar(self, tag: str, value: float, step: int, when: float) -> None:
        group = self._group
        if group and (step != self._step or tag in group):
            self.chunk.events.append(MetricsEvent(group, self._step, self._time))
            group = self._group = {}
        if not group:
            self._step, self._time = step, when
        group[tag] = value

    def _add(self, event: Event) -> None:
        """A non-scalar event, after the scalars gathered before it."""
        self._flush_group()
        self.chunk.events.append(event)

    def _other(self, kind: str | None, value: Any, step: int, when: float) -> None:
        tag = value.tag
        if kind == "histo":
            self._add(legacy_histogram(tag, value.histo, step, when))
        elif kind == "image":
            image = value.image
            self._add(_image(tag, image.encoded_image_string, step, when))
        elif kind == "tensor":
            plugin = value.metadata.plugin_data.plugin_name
            if plugin:
                self.plugins[tag] = plugin
            else:
                plugin = self.plugins.get(tag, "")
            if plugin in CARRIED:  # hparams, audio, pr_curves, mesh ...: not carried over
                self._tensor(tag, plugin, value.tensor, step, when)

    def _tensor(self, tag: str, plugin: str, tensor: Any, step: int, when: float) -> None:
        from tensorboard.util import tensor_util

        array = tensor_util.make_ndarray(tensor)
        if plugin == "scalars" or (not plugin and array.size == 1 and array.dtype.kind == "f"):
            self._scalar(tag, float(array.reshape(-1)[0]), step, when)
        elif plugin == "histograms" and array.ndim == 2 and array.shape[1] == 3:
            self._add(tensor_histogram(tag, array.tolist(), step, when))
        elif plugin == "images" and array.size >= 3:
            blobs = array.reshape(-1).tolist()[2:]
            for index, blob in enumerate(blobs):
                key = tag if len(blobs) == 1 else f"{tag}/{index}"
                self._add(_image(key, blob, step, when))
        elif plugin == "text":
            cells = [c.decode("utf-8", errors="replace") if isinstance(c, bytes) else str(c)
                     for c in array.reshape(-1).tolist()]
            self._add(TextEvent(tag, "\n".join(cells), step, when))


def _image(key: str, blob: bytes, step: int, when: float) -> ImageEvent:
    from PIL import Image

    with Image.open(io.BytesIO(blob)) as image:
        width, height, mode = image.width, image.height, image.mode
        if not blob.startswith(b"\x89PNG"):
            out = io.BytesIO()
            image.save(out, format="PNG")
            blob = out.getvalue()
    return ImageEvent(key, blob, width, height, mode, step, when)


def legacy_histogram(tag: str, histo: Any, step: int, when: float) -> HistogramEvent:
    """A ``HistogramProto`` as trackmux's histogram: the buckets from the first to the last
    non-empty one, their outer edges clipped to the values' min and max."""
    limits, counts = list(histo.bucket_limit), [round(c) for c in histo.bucket]
    used = [i for i, c in enumerate(counts) if c > 0]
    total = round(histo.num)
    if not used or total <= 0:
        return HistogramEvent(tag, (), (), 0, None, None, None, None, step, when)
    first, last = used[0], used[-1]
    low, high = float(histo.min), float(histo.max)
    edges = [low, *(min(max(x, low), high) for x in limits[first:last]), high]
    mean = histo.sum / total
    variance = max(0.0, histo.sum_squares / total - mean * mean)
    return HistogramEvent(tag, tuple(counts[first:last + 1]), tuple(edges), total, low, high,
                          mean, math.sqrt(variance), step, when)


def tensor_histogram(tag: str, rows: list[list[float]], step: int, when: float
                     ) -> HistogramEvent:
    """The ``histograms`` plugin's (k, 3) ``[left, right, count]`` rows; mean and std from
    the bucket centres (the plugin keeps no sums)."""
    rows = [r for r in rows if all(math.isfinite(x) for x in r)]
    total = round(sum(r[2] for r in rows))
    if not rows or total <= 0:
        return HistogramEvent(tag, (), (), 0, None, None, None, None, step, when)
    edges = (rows[0][0], *(r[1] for r in rows))
    mean = sum((r[0] + r[1]) / 2 * r[2] for r in rows) / total
    variance = sum(((r[0] + r[1]) / 2 - mean) ** 2 * r[2] for r in rows) / total
    return HistogramEvent(tag, tuple(round(r[2]) for r in rows), tuple(edges), total,
                          rows[0][0], rows[-1][1], mean, math.sqrt(variance), step, when)


def find(source: str, options: Mapping[str, Any]) -> list[SourceRun]:
    path = Path(source).expanduser()
    if path.is_file():
        return [TensorBoardRun(path.parent, path.parent.name, source, only=path)]
    if not path.is_dir():
        raise SourceError(f"{source}: no such folder")
    folders = sorted({p.parent for p in path.rglob(PATTERN) if p.is_file()})
    if not folders:
        raise SourceError(f"{source}: no TensorBoard event files ({PATTERN}) below it")
    runs: list[SourceRun] = []
    for folder in folders:
        relative = folder.relative_to(path).as_posix()
        name = path.resolve().name if relative == "." else relative
        where = source if relative == "." else os.path.join(source, relative)
        runs.append(TensorBoardRun(folder, name, where))
    return runs

