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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import trackmux
from spool_support import wait_quiet
from trackmux.core.backends.contract import RunInfo
from trackmux.core.delivery import watch
from trackmux.core.events import FindingEvent, TextEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.doctor.config import resolve
from trackmux.doctor.coverage import NOTE_KEY
from trackmux.testing.pacer import HeldCommits, hold_commits

WAIT = 60.0


class ForcedPass:
    """Makes the run's watch runner read the spool and tick once, from the finishing
    thread, after ``finish()`` marked the run finished and before it commits the queue."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._cond = threading.Condition()
        self._armed = False
        self._reading_armed = False  # the runner's current pass began its read when armed
        self.passes = 0  # passes whose read began after arming, ticked and emitted
        monkeypatch.setattr(watch, "TICK", 0.0)  # every pass ticks (else once a second)
        read, emit = watch.SpoolReader.read, watch.WatchRunner._emit

        def reading(reader: SpoolReader, *args: Any, **kwargs: Any) -> Any:
            if threading.current_thread().name == "trackmux-watch":
                with self._cond:
                    self._reading_armed = self._armed
            return read(reader, *args, **kwargs)

        def emitting(runner: watch.WatchRunner, found: list[Any]) -> None:
            emit(runner, found)
            with self._cond:
                if self._reading_armed:
                    self.passes += 1
                    self._cond.notify_all()

        monkeypatch.setattr(watch.SpoolReader, "read", reading)
        monkeypatch.setattr(watch.WatchRunner, "_emit", emitting)

    def around_finish(self, run: trackmux.Run) -> None:
        """Before the finishing thread's first spool write (``set_meta(state=...)``, which
        wakes the writer), wait for one whole pass of the runner."""
        spool = run._spool
        set_meta = spool.set_meta

        def finishing(**values: Any) -> None:
            if "state" in values:
                assert run._finished  # the runner's alive() says False from here on
                assert run._watch is not None
                with self._cond:
                    self._armed = True
                run._watch.notify()
                with self._cond:
                    assert self._cond.wait_for(lambda: self.passes >= 1, WAIT), \
                        "the watch runner made no pass"
            set_meta(**values)

        spool.set_meta = finishing  # type: ignore[method-assign]


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ForcedPass, HeldCommits]]:
    with hold_commits() as held:
        yield ForcedPass(monkeypatch), held


def _run(tmp_path: Path, forced: tuple[ForcedPass, HeldCommits],
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
    assert force.passes >= 1
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
        tmp_path: Path, forced: tuple[ForcedPass, HeldCommits]) -> None:
    rows = [{"actor/grad_norm": 0.0, "critic/score/mean": 0.3 + 0.1 * step,
             "actor/kl_loss": 0.0} for step in range(2)]
    run = _run(tmp_path, forced, rows)
    assert [(f["rule"], f["severity"]) for f in run.findings()] == [("frozen_start",
                                                                      "critical")]
    _, stored, _ = _spool(run.dir)
    assert [f.rule for f in stored] == ["frozen_start"]


def test_the_coverage_note_is_said_on_every_event_and_a_rerun_adds_none(
        tmp_path: Path, forced: tuple[ForcedPass, HeldCommits]) -> None:
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
