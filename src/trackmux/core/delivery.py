"""One delivery worker per backend: spool -> batch -> backend, from the acknowledged cursor.

The same worker runs live (a thread in the training process, woken by each spool commit)
and offline (``trackmux sync``), so resync is not a second implementation. It reads from
the spool, never from memory, so a backend that is down costs disk, not memory. Failures
are retried with exponential backoff (the backend is probed again, not dropped); they are
reported once per backend and kind and never reach the caller.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import filelock

from trackmux.core import fallbacks
from trackmux.core.backend import Backend, ResumeState, RunInfo
from trackmux.core.errors import EventRejected, SpoolLockedError
from trackmux.core.events import Event
from trackmux.core.reporting import Reporter
from trackmux.core.spool_reader import SpoolReader

log = logging.getLogger("trackmux")

BACKOFF_INITIAL = 0.5
BACKOFF_MAX = 10.0  # a backend that comes back is probed again within ~10 s
DEFAULT_BATCH = 1000


def delivery_lock(run_dir: Path, backend: str) -> filelock.BaseFileLock:
    """The lock that makes one process at a time deliver ``run_dir`` to ``backend``."""
    name = fallbacks.safe_filename(backend)
    return filelock.FileLock(str(run_dir / f"deliver-{name}.lock"), timeout=0,
                             thread_local=False, mode=0o600)


def acquire_delivery_lock(run_dir: Path, backend: str) -> filelock.BaseFileLock:
    lock = delivery_lock(run_dir, backend)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise SpoolLockedError(
            f"another process is already delivering run {run_dir.name} to {backend!r} "
            f"(lock {lock.lock_file}); wait for it to finish or stop it first") from None
    return lock


@dataclass
class Progress:
    backend: str
    acked: int
    target: int
    state: str  # opening, delivering, retrying, done, failed, stopped


class DeliveryWorker:
    """Delivers one run's spool to one backend on a named daemon thread."""

    def __init__(self, name: str, make_backend: Callable[[], Backend], run: RunInfo,
                 reporter: Reporter, *, batch_size: int = DEFAULT_BATCH,
                 on_progress: Callable[[Progress], None] | None = None,
                 lock: filelock.BaseFileLock | None = None) -> None:
        self.name = name
        self.run = run
        self.reporter = reporter
        self.batch_size = batch_size
        self._make_backend = make_backend
        self._on_progress = on_progress
        self._lock = lock
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._target: int | None = None
        self._status = "finished"
        self._deadline: float | None = None
        self.acked = 0
        self.damage: list[str] = []
        self.state = "opening"
        self.backend: Backend | None = None
        self.thread = threading.Thread(target=self._main, name=f"trackmux-deliver-{name}",
                                       daemon=True)

    # -- control, from other threads -------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def notify(self) -> None:
        """New events were committed."""
        self._wake.set()

    def finish(self, target: int, status: str = "finished", deadline: float | None = None
               ) -> None:
        """Deliver up to ``target``, then close the backend with ``status`` and stop."""
        self._status = status
        self._deadline = deadline
        self._target = target
        self._wake.set()

    def stop(self) -> None:
        """Give up now (deadline passed): leave the rest in the spool."""
        self._stop.set()
        self._wake.set()

    def join(self, timeout: float | None) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()

    # -- worker thread ---------------------------------------------------------------
    def _progress(self, state: str) -> None:
        self.state = state
        if self._on_progress is not None:
            self._on_progress(Progress(self.name, self.acked, self._target or 0, state))

    def _sleep(self, seconds: float) -> None:
        if self._deadline is not None:
            seconds = min(seconds, max(0.0, self._deadline - time.monotonic()))
        self._stop.wait(seconds)

    def _past_deadline(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    def _main(self) -> None:
        reader: SpoolReader | None = None
        try:
            reader = SpoolReader(self.run.run_dir)
            self._deliver(reader)
        except Exception as exc:  # the worker reports; it never raises into anyone
            self.reporter.report(self.name, "worker", f"{type(exc).__name__}: {exc}")
            self._progress("failed")
        finally:
            if reader is not None:
                self.damage = list(reader.damage.errors)
                reader.close()
            if self._lock is not None:
                self._lock.release()

    def _open(self, reader: SpoolReader) -> Backend | None:
        cursor = reader.cursor(self.name)
        self.acked = cursor.acked_seq
        backoff = BACKOFF_INITIAL
        while not self._stop.is_set():
            try:
                backend = self._make_backend()
                backend.open(self.run, ResumeState(cursor.remote_id, cursor.state,
                                                   cursor.acked_seq))
            except Exception as exc:
                self.reporter.report(self.name, "open", f"{type(exc).__name__}: {exc}")
                self._progress("retrying")
                if self._past_deadline():
                    return None
                self._sleep(backoff * (1 + random.random() / 4))
                backoff = min(backoff * 2, BACKOFF_MAX)
                continue
            self.reporter.resolve(self.name, "open", "opened after earlier failures")
            self._ack(reader, backend)  # keeps the remote identity before the first batch
            return backend
        return None

    def _deliver(self, reader: SpoolReader) -> None:
        self._progress("opening")
        backend = self._open(reader)
        if backend is None:
            self._progress("stopped")
            return
        self.backend = backend
        backoff = BACKOFF_INITIAL

        def skipped(kind: str, message: str) -> None:
            self.reporter.note(self.name, kind, message)

        while not self._stop.is_set():
            self._wake.clear()  # before reading, so a commit notified meanwhile is not lost
            batch = reader.read(self.acked, self.batch_size)
            if batch.upto <= self.acked:
                if self._target is not None and self.acked >= self._target:
                    break
                if self._target is not None and reader.last_seq() <= self.acked:
                    break  # damaged tail: nothing more can be read
                self._wake.wait(0.25)
                continue
            try:
                events = fallbacks.adapt(batch.events, backend, skipped, self.run.run_dir)
                if events:
                    self._write(backend, events)
            except Exception as exc:
                self.reporter.report(self.name, "write", f"{type(exc).__name__}: {exc}")
                self._progress("retrying")
                if self._past_deadline():
                    self._progress("stopped")
                    return
                self._sleep(backoff * (1 + random.random() / 4))
                backoff = min(backoff * 2, BACKOFF_MAX)
                continue
            if backoff > BACKOFF_INITIAL:
                self.reporter.resolve(self.name, "write", "delivering again")
                backoff = BACKOFF_INITIAL
            self.acked = batch.upto
            self._ack(reader, backend)
            self._progress("delivering")
        if self._stop.is_set():
            self._progress("stopped")
            return
        try:
            backend.close(self._status)
        except Exception as exc:
            self.reporter.report(self.name, "close", f"{type(exc).__name__}: {exc}")
        self._progress("done")

    def _ack(self, reader: SpoolReader, backend: Backend) -> None:
        """Store the cursor; if the spool cannot be written (disk full) keep delivering and
        store it with a later batch (a lagging cursor only means a harmless redelivery)."""
        try:
            reader.ack(self.name, self.acked, backend.remote_id, backend.state())
        except Exception as exc:
            self.reporter.report(self.name, "ack", f"cannot record progress: {exc}")
        else:
            self.reporter.resolve(self.name, "ack", "recording progress again")

    def _write(self, backend: Backend, events: list[Event]) -> None:
        try:
            backend.write(events)
        except EventRejected:
            for event in events:
                try:
                    backend.write([event])
                except EventRejected as exc:
                    self.reporter.report(self.name, "rejected",
                                         f"event {event.seq} ({event.kind}) skipped: {exc}")
        backend.flush()
