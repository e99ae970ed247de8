"""The runs under the served folders: discovery, their list rows, and the caches of the
runs a page looks at, within a memory budget.

Runs are named in URLs by an opaque id (a hash of their resolved path), never by a path,
so a request cannot point the server at a file outside the folders it was given. A
run folder that is a symlink, or that resolves outside its root, is not served.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trackmux.core.spool.acks import DELIVERY_FILE
from trackmux.core.spool.runs import find_runs, stop_words, summarize
from trackmux.core.spool.writer import SPOOL_FILE
from trackmux.ui import sources
from trackmux.ui.runcache import RunCache

DEFAULT_BUDGET_MB = 768
SCAN_EVERY = 1.0  # seconds between folder scans (a new run appears by itself)
ROW_THREADS = max(1, min(4, os.cpu_count() or 1))  # threads computing a first run list
WARM_PAGE = 1000  # events of one run the warm-up reads before turning to the next run


def run_id_of(path: Path) -> str:
    return hashlib.sha1(str(path).encode()).hexdigest()[:12]


@dataclass
class Listed:
    """One row of the run list, recomputed only when the spool files changed."""

    stamp: tuple[float, ...]
    row: dict[str, Any]


class Store:
    """Everything the routes read; thread-safe (routes run on a thread pool)."""

    def __init__(self, roots: Sequence[Path], budget_mb: int = DEFAULT_BUDGET_MB) -> None:
        self.roots = [Path(r).expanduser().resolve() for r in roots]
        self.budget = budget_mb * 1024 * 1024
        self.lock = threading.Lock()
        self.paths: dict[str, Path] = {}
        self.caches: dict[str, RunCache] = {}
        self.listed: dict[str, Listed] = {}
        self._scanned = 0.0
        self._checked: dict[Path, Path | None] = {}  # run folder -> resolved, if served
        #: recent chart answers (queries.series), keyed by their query and the runs'
        #: cursors: a chart asked again before its runs moved costs a dict lookup
        self.answers: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
        #: what the live doctor stored per run, read with the run's row (same freshness)
        self.stored: dict[str, list[dict[str, Any]] | None] = {}
        self.inflight = 0  # requests being served (see serving)
        self._listing = threading.Lock()  # held while the run list's rows are computed

    # -- discovery -------------------------------------------------------------------
    def scan(self, force: bool = False) -> dict[str, Path]:
        """Run folders under the roots (at most once a second unless ``force``)."""
        with self.lock:
            if not force and time.monotonic() - self._scanned < SCAN_EVERY:
                return dict(self.paths)
            found: dict[str, Path] = {}
            for root in self.roots:
                try:
                    dirs = find_runs(root)
                except OSError:
                    continue
                for run_dir in dirs:
                    if run_dir not in self._checked:  # resolve each folder once
                        self._checked[run_dir] = (run_dir.resolve()
                                                  if self._inside(run_dir, root) else None)
                    resolved = self._checked[run_dir]
                    if resolved is not None and not run_dir.is_symlink():
                        found[run_id_of(resolved)] = resolved
            self.paths = found
            self._scanned = time.monotonic()
            return dict(found)

    @staticmethod
    def _inside(run_dir: Path, root: Path) -> bool:
        """A real folder under ``root`` (no symlink to elsewhere), with a regular spool."""
        if run_dir.is_symlink() or (run_dir / SPOOL_FILE).is_symlink():
            return False
        try:
            return run_dir.resolve().is_relative_to(root)
        except OSError:
            return False

    def path(self, rid: str) -> Path | None:
        return self.scan().get(rid)

    # -- caches ----------------------------------------------------------------------
    def cache(self, rid: str, refresh: bool = True, limit: int | None = None
              ) -> RunCache | None:
        """The run's cache, brought up to date (only the events since the last read; at
        most about ``limit`` of them, see RunCache.refresh)."""
        path = self.path(rid)
        if path is None:
            return None
        with self.lock:
            cache = self.caches.get(rid)
            if cache is None:
                cache = self.caches[rid] = RunCache(path)
        if refresh and cache.refresh(limit):
            self._evict(keep=rid)
        return cache

    @contextmanager
    def serving(self) -> Iterator[None]:
        """Mark a request in flight: background reading (warm, the store's mirror) steps
        aside meanwhile, since it shares the GIL with the request's thread."""
        with self.lock:
            self.inflight += 1
        try:
            yield
        finally:
            with self.lock:
                self.inflight -= 1

    def step_aside(self, longest: float = 0.5) -> None:
        """Wait (up to ``longest`` seconds) while a request is in flight."""
        deadline = time.monotonic() + longest
        while self.inflight and time.monotonic() < deadline:
            time.sleep(0.005)

    def warm(self) -> None:
        """Read every run (started in the background when the server starts), a page of
        each in turn: every run soon has a beginning, no request waits behind a run's
        whole read (a page holds its cache's lock, not the read), and a request in flight
        goes first."""
        self.rows()
        pending = list(self.scan(force=True))
        while pending:
            for rid in pending:
                self.step_aside()
                self.cache(rid, limit=WARM_PAGE)
            with self.lock:
                caches = [self.caches.get(rid) for rid in pending]
            pending = [rid for rid, c in zip(pending, caches, strict=True)
                       if c is not None and c.partial]
        self.rows()

    def _evict(self, keep: str) -> None:
        """Drop the least recently used runs' caches while over the budget."""
        with self.lock:
            total = sum(c.nbytes for c in self.caches.values())
            if total <= self.budget:
                return
            for rid, cache in sorted(self.caches.items(), key=lambda kv: kv[1].last_used):
                if total <= self.budget:
                    break
                if rid == keep:
                    continue
                total -= cache.nbytes
                cache.close()
                del self.caches[rid]

    def memory(self) -> dict[str, int]:
        with self.lock:
            return {"cached_runs": len(self.caches),
                    "cached_bytes": sum(c.nbytes for c in self.caches.values()),
                    "budget_bytes": self.budget,
                    "answers": len(self.answers),
                    "answer_bytes": sum(int(a["nbytes"]) for a in self.answers.values())}

    # -- the run list ----------------------------------------------------------------
    def rows(self) -> list[dict[str, Any]]:
        out = []
        with self._listing:  # one thread computes the rows; another then finds them kept
            found = list(self.scan().items())
            new = [(rid, path) for rid, path in found if rid not in self.listed]
            if len(new) >= 2 * ROW_THREADS:  # the first list: SQLite's scans of each
                # spool (its event count, stored findings) release the GIL, so they run
                # side by side
                with ThreadPoolExecutor(ROW_THREADS, "trackmux-ui-rows") as pool:
                    list(pool.map(lambda item: self._row(*item), new))
            for rid, path in found:
                out.append(self._row(rid, path))
        out.sort(key=lambda r: (-(r.get("started_at") or 0), r["name"]))
        return out

    def stored_findings(self, rid: str) -> list[dict[str, Any]] | None:
        """The live doctor's stored findings of a run (None: not watched), as fresh as
        its run-list row: no spool is opened when the run did not change."""
        path = self.path(rid)
        if path is None:
            return None
        self._row(rid, path)
        return self.stored.get(rid)

    def _row(self, rid: str, path: Path) -> dict[str, Any]:
        stamp = _stamp(path)
        with self.lock:
            known = self.listed.get(rid)
        cache = self.caches.get(rid)
        if known is not None and known.stamp == stamp and (
                cache is None or known.row.get("cursor") == cache.cursor):
            return known.row
        row = self._summary(rid, path, cache)
        with self.lock:
            self.listed[rid] = Listed(stamp, row)
        return row

    def _summary(self, rid: str, path: Path, cache: RunCache | None) -> dict[str, Any]:
        row: dict[str, Any] = {"id": rid, "name": path.name, "project": path.parent.name,
                               "dir": str(path), "state": "damaged", "damage": [],
                               "backends": [], "last_step": None, "events": 0,
                               "findings": None, "started_at": None}
        try:
            summary = summarize(path)
        except Exception as exc:  # a damaged or half-written spool is a row, not a crash
            row["damage"] = [f"{type(exc).__name__}: {exc}"]
            return row
        meta = summary.meta
        row.update(name=str(meta.get("name") or meta.get("run_id") or path.name),
                   project=str(meta.get("project") or path.parent.name),
                   state=summary.state, events=summary.events, last_seq=summary.last_seq,
                   started_at=meta.get("started_at"), finished_at=meta.get("finished_at"),
                   damage=summary.damage, host=meta.get("host"), user=meta.get("user"),
                   stops=stop_words(meta))
        if summary.damage:
            row["state"] = f"{summary.state}, damaged"
        if not meta.get("run_id"):  # created but never written, or not a trackmux spool
            row["state"] = "damaged"
            row["damage"] = [*summary.damage, "no run metadata: half-written or not a "
                             "trackmux spool"]
        for name in summary.backends:
            acked = summary.delivered.get(name, 0)
            row["backends"].append({"name": name, "acked": acked,
                                    "pending": max(0, summary.last_seq - acked),
                                    "quarantined": summary.quarantined.get(name, 0)})
        # a run no chart read yet, or read before it moved (it appeared or finished while
        # the page was open): the spool's latest step, not a blank or an old one
        current = (cache is not None and cache.cursor >= summary.last_seq
                   and cache.last_step is not None)
        row["last_step"] = cache.last_step if current and cache else latest_step(path)
        if cache is not None:
            row["cursor"] = cache.cursor
            if cache.error:
                row["state"] = "damaged"
                row["damage"] = [*row["damage"], cache.error]
        try:
            findings = sources.load_stored_findings(path)
            self.stored[rid] = findings
            if findings is None:  # not watched live: the run's findings view diagnoses it
                raise sources.Unavailable("not diagnosed yet")
            row["findings"] = len(findings)
            row["findings_bad"] = sum(1 for f in findings
                                      if f.get("severity") in ("warning", "critical"))
        except sources.Unavailable:
            row["findings"] = None
        except Exception as exc:
            row["findings"] = None
            row["damage"] = [*row["damage"], f"findings: {type(exc).__name__}: {exc}"]
        return row


def latest_step(run_dir: Path) -> int | None:
    """The step of the run's latest live event other than config (None: no such event),
    read from the end of the spool by its primary key: max(step) would scan every event
    of a live run at each refresh of the list. Read-only."""
    from trackmux.core.spool.writer import connect

    live = ("SELECT step FROM events e WHERE kind != 'config' AND NOT EXISTS (SELECT 1 "
            "FROM superseded s WHERE s.seq = e.seq) ORDER BY seq DESC LIMIT 1")
    try:
        conn = connect(run_dir / SPOOL_FILE, readonly=True)
    except sqlite3.Error:
        return None
    try:
        try:
            found = conn.execute(live).fetchone()
        except sqlite3.OperationalError:  # a spool from before attempts: no superseded
            found = conn.execute("SELECT step FROM events WHERE kind != 'config' "
                                 "ORDER BY seq DESC LIMIT 1").fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return None if found is None or found[0] is None else int(found[0])


def _stamp(path: Path) -> tuple[float, ...]:
    """Changes whenever the spool or the run's delivery cursors (or their WALs) were
    written: a row's pending counts move with delivery alone."""
    out: list[float] = []
    for name in (SPOOL_FILE, SPOOL_FILE + "-wal", DELIVERY_FILE, DELIVERY_FILE + "-wal"):
        try:
            info = os.stat(path / name)
            out += [info.st_mtime_ns, info.st_size]
        except OSError:
            out += [0, 0]
    return tuple(out)
