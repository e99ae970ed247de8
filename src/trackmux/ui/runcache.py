"""One run's spool held in memory for the UI, read incrementally by sequence number.

The cache keeps a cursor (the highest seq read); each refresh reads only the events after
it, so a live run costs one small query per poll, never a re-read of its history. Metric
values are stored columnar and compact: one row per metrics event (seq, step, wall time)
and, per key, the row index and the float value of each point (12 bytes a point). Tables
and images are indexed (seq, key, step) and read from the spool only when asked for.

A spool that cannot be opened or read marks the cache damaged; nothing here raises into
the server.
"""

from __future__ import annotations

import math
import os
import threading
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from trackmux.core.configmerge import merge_config
from trackmux.core.events import (
    ConfigEvent,
    Event,
    HistogramEvent,
    ImageEvent,
    MetricsEvent,
    TableEvent,
    TextEvent,
)
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.writer import SPOOL_FILE

READ_PAGE = 5000
RAW_KINDS = frozenset({"metrics"})  # read undecoded and taken in bulk (_take_metrics)
#: histograms kept per key; beyond it every other one is dropped (evenly thinned)
MAX_HISTOGRAMS_PER_KEY = 400


@dataclass
class KeySeries:
    """The points of one metric key: ``rows[i]`` indexes the run's metrics rows."""

    rows: array[int] = field(default_factory=lambda: array("i"))
    values: array[float] = field(default_factory=lambda: array("d"))


@dataclass(frozen=True)
class MediaRef:
    """Where an image, table or text sits in the spool (its payload is read on demand)."""

    seq: int
    key: str
    step: int
    time: float
    size: int  # rows of a table, bytes of a PNG, characters of a text


@dataclass(frozen=True)
class Histogram:
    seq: int
    step: int
    time: float
    counts: tuple[int, ...]
    edges: tuple[float, ...]
    count: int
    nonfinite: int


