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

    def refresh(self) -> int:
        """Read the events committed since the last refresh; return how many were read.

        The reader is closed again afterwards: an idle run holds no SQLite connection (and
        no page cache), and a live writer never waits on this reader."""
        with self.lock:
            self.last_used = time.monotonic()
            if not self.changed():
                return 0
            try:
                return self._read()
            finally:
                self.close()

    def _read(self) -> int:
        try:
            reader = self._open()
            superseded = reader.superseded_count()
            if self.superseded not in (-1, superseded):
                stamp = self.stamp
                self.reset()  # a resumed attempt rewound: the cached tail is stale
                self.stamp = stamp
            self.superseded = superseded
            if reader.last_seq() <= self.cursor:
                return 0
            read = 0
            while True:
                batch = reader.read(self.cursor, READ_PAGE)
                for event in batch.events:
                    self._take(event)
                read += len(batch.events)
                if batch.upto <= self.cursor:
                    break
                self.cursor = batch.upto
            self.damage = list(reader.damage.errors)
            self.error = None
            if read:
                self.arrays.clear()
            return read
        except Exception as exc:  # damaged, half-written, or vanished: show, never raise
            self.error = f"{type(exc).__name__}: {exc}"
            self.stamp = ()  # try again at the next poll
            return 0

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
