"""One delivery worker per backend: spool -> batch -> backend, from the acknowledged cursor.

The same worker runs live (in the training process or its delivery process, woken by each
spool commit) and offline (``trackmux sync``), so resync is not a second implementation.
It reads from the spool, never from memory, so a backend that is down costs disk, not
memory. Failures never reach the caller; they are reported once per backend and kind.

The retry contract (docs/plugins.md): after a failed ``write()`` the worker closes the
backend with status "retrying", builds a new one, ``open()``s it with the last
acknowledged state and retries from the acknowledged position. A backend therefore only
has to make redelivery after ``open()`` harmless, the rule it already follows after a
crash. Three outcomes are not retried forever:

- ``PermanentBackendError`` (or a constructor that raises: it does no I/O, so a failure
  there is a bad option): the worker stops in state "failed" at once;
- ``EventRejected``: the batch is retried one event at a time and an event rejected on
  its own is quarantined (recorded in the spool, counted, reported); later events flow;
- the same non-``OSError`` failure of one event on its own ``QUARANTINE_AFTER`` times in a
  row: deterministic, so that event is skipped, and quarantined once the next event
  succeeds (or it was the last). If the next event fails the same way first, the backend
  is broken, not the event: the skip is undone and retrying goes on. ``OSError`` (disk
  full, network) never counts, except a file name too long.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import filelock

from trackmux.core.backends.contract import Backend, ResumeState, RunInfo
from trackmux.core.configmerge import merge_config, merged
from trackmux.core.delivery import fallbacks
from trackmux.core.delivery.reporting import Reporter
from trackmux.core.errors import EventRejected, PermanentBackendError, SpoolLockedError
from trackmux.core.events import ConfigEvent, Event, ProvenanceEvent
from trackmux.core.spool import attempts
from trackmux.core.spool.attempts import Attempt
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.values.argv import redacted_again
from trackmux.core.values.redact import redact_text

log = logging.getLogger("trackmux")

BACKOFF_INITIAL = 0.5
BACKOFF_MAX = 10.0  # a backend that comes back is probed again within ~10 s
BACKOFF_DETERMINISTIC = 2.0  # cap while the error is not an OSError (likely deterministic)
DEFAULT_BATCH = 1000
ISOLATE_AFTER = 2  # failures of a multi-event batch before it is retried event by event
QUARANTINE_AFTER = 3  # identical failures of one event on its own before it is quarantined
#: A worker's last states. Reported only once the worker has let go of the run's files
#: (spool reader closed, delivery lock released), so whoever waits for them may read or
#: remove those files at once.
ENDED = frozenset({"done", "failed", "stopped"})


class _Failed(Exception):
    """Internal: this backend failed permanently; the message names the cause."""


def _redacted_again(event: ProvenanceEvent) -> ProvenanceEvent:
    """A provenance event as today's rules redact it: its argv always (cheap), its diff
    when the spool predates the probe's redaction (no ``diff_redacted``)."""
    diff = event.diff
    if diff and not event.data.get("git", {}).get("diff_redacted"):
        diff = redact_text(diff)
    return replace(event, data=redacted_again(event.data), diff=diff)


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
        #: opening, delivering, retrying, then done, stopped or failed (terminal states)
        self.state = "opening"
        #: the cause when ``state == "failed"`` (a permanent failure; nothing is retried)
        self.error: str | None = None
        #: events (or keys of events) quarantined by this worker
        self.quarantined = 0
        self._config: dict[str, object] = {}
        self._config_upto: int | None = None
        self._provenance: dict[str, object] = {}  # kept in the merged config once seen
        self.backend: Backend | None = None
        self._rewinds: list[Attempt] = []
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

    @property
    def failed(self) -> bool:
        """True once the backend failed permanently (the worker has then ended)."""
        return self.state == "failed"

    # -- worker thread ---------------------------------------------------------------
    def _progress(self, state: str) -> None:
        self.state = state
        if state not in ENDED:  # the end is reported by _main, after letting go
            self._report()

    def _report(self) -> None:
        if self._on_progress is not None:
            self._on_progress(Progress(self.name, self.acked, self._target or 0, self.state))

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
        except _Failed as failed:
            self.error = str(failed)
            self.reporter.fail(self.name, self.error)
            self._progress("failed")
        except Exception as exc:  # the worker reports; it never raises into anyone
            self.reporter.report(self.name, "worker", f"{type(exc).__name__}: {exc}")
            self._progress("failed")
        finally:
            if reader is not None:
                self.damage = list(reader.damage.errors)
                reader.close()
            if self._lock is not None:
                self._lock.release()
            if self.state not in ENDED:
                self.state = "stopped"
            self._report()

    def _open(self, reader: SpoolReader) -> Backend | None:
        """A new backend, opened with the stored cursor; None once stopped or past the
        deadline. Raises _Failed for a permanent failure."""
        backoff = BACKOFF_INITIAL
        while not self._stop.is_set():
            cursor = reader.cursor(self.name)
            self.acked = cursor.acked_seq
            try:
                backend = self._make_backend()
            except Exception as exc:  # a constructor does no I/O: this is a bad option
                raise _Failed(f"cannot be created: {type(exc).__name__}: {exc}") from exc
            try:
                backend.open(self.run, ResumeState(cursor.remote_id, cursor.state,
                                                   cursor.acked_seq))
            except PermanentBackendError as exc:
                raise _Failed(f"open: {exc}") from exc
            except Exception as exc:
                self.reporter.report(self.name, "open", f"{type(exc).__name__}: {exc}")
                self._progress("retrying")
                if self._past_deadline():
                    return None
                self._sleep(backoff * (1 + random.random() / 4))
                backoff = min(backoff * 2, BACKOFF_MAX)
                continue
            self.reporter.resolve(self.name, "open", "opened after earlier failures")
            self._rewinds = attempts.rewinds_due(reader.attempts(), self.acked,
                                                 cursor.updated > 0)
            self._ack(reader, backend)  # keeps the remote identity before the first batch
            return backend
        return None

    def _reopen(self, reader: SpoolReader, backend: Backend) -> Backend | None:
        """The retry contract: close, then a new backend opened at the acknowledged cursor."""
        self._close(backend, "retrying")
        self.backend = self._open(reader)
        return self.backend

    def _close(self, backend: Backend, status: str) -> None:
        try:
            backend.close(status)
        except Exception as exc:
            if status == "retrying":  # part of the failure already reported; not another
                log.debug("trackmux: backend %r: close after a failure: %s", self.name, exc)
            else:
                self.reporter.report(self.name, "close", f"{type(exc).__name__}: {exc}")

    def _deliver(self, reader: SpoolReader) -> None:
        self._progress("opening")
        backend = self._open(reader)
        if backend is None:
            self._progress("stopped")
            return
        self.backend = backend
        backoff = BACKOFF_INITIAL
        failures = 0  # failed attempts at the current position
        single_until = 0  # deliver one event at a time up to this seq
        last_failure: tuple[int, str] | None = None
        repeats = 0  # identical failures of one event on its own, in a row
        # Events skipped for a deterministic failure, confirmed as quarantined by the next
        # success; if the next event fails the same way first, the backend (not the event)
        # is at fault: the skips are undone and plain retrying goes on until a success.
        tentative: list[tuple[int, Event, str]] = []  # (acked before it, event, error)
        trust_skips = True

        while not self._stop.is_set():
            self._wake.clear()  # before reading, so a commit notified meanwhile is not lost
            limit = 1 if self.acked < single_until else self.batch_size
            batch = reader.read(self.acked, limit)
            if batch.upto <= self.acked:
                if self._target is not None and self.acked >= self._target:
                    break
                if self._target is not None and reader.last_seq() <= self.acked:
                    break  # damaged tail: nothing more can be read
                self._wake.wait(0.25)
                continue
            try:
                for part, rewind in self._split_at_rewinds(batch.events, batch.upto):
                    prepared = self._prepare(reader, part, backend) if part else []
                    if prepared:
                        self._write(backend, prepared)
                    if rewind is not None:  # a resumed attempt went back: tell the backend
                        backend.rewind(rewind.rewind_to or 0)
                        backend.flush()
                        self._rewinds.remove(rewind)
            except PermanentBackendError as exc:
                self._close(backend, "failed")
                raise _Failed(f"write: {exc}") from exc
            except EventRejected as exc:
                if len(batch.events) == 1:
                    self._quarantine(reader, batch.events[0], str(exc), exc.keys)
                    with contextlib.suppress(Exception):
                        backend.flush()
                else:
                    single_until = batch.upto
                    reopened = self._reopen(reader, backend)
                    if reopened is None:
                        break
                    backend = reopened
                    continue
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                self.reporter.report(self.name, "write", error)
                self._progress("retrying")
                failures += 1
                deterministic = (not isinstance(exc, OSError)
                                 or exc.errno == errno.ENAMETOOLONG)
                move_to: int | None = None
                if len(batch.events) == 1 and deterministic and trust_skips:
                    event = batch.events[0]
                    repeats = repeats + 1 if last_failure == (event.seq, error) else 1
                    last_failure = (event.seq, error)
                    if repeats >= QUARANTINE_AFTER and tentative and tentative[-1][2] == error:
                        move_to = tentative[0][0]  # the backend fails on everything
                        self._record(reader.unquarantine, self.name,
                                     [e.seq for _, e, _ in tentative])
                        tentative, trust_skips = [], False
                        failures, repeats, last_failure = 0, 0, None
                    elif repeats >= QUARANTINE_AFTER:
                        self._record(reader.quarantine, self.name, event.seq, event.kind,
                                     (), f"failed {repeats} times on its own: {error}")
                        tentative.append((self.acked, event, error))
                        move_to = batch.upto
                        failures, repeats, last_failure = 0, 0, None
                elif len(batch.events) > 1 and deterministic and failures >= ISOLATE_AFTER:
                    single_until = batch.upto
                if self._past_deadline():
                    self._progress("stopped")
                    return
                if move_to is None:
                    self._sleep(backoff * (1 + random.random() / 4))
                    # a failure that looks deterministic is retried soon, to isolate it soon
                    backoff = min(backoff * 2, BACKOFF_DETERMINISTIC if deterministic
                                  else BACKOFF_MAX)
                reopened = self._reopen(reader, backend)
                if reopened is None:
                    break
                backend = reopened
                if move_to is not None:
                    self.acked = move_to
                    self._ack(reader, backend)
                continue
            if batch.upto >= single_until:  # not while isolating the failing event
                self.reporter.resolve(self.name, "write", "delivering again")
            self._confirm(tentative)
            tentative, trust_skips = [], True
            backoff = BACKOFF_INITIAL
            failures, repeats, last_failure = 0, 0, None
            self.acked = batch.upto
            self._ack(reader, backend)
            self._progress("delivering")
        if self._stop.is_set() or self.backend is None:
            self._progress("stopped")
            return
        self._confirm(tentative)  # the skipped event was the last one
        self._close(backend, self._status)
        self._progress("done")

    def _record(self, write: Callable[..., None], *args: Any) -> None:
        try:
            write(*args)
        except Exception as exc:
            self.reporter.report(self.name, "ack", f"cannot record a quarantine: {exc}")

    def _confirm(self, tentative: list[tuple[int, Event, str]]) -> None:
        for _, event, error in tentative:
            self.quarantined += 1
            self.reporter.report(self.name, "rejected", f"event {event.seq} ({event.kind}) "
                                 f"quarantined: failed {QUARANTINE_AFTER} times on its own: "
                                 f"{error}")

    def _prepare(self, reader: SpoolReader, events: list[Event], backend: Backend
                 ) -> list[Event]:
        """Config events carry the merged config so far; fallbacks for kinds not shown."""
        prepared: list[Event] = []
        for event in events:
            if isinstance(event, ProvenanceEvent):
                event = _redacted_again(event)
            if isinstance(event, ConfigEvent):
                if self._config_upto is None or event.seq <= self._config_upto:
                    self._config = merged(e.config for e in reader.config_events(event.seq)
                                          if isinstance(e, ConfigEvent))
                    self._config = merge_config(self._config, self._provenance)
                self._config = merge_config(self._config, event.config)
                self._config_upto = event.seq
                event = replace(event, config=self._config)
            elif (isinstance(event, ProvenanceEvent) and "provenance" not in backend.capabilities
                  and "config" in backend.capabilities):  # issue 25: config under _provenance
                if self._config_upto is None or event.seq <= self._config_upto:
                    self._config = merged(e.config for e in reader.config_events(event.seq)
                                          if isinstance(e, ConfigEvent))
                    self._config = merge_config(self._config, self._provenance)
                self._provenance = fallbacks.provenance_config(event)
                self._config = merge_config(self._config, self._provenance)
                self._config_upto = event.seq
                prepared.append(ConfigEvent(self._config, event.step, event.time, event.seq))
                continue  # one event per seq: backends dedupe redeliveries on it
            prepared.append(event)

        def skipped(kind: str, message: str) -> None:
            if kind.startswith("artifact "):  # a file changed or gone: data not delivered
                self.reporter.report(self.name, kind, message)
            else:  # a kind this backend cannot show: an expected limit, a note
                self.reporter.note(self.name, kind, message)

        return fallbacks.adapt(prepared, backend, skipped, self.run.run_dir)

    def _quarantine(self, reader: SpoolReader, event: Event, reason: str,
                    keys: tuple[str, ...] = ()) -> None:
        """Move past an event (or some keys of it) the backend refuses for good."""
        self._record(reader.quarantine, self.name, event.seq, event.kind, keys, reason)
        self.quarantined += 1
        what = f"keys {list(keys)} of event {event.seq}" if keys else f"event {event.seq}"
        self.reporter.report(self.name, "rejected",
                             f"{what} ({event.kind}) quarantined: {reason}")
    def _split_at_rewinds(self, events: list[Event], upto: int
                          ) -> list[tuple[list[Event], Attempt | None]]:
        """``events`` cut before the first event of each attempt whose rewind the backend
        must get first (core/spool/attempts.py); each part is followed by that rewind, if any."""
        parts: list[tuple[list[Event], Attempt | None]] = []
        rest = events
        for attempt in list(self._rewinds):
            if attempt.first_seq > upto:
                break
            before = [e for e in rest if e.seq < attempt.first_seq]
            rest = [e for e in rest if e.seq >= attempt.first_seq]
            parts.append((before, attempt))
        parts.append((rest, None))
        return parts

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
        if events:
            backend.write(events)
        backend.flush()