class RunCache:
    """The UI's view of one run; every method is safe to call from several threads."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.lock = threading.RLock()
        self.last_used = time.monotonic()
        self._reader: SpoolReader | None = None
        self.reset()

    def reset(self) -> None:
        """Forget everything read (after eviction, or when a rewind superseded events)."""
        self.cursor = 0
        self.superseded = -1
        self.stamp: tuple[int, ...] = ()
        #: numpy copies of the series a page asked for: (key, x mode) -> (length, x, y)
        self.arrays: dict[tuple[str, str], tuple[int, Any, Any]] = {}
        self.row_seq: array[int] = array("q")
        self.row_step: array[int] = array("q")
        self.row_time: array[float] = array("d")
        self.keys: dict[str, KeySeries] = {}
        self.images: list[MediaRef] = []
        self.tables: list[MediaRef] = []
        self.texts: list[MediaRef] = []
        self.histograms: dict[str, list[Histogram]] = {}
        self.config: dict[str, Any] = {}
        self.damage: list[str] = []
        self.error: str | None = None
        self.points = 0
        #: the last read stopped at its limit before the end of the spool
        self.partial = False

    # -- reading ---------------------------------------------------------------------
    def _open(self) -> SpoolReader:
        if self._reader is None:
            self._reader = SpoolReader(self.run_dir)
        return self._reader

    def close(self) -> None:
        with self.lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None

    def changed(self) -> bool:
        """Whether the spool (or its WAL) was written since the last refresh: two stat
        calls, so polling 100 idle runs costs no SQL at all."""
        stamp: list[int] = []
        for name in (SPOOL_FILE, SPOOL_FILE + "-wal"):
            try:
                info = os.stat(self.run_dir / name)
                stamp += [info.st_mtime_ns, info.st_size, info.st_ino]
            except OSError:
                stamp += [0, 0, 0]
        if tuple(stamp) == self.stamp:
            return False
        self.stamp = tuple(stamp)
        return True

    def refresh(self, limit: int | None = None) -> int:
        """Read the events committed since the last refresh (at most about ``limit`` of
        them: the rest at the next call, and :attr:`partial` says so); return how many
        were read.

        The reader is closed again afterwards: an idle run holds no SQLite connection (and
        no page cache), and a live writer never waits on this reader."""
        with self.lock:
            self.last_used = time.monotonic()
            if not self.changed():
                return 0
            try:
                return self._read(limit)
            finally:
                self.close()

    def _read(self, limit: int | None = None) -> int:
        try:
            reader = self._open()
            superseded = reader.superseded_count()
            if self.superseded not in (-1, superseded):
                stamp = self.stamp
                self.reset()  # a resumed attempt rewound: the cached tail is stale
                self.stamp = stamp
            self.superseded = superseded
            last = reader.last_seq()
            self.partial = False
            if last <= self.cursor:
                return 0
            read = 0
            while True:
                page = READ_PAGE if limit is None else max(1, min(READ_PAGE, limit - read))
                batch = reader.read(self.cursor, page, raw=RAW_KINDS)
                self._take_metrics(batch.raw, reader)
                for event in batch.events:
                    self._take(event)
                read += len(batch.events) + len(batch.raw)
                if batch.upto <= self.cursor:
                    break
                self.cursor = batch.upto
                if limit is not None and read >= limit and self.cursor < last:
                    self.partial = True
                    self.stamp = ()  # not caught up: the next refresh reads on
                    break
            self.damage = list(reader.damage.errors)
            self.error = None
            if read:
                self.arrays.clear()
            return read
        except Exception as exc:  # damaged, half-written, or vanished: show, never raise
            self.error = f"{type(exc).__name__}: {exc}"
            self.stamp = ()  # try again at the next poll
            self.partial = False  # nothing more to read now (the warm-up moves on)
            return 0

    def _take_metrics(self, rows: list[tuple[int, int, float, bytes]],
                      reader: SpoolReader) -> None:
        """Metrics rows in bulk: per set of keys, one float matrix whose columns are
        appended to the keys' arrays (an event object and a Python append per point were
        most of a run's read: 20M points for 100 big runs)."""
        if not rows:
            return
        loads, dicts = orjson.loads, []
        for seq, _, _, body in rows:
            try:
                dicts.append(loads(body))
            except orjson.JSONDecodeError as exc:  # CRC-intact but unreadable: skipped
                reader.mark_bad(seq, f"JSONDecodeError: {exc}")
                dicts.append(None)
        base = len(self.row_seq)
        groups: dict[tuple[str, ...], list[int]] = {}
        kept = 0
        for (seq, step, ts, _), data in zip(rows, dicts, strict=True):
            if not isinstance(data, dict):
                if data is not None:
                    reader.mark_bad(seq, "metrics body is not an object")
                continue
            self.row_seq.append(seq)
            self.row_step.append(step)
            self.row_time.append(ts)
            groups.setdefault(tuple(data), []).append(kept)
            dicts[kept] = data
            kept += 1
        parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        for names, index in groups.items():
            try:  # "nan", "inf" and "-inf" (how the spool stores them) convert too
                matrix = np.array([list(dicts[i].values()) for i in index],
                                  dtype=np.float64).reshape(len(index), len(names))
            except (TypeError, ValueError):  # a value that is not a number: NaN, a gap
                matrix = np.array([[_number(v) for v in dicts[i].values()] for i in index],
                                  dtype=np.float64).reshape(len(index), len(names))
            where = np.asarray(index, dtype=np.int32) + base
            for column, key in enumerate(names):
                parts.setdefault(key, []).append((where, matrix[:, column]))
        for key, chunks in parts.items():
            series = self.keys.get(key)
            if series is None:
                series = self.keys[key] = KeySeries()
            if len(chunks) == 1:
                where, values = chunks[0]
            else:  # keys logged on some steps only: back into row order
                where = np.concatenate([w for w, _ in chunks])
                values = np.concatenate([v for _, v in chunks])
                order = np.argsort(where, kind="stable")
                where, values = where[order], values[order]
            series.rows.frombytes(where.astype(np.int32).tobytes())
            series.values.frombytes(np.ascontiguousarray(values, dtype=np.float64).tobytes())
            self.points += where.size

    def _take(self, event: Event) -> None:
        if isinstance(event, MetricsEvent):
            row = len(self.row_seq)
            self.row_seq.append(event.seq)
            self.row_step.append(event.step)
            self.row_time.append(event.time)
            keys = self.keys  # the warm-up's inner loop: 20M points for 100 big runs
            for key, value in event.data.items():
                series = keys.get(key)
                if series is None:
                    series = keys[key] = KeySeries()
                series.rows.append(row)
                series.values.append(value)  # int or float: array("d") converts
            self.points += len(event.data)
        elif isinstance(event, ImageEvent):
            self.images.append(MediaRef(event.seq, event.key, event.step, event.time,
                                        len(event.png)))
        elif isinstance(event, TableEvent):
            self.tables.append(MediaRef(event.seq, event.key, event.step, event.time,
                                        len(event.rows)))
        elif isinstance(event, TextEvent):
            self.texts.append(MediaRef(event.seq, event.key, event.step, event.time,
                                       len(event.text)))
        elif isinstance(event, HistogramEvent):
            kept = self.histograms.setdefault(event.key, [])
            kept.append(Histogram(event.seq, event.step, event.time, event.counts,
                                  event.edges, event.count,
                                  event.nan + event.inf + event.neginf))
            if len(kept) > MAX_HISTOGRAMS_PER_KEY:
                del kept[1:-1:2]  # keep first and last, thin the middle evenly
        elif isinstance(event, ConfigEvent):
            self.config = merge_config(self.config, event.config)

    def event_at(self, seq: int) -> Event | None:
        """The event ``seq`` read from the spool (a table's rows, an image's PNG)."""
        with self.lock:
            try:
                batch = self._open().read(seq - 1, 1)
            except Exception as exc:
                self.error = f"{type(exc).__name__}: {exc}"
                return None
            finally:
                self.close()
            found = [e for e in batch.events if e.seq == seq]
            return found[0] if found else None

    # -- size ------------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        """About what this cache holds in memory (for the server's budget)."""
        hist = sum(len(h.counts) * 16 + 200 for kept in self.histograms.values() for h in kept)
        media = 120 * (len(self.images) + len(self.tables) + len(self.texts))
        arrays = sum(16 * n for n, _, _ in self.arrays.values())
        return (12 * self.points + 24 * len(self.row_seq) + hist + media + arrays
                + 100 * len(self.keys))

    # -- queries ---------------------------------------------------------------------
    @property
    def last_step(self) -> int | None:
        return max(self.row_step) if self.row_step else None

    def last_values(self, key: str, share: float = 0.0) -> float | None:
        """The final value of ``key`` (``share`` > 0: the mean of the last share of its
        finite points, which is steadier for a noisy RL reward)."""
        series = self.keys.get(key)
        if series is None:
            return None
        finite = [v for v in series.values if math.isfinite(v)]
        if not finite:
            return None
        if share <= 0:
            return finite[-1]
        tail = finite[-max(1, int(len(finite) * share)):]
        return sum(tail) / len(tail)


def _number(value: Any) -> float:
    """A metric value as a float (NaN for what is not one)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
