"""A watcher hears "the trainer is gone" (a tick with ``alive`` false) only once it has
been fed every event the trainer committed (core/delivery/watch.py).

The interleaving is forced, not hoped for: commits are held (trackmux.testing.pacer), so
the run's steps are still in the trainer's queue when ``finish()`` marks it finished, and
the runner is made to read the spool and tick right then, before ``finish()`` commits them.
The runner used to tick its watchers with ``alive`` false in that pass: the doctor's
``frozen_start`` then judged a run of no points and stopped, a short frozen run was never
raised, and the coverage note named ``frozen_start`` as "not run" although the run logged
its keys. A watcher that read the run again (a restarted delivery process) then said a
second note: the spool's last seq went from 4 to 5 (the flake of
test_coverage_live.py's rerun test in a loaded full suite, 2026-12-07 02:35)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import trackmux
from spool_support import wait_quiet
from trackmux.core.backends.contract import RunInfo
from trackmux.core.delivery import watch
from trackmux.core.events import Event, FindingEvent, MetricsEvent, TextEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.writer import SpoolWriter
from trackmux.doctor.config import resolve
from trackmux.doctor.coverage import NOTE_KEY
from trackmux.testing.pacer import HeldCommits, hold_commits

WAIT = 60.0


class Passes:
    """Counts the watch runner's passes (read, feed, tick, append) and makes one happen
    now: :meth:`force` returns once a pass whose read began after the call has ended."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._cond = threading.Condition()
        self._armed = 0  # force() calls so far
        self._reading = 0  # the force() calls before the current pass began its read
        self._done = 0  # the force() calls answered by a whole pass begun after them
        monkeypatch.setattr(watch, "TICK", 0.0)  # every pass ticks (else once a second)
        read, emit = watch.SpoolReader.read, watch.WatchRunner._emit

        def reading(reader: SpoolReader, *args: Any, **kwargs: Any) -> Any:
            if threading.current_thread().name == "trackmux-watch":
                with self._cond:
                    self._reading = self._armed
            return read(reader, *args, **kwargs)

        def emitting(runner: watch.WatchRunner, found: list[Any]) -> None:
            emit(runner, found)
            with self._cond:
                self._done = max(self._done, self._reading)
                self._cond.notify_all()

        monkeypatch.setattr(watch.SpoolReader, "read", reading)
        monkeypatch.setattr(watch.WatchRunner, "_emit", emitting)

    def force(self, runner: watch.WatchRunner) -> None:
        with self._cond:
            self._armed += 1
            armed = self._armed
        runner.notify()
        with self._cond:
            assert self._cond.wait_for(lambda: self._done >= armed, WAIT), \
                "the watch runner made no pass"

    def around_finish(self, run: trackmux.Run) -> None:
        """One pass of the run's runner from the finishing thread, after ``finish()`` marked
        the run finished (its ``alive()`` says False from then on) and before its first
        spool write (``set_meta(state=...)``, which wakes the writer: the queue commits)."""
        spool = run._spool
        set_meta = spool.set_meta

        def finishing(**values: Any) -> None:
            if "state" in values:
                assert run._finished and run._watch is not None
                self.force(run._watch)
            set_meta(**values)

        spool.set_meta = finishing  # type: ignore[method-assign]


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Passes, HeldCommits]]:
    with hold_commits() as held:
        yield Passes(monkeypatch), held


def _run(tmp_path: Path, forced: tuple[Passes, HeldCommits],
         rows: list[dict[str, float]]) -> trackmux.Run:
    force, held = forced
    run = trackmux.init(project="p", backends=[], dir=tmp_path, doctor=True,
                        delivery="thread", provenance=False)
    assert isinstance(run, trackmux.Run)
    held.settle()  # the writer waits for a wake, none pending: the steps stay queued
    for step, row in enumerate(rows):
        run.log(row, step=step)
    force.around_finish(run)
    assert run.finish(timeout=60).complete
    wait_quiet(run)  # its watch thread has ended: the spool is read once nothing appends
    return run


