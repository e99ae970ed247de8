"""Watchers: code that reads a live run's events once per run (not once per backend) and
may append findings to the spool. The doctor (trackmux/doctor/) is the one trackmux ships.

A watcher is named by a :class:`WatcherSpec` (``"module:callable"`` plus JSON options), so
it crosses the pipe to the delivery process as plain data and core never imports the wing
that provides it. :class:`WatchRunner` runs every watcher of a run on one thread: in the
delivery process (the default), or on a thread of the trainer with ``delivery="thread"``.
It follows the spool like a delivery worker (woken by commits, reading from seq 0 on each
start; wake-ups within ``READ_EVERY`` of its last read wait for the rest of it, so a trainer
that commits every few milliseconds costs it one read a quarter second, not one per commit,
and kinds of event no watcher reads are passed over undecoded), feeds each event in spool
order, ticks the watchers every second with the wall time
while the trainer is alive (a hang shows as the absence of events), and once it is gone,
finishing, right after the last events it committed were fed (never before: a watcher
takes "gone" for "the run is over", and judges what it has), and appends what
they return with :func:`~trackmux.core.spool.writer.append_events`, so every backend, a
resync and every reader get the findings like any other event.

A watcher may also return notes: a :class:`~trackmux.core.events.TextEvent` it says of the
run that is not a finding (the doctor's coverage, key ``doctor/coverage``). A note is
appended like a finding, so a backend that shows text shows it (the console as its own
line), but it is a text event: nothing that counts, alerts on or stores findings sees it,
and ``on_found`` (the trainer's ``run.findings()``, stop policies) gets only the findings.

A finding already in the spool (same rule, step, keys and revision) is not appended again,
nor a note (same key, step and text): a restarted delivery process re-reads the run and
finds the same things. A watcher that
raises is reported once and switched off for the run; delivery never stops for it. An
append that fails (the spool's write lock held past SQLite's busy timeout, a full disk) is
reported once; its findings are kept and appended on a later pass, never dropped.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from trackmux.core.backends.contract import RunInfo
from trackmux.core.events import EVENT_KINDS, Event, FindingEvent, TextEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.writer import append_events

log = logging.getLogger("trackmux")

TICK = 1.0
READ_PAGE = 2000
#: the shortest time between two reads of a live run (findings may be due within 2 s)
READ_EVERY = 0.25

#: what a watcher returns: findings, and notes (text that is not a finding)
WatchEvent = FindingEvent | TextEvent


class Watcher(Protocol):
    """What a watcher factory returns. Called on the runner's thread only."""

    def feed(self, event: Event) -> Sequence[WatchEvent]:
        """One event, in spool order; returns findings it completes (usually none)."""

    def tick(self, now: float, alive: bool) -> Sequence[WatchEvent]:
        """Every second while the trainer is alive (``alive`` true: more events may come),
        with the wall time; then once with ``alive`` false, when every event the trainer
        committed was fed (the finishing tick: the run is over; again only after events
        fed later, such as a commit of the trainer's last moment)."""

    # optional: ``kinds``, a frozenset of the event kinds ``feed`` reads (absent or None:
    # every kind); the runner passes over the others without decoding them