def _spool(run_dir: Path) -> tuple[int, list[FindingEvent], list[TextEvent]]:
    reader = SpoolReader(run_dir)
    try:
        return (reader.last_seq(),
                [e for e in reader.events_of_kind("finding") if isinstance(e, FindingEvent)],
                [e for e in reader.events_of_kind("text")
                 if isinstance(e, TextEvent) and e.key == NOTE_KEY])
    finally:
        reader.close()


def test_a_short_frozen_run_is_raised_when_the_runner_reads_as_the_trainer_finishes(
        tmp_path: Path, forced: tuple[Passes, HeldCommits]) -> None:
    rows = [{"actor/grad_norm": 0.0, "critic/score/mean": 0.3 + 0.1 * step,
             "actor/kl_loss": 0.0} for step in range(2)]
    run = _run(tmp_path, forced, rows)
    assert [(f["rule"], f["severity"]) for f in run.findings()] == [("frozen_start",
                                                                      "critical")]
    _, stored, _ = _spool(run.dir)
    assert [f.rule for f in stored] == ["frozen_start"]


def test_the_coverage_note_is_said_on_every_event_and_a_rerun_adds_none(
        tmp_path: Path, forced: tuple[Passes, HeldCommits]) -> None:
    rows = [{"score_mean": 0.5, "kl_to_ref": 0.01} for _ in range(3)]
    run = _run(tmp_path, forced, rows)
    before, findings, [note] = _spool(run.dir)
    assert before == 4 and findings == []
    assert note.step == 2 and note.text.startswith("judged: read reward and kl")
    assert "frozen_start" not in note.text  # it read the KL: it ran
    # a watcher that reads the run again (a restarted delivery process) says the same
    info = RunInfo("p", run.name, run.id, run.dir, 0.0)
    found: list[FindingEvent] = []
    runner = watch.WatchRunner([watch.WatcherSpec("trackmux.doctor.live:watcher",
                                                  {"rules": resolve(True)})],
                               info, alive=lambda: False, on_found=found.extend,
                               on_problem=lambda *a: None)
    runner.start()
    runner.catch_up(before, time.monotonic() + WAIT)
    runner.stop(wait=10)
    assert not runner.thread.is_alive()
    assert runner.cursor >= before and found == []
    assert _spool(run.dir)[0] == before


TICKS: list[tuple[int, bool]] = []  # (events fed so far, alive) at each tick


class Ticks:
    kinds = frozenset({"metrics"})

    def __init__(self) -> None:
        self.fed = 0

    def feed(self, event: Event) -> Sequence[FindingEvent]:
        self.fed += 1
        return ()

    def tick(self, now: float, alive: bool) -> Sequence[FindingEvent]:
        TICKS.append((self.fed, alive))
        return ()


def ticks(options: Mapping[str, Any], info: RunInfo) -> Ticks:
    return Ticks()


def test_a_watcher_hears_gone_once_and_with_every_event_fed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner passes while the trainer lives, once it is gone with its last commit
    still to come, after catch_up(), and again later: one tick says gone, with all fed."""
    TICKS.clear()
    passes = Passes(monkeypatch)
    writer = SpoolWriter(tmp_path)
    for step in range(5):
        writer.append(MetricsEvent({"loss": 1.0}, step, 0.0))
    writer.flush(WAIT)
    gone = threading.Event()
    runner = watch.WatchRunner([watch.WatcherSpec(f"{__name__}:ticks")],
                               RunInfo("p", "n", "r", tmp_path, 0.0),
                               alive=lambda: not gone.is_set(), on_found=lambda f: None,
                               on_problem=lambda n, m: None)
    runner.start()
    passes.force(runner)  # alive
    gone.set()  # the trainer finished: its last steps are not committed yet
    passes.force(runner)
    for step in range(5, 8):
        writer.append(MetricsEvent({"loss": 1.0}, step, 0.0))
    writer.flush(WAIT)
    last = writer.last_seq
    assert runner.catch_up(last, time.monotonic() + WAIT) >= last
    for _ in range(3):  # the runner goes on until it is stopped: nothing more is said
        passes.force(runner)
    runner.stop(wait=WAIT)
    assert not runner.thread.is_alive()
    writer.close()
    assert (5, True) in TICKS
    assert [t for t in TICKS if not t[1]] == [(8, False)], TICKS