@dataclass(frozen=True)
class WatcherSpec:
    """A watcher by name: ``target`` is ``"module:callable"``, called as
    ``callable(options, run_info)`` in the process that runs it. ``stop``: which of its
    findings (as ``run.findings()`` gives them) ask the trainer to stop; it stays in the
    trainer's process (``Run.should_stop``), never crosses the pipe."""

    target: str
    options: Mapping[str, Any] = field(default_factory=dict)
    stop: Callable[[Mapping[str, Any]], bool] | None = field(default=None, compare=False)

    def as_json(self) -> dict[str, Any]:
        return {"target": self.target, "options": dict(self.options)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WatcherSpec:
        return cls(str(data["target"]), dict(data.get("options") or {}))

    def build(self, info: RunInfo) -> Watcher:
        module, _, attribute = self.target.partition(":")
        factory: Callable[[Mapping[str, Any], RunInfo], Watcher] = getattr(
            importlib.import_module(module), attribute)
        return factory(dict(self.options), info)


def identity(event: WatchEvent) -> tuple[str, str, int, tuple[str, ...], int]:
    """What makes a watcher's event the same as one in the spool: a finding's rule, onset
    step, keys and revision (an update of a finding that grows is a new event of the same
    one); a note's key, step and text."""
    if isinstance(event, TextEvent):
        return ("text", event.key, event.step, (event.text,), 0)
    return ("finding", event.rule, event.step, tuple(event.keys), event.revision)


def said_before(reader: SpoolReader) -> set[tuple[str, str, int, tuple[str, ...], int]]:
    """The identities of the findings and notes already in the spool (at a runner's start,
    and where an append's outcome is unknown: the run's text events are decoded then)."""
    return {identity(event) for kind in ("finding", "text")
            for event in reader.events_of_kind(kind)
            if isinstance(event, (FindingEvent, TextEvent))}


class WatchRunner:
    """Every watcher of one run on one thread, following the run's spool."""

    def __init__(self, specs: Sequence[WatcherSpec], info: RunInfo, *,
                 alive: Callable[[], bool],
                 on_found: Callable[[list[FindingEvent]], None],
                 on_problem: Callable[[str, str], None],
                 append: Callable[[list[WatchEvent]], int] | None = None) -> None:
        """``on_found`` gets the findings of each append (an empty list when it held only
        notes: backends are woken all the same). ``append`` stores findings and notes in
        the spool and returns the last seq; by default
        :func:`append_events` here (the delivery process passes one that asks the trainer
        to, so the idle-class process never holds the spool's write lock)."""
        self.info = info
        self._append = append or (lambda found: append_events(info.run_dir, list(found)))
        self._alive = alive
        self._on_found = on_found
        self._on_problem = on_problem
        self._watchers: list[tuple[str, Watcher]] = []
        for spec in specs:
            try:
                self._watchers.append((spec.target, spec.build(info)))
            except Exception as exc:  # a watcher that cannot start never stops delivery
                on_problem(spec.target, f"cannot start: {type(exc).__name__}: {exc}")
        self.cursor = 0
        self.last_appended = 0
        #: the finishing tick (trainer gone, every event fed) ran and its findings are
        #: appended: catch_up waits for it, so they are inside delivery's last target
        self._final_tick_done = False
        self._known: set[tuple[str, str, int, tuple[str, ...], int]] = set()
        self._skip = self._unread_kinds()
        self._wake = threading.Event()
        self._hurry = threading.Event()  # finishing: no more pauses between reads
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._write_reported = False
        #: findings and notes whose append failed, appended before any new one
        self._unsaved: list[WatchEvent] = []
        self.thread = threading.Thread(target=self._main, name="trackmux-watch", daemon=True)

    def _unread_kinds(self) -> frozenset[str]:
        wanted: set[str] = set()
        for _, watcher in self._watchers:
            kinds = getattr(watcher, "kinds", None)
            if kinds is None:
                return frozenset()
            wanted |= set(kinds)
        return EVENT_KINDS - wanted

    @property
    def active(self) -> bool:
        return bool(self._watchers)

    def start(self) -> None:
        if self._watchers:
            self.thread.start()

    def notify(self) -> None:
        self._wake.set()

    def stop(self, wait: float = 0.0) -> None:
        """Stop the thread; ``wait`` seconds for it to close its spool reader (a run's
        ``finish()`` returns with nothing of its own still reading the spool)."""
        self._stop.set()
        self._hurry.set()
        self._wake.set()
        if wait > 0 and self.thread.is_alive():
            self.thread.join(wait)

    def catch_up(self, target: int, deadline: float) -> int:
        """Wait (until ``deadline``, monotonic) until every event up to ``target`` was fed;
        returns the seq that delivery should reach so the findings go out too."""
        if not self._watchers or not self.thread.is_alive():
            return max(target, self.last_appended)
        self._hurry.set()
        self._wake.set()
        with self._cond:
            ending = not self._alive()  # then the finishing tick's findings go too
            while ((self.cursor < target or (ending and not self._final_tick_done)
                    or self._unsaved) and self.thread.is_alive()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(min(remaining, 0.1))
            return max(target, self.last_appended)

    # -- the runner's thread ------------------------------------------------------------
    def _main(self) -> None:
        try:
            reader = SpoolReader(self.info.run_dir)
        except Exception as exc:
            self._on_problem("watch", f"cannot read the spool: {exc}")
            return
        try:
            self._known |= said_before(reader)
            next_tick = time.monotonic()
            last_read, more = 0.0, False
            while not self._stop.is_set():
                pause = last_read + READ_EVERY - time.monotonic()
                if pause > 0 and not more:  # coalesce the wake-ups of many small commits
                    self._hurry.wait(pause)
                self._wake.clear()
                last_read = time.monotonic()
                # Both read before the spool is: catch_up() hurries only once the trainer's
                # last events are committed, so a read begun after it sees them all. Read
                # after it, a trainer that finished meanwhile made the watchers hear "gone"
                # with its last steps unread (the doctor judged a run of no points).
                hurried, alive = self._hurry.is_set(), self._alive()
                before = self.cursor
                batch = reader.read(self.cursor, READ_PAGE, skip=self._skip)
                found: list[WatchEvent] = []
                for event in batch.events:
                    found += self._each("feed", event)
                caught_up = batch.upto - before < READ_PAGE
                # finishing: a tick with the trainer gone once the last events were fed, so
                # what they end (a finding's last state) goes out with them. A trainer gone
                # before that (finished, its last commit on the way) is not ticked at all:
                # "gone" is said only with every event it committed fed. Said once, then
                # again only after events fed since: what a later tick could say was said,
                # and it would land after finish() returned, past delivery's target.
                final = hurried and caught_up and not alive and (
                    not self._final_tick_done or bool(batch.events))
                if final or (alive and time.monotonic() >= next_tick):
                    next_tick = time.monotonic() + TICK
                    found += self._each("tick", time.time(), alive)
                self._emit(found)
                with self._cond:
                    self.cursor = max(self.cursor, batch.upto)
                    # a pass that fed the last events before catch_up hurried it did not
                    # tick as the final one: catch_up waits for the one that does (a
                    # finding's last state was appended after delivery's target: CI saw
                    # the file backend miss a finding the spool had)
                    self._final_tick_done = self._final_tick_done or final
                    self._cond.notify_all()
                more = batch.upto - before >= READ_PAGE  # a full page: more to read now
                if more:
                    continue
                self._wake.wait(max(0.0, min(TICK, next_tick - time.monotonic())))
        finally:
            reader.close()
            if self._unsaved:  # stopped while an append failed: one last try
                self._emit([])
            with self._cond:
                self._cond.notify_all()

    def _each(self, method: str, *args: Any) -> list[WatchEvent]:
        found: list[WatchEvent] = []
        for entry in list(self._watchers):
            name, watcher = entry
            try:
                found.extend(getattr(watcher, method)(*args))
            except Exception as exc:
                self._watchers.remove(entry)
                self._on_problem(name, f"{method} raised {type(exc).__name__}: {exc}; "
                                 "switched off for this run")
        return found

    def _emit(self, found: list[WatchEvent]) -> None:
        fresh: list[WatchEvent] = list(self._unsaved)  # a failed append's, tried again
        for finding in found:
            key = identity(finding)
            if key not in self._known:
                self._known.add(key)
                fresh.append(finding)
        if not fresh:
            return
        # Rules are sure of their findings after different numbers of steps (a window, a
        # persistence count), so one read can find a later onset before an earlier one:
        # appended in onset order, every backend and reader gets them in step order.
        fresh.sort(key=lambda f: f.step)
        try:
            self.last_appended = self._append(list(fresh))
        except Exception as exc:
            # a spool whose write lock a busy trainer held past SQLite's busy timeout, a
            # full disk: the findings are kept and tried again on the next pass (each
            # read, at least every TICK), never dropped for one failed write
            self._unsaved = fresh
            if not self._write_reported:
                self._write_reported = True
                self._on_problem("watch", f"cannot append findings to the spool: {exc}; "
                                 "kept, and tried again on each read")
            return
        self._unsaved = []
        self._on_found([f for f in fresh if isinstance(f, FindingEvent)])


def runner_problem_reporter(report: Callable[[str, str, str], object]
                            ) -> Callable[[str, str], None]:
    """Adapt a :class:`~trackmux.core.delivery.reporting.Reporter`'s ``report``."""
    def on_problem(name: str, message: str) -> None:
        report("doctor" if "doctor" in name else "watch", "watcher", f"{name}: {message}")
    return on_problem
