"""The watch runner's costs (core/delivery/watch.py): it decodes only the kinds its watchers
read, and coalesces the wake-ups of a trainer that commits every few milliseconds into one
read per ``READ_EVERY``, while still feeding every event in order and catching up at once
when the run finishes."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trackmux.core.backends.contract import RunInfo
from trackmux.core.delivery import watch
from trackmux.core.events import Event, FindingEvent, ImageEvent, MetricsEvent, TableEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.writer import SpoolWriter
from trackmux.core.values.media import encode_image
from trackmux.doctor.config import resolve
from trackmux.doctor.engine import Doctor

SEEN: list[Event] = []


class Recording:
    kinds = frozenset({"metrics", "table"})

    def feed(self, event: Event) -> Sequence[FindingEvent]:
        SEEN.append(event)
        return ()

    def tick(self, now: float, alive: bool) -> Sequence[FindingEvent]:
        return ()


def recording(options: Mapping[str, Any], info: RunInfo) -> Recording:
    return Recording()


def _image(step: int) -> ImageEvent:
    encoded = encode_image(np.zeros((8, 8, 3), dtype=np.uint8))
    return ImageEvent("samples/grid", encoded.png, encoded.width, encoded.height,
                      encoded.mode, step, 0.0)


def test_only_the_kinds_watchers_read_are_decoded_and_reads_coalesce(
        tmp_path: Path, monkeypatch: Any) -> None:
    SEEN.clear()
    writer = SpoolWriter(tmp_path)
    decoded: list[str] = []
    original = SpoolReader._decode_rows

    def spy(self: SpoolReader, rows: list[tuple[Any, ...]]) -> Any:
        decoded.extend(r[1] for r in rows)
        return original(self, rows)

    monkeypatch.setattr(SpoolReader, "_decode_rows", spy)
    reads = [0]
    read = SpoolReader.read

    def counted(self: SpoolReader, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "trackmux-watch":
            reads[0] += 1
        return read(self, *args, **kwargs)

    monkeypatch.setattr(SpoolReader, "read", counted)
    # A read window longer than the test: every wake-up after the first read falls inside
    # it, on a quiet machine or a loaded one, so the count of reads below depends on the
    # rule (wait for the rest of the window) and not on how fast this machine runs.
    monkeypatch.setattr(watch, "READ_EVERY", 3600.0)
    info = RunInfo("p", "n", "r", tmp_path, 0.0)
    runner = watch.WatchRunner([watch.WatcherSpec(f"{__name__}:recording")], info,
                               alive=lambda: True, on_found=lambda f: None,
                               on_problem=lambda n, m: None)
    runner.start()
    steps, wakeups = 200, 0
    for step in range(steps):  # a trainer committing often, waking the runner each time
        writer.append(MetricsEvent({"loss": float(step)}, step, 0.0))
        if step % 20 == 0:
            writer.append(TableEvent("t", ("response",), (("x",),), step, 0.0))
            writer.append(_image(step))
        writer.flush(10)
        runner.notify()
        wakeups += 1
    last = writer.last_seq
    assert runner.catch_up(last, time.monotonic() + 60) >= last  # catch_up hurries it
    runner.stop()
    runner.thread.join(10)
    writer.close()
    assert [e.step for e in SEEN if isinstance(e, MetricsEvent)] == list(range(steps))
    assert [e.step for e in SEEN if isinstance(e, TableEvent)] == list(range(0, steps, 20))
    assert "image" not in decoded and {"metrics", "table"} <= set(decoded)
    # 200 wake-ups: the first read, then none until catch_up() hurried it (then a few
    # until stop), not one per commit
    assert 1 <= reads[0] <= 5, (reads[0], wakeups)


def test_the_doctor_names_the_kinds_its_rules_read() -> None:
    doctor = Doctor(resolve(True))
    # config: length_blowup reads the response length cap from it
    assert doctor.kinds == frozenset({"metrics", "histogram", "table", "samples", "config"})
    only_kl = Doctor(resolve({name: name == "kl_blowup" for name in resolve(True)}))
    assert only_kl.kinds == frozenset({"metrics"})


def test_finish_in_thread_mode_returns_with_the_watch_thread_gone(tmp_path: Path) -> None:
    """finish() waits for the doctor's thread to close its spool reader: a run folder
    copied right after finish() must not have its WAL removed under the copy (CI7)."""
    import trackmux

    run = trackmux.init(project="w", backends=[], dir=tmp_path, delivery="thread",
                        doctor=True)
    for step in range(50):
        run.log({"reward/mean": float(step)}, step=step)
    assert run.finish(timeout=30).complete
    assert not [t for t in threading.enumerate() if t.name == "trackmux-watch"]


class LateFirst:
    """Finds, at step 5, a later onset (4) before an earlier one (2): rules are sure after
    different numbers of steps."""

    kinds = frozenset({"metrics"})

    def feed(self, event: Event) -> Sequence[FindingEvent]:
        if isinstance(event, MetricsEvent) and event.step == 5:
            return [FindingEvent("later", "warning", (), "onset 4", 4, event.time),
                    FindingEvent("earlier", "warning", (), "onset 2", 2, event.time)]
        return ()

    def tick(self, now: float, alive: bool) -> Sequence[FindingEvent]:
        return ()


def late_first(options: Mapping[str, Any], info: RunInfo) -> LateFirst:
    return LateFirst()


def test_findings_found_together_reach_the_spool_and_console_in_step_order(
        tmp_path: Path, capsys: Any) -> None:
    """Issue 33.16: the console printed 'step 103' before 'step 101'."""
    from trackmux.plugins.console import ConsoleBackend

    writer = SpoolWriter(tmp_path)
    for step in range(8):
        writer.append(MetricsEvent({"loss": 1.0}, step, float(step)))
    writer.flush(10)
    told: list[int] = []
    runner = watch.WatchRunner([watch.WatcherSpec(f"{__name__}:late_first")],
                               RunInfo("p", "n", "r", tmp_path, 0.0), alive=lambda: True,
                               on_found=lambda found: told.extend(f.step for f in found),
                               on_problem=lambda n, m: None)
    runner.start()
    last = writer.last_seq
    assert runner.catch_up(last, time.monotonic() + 30) >= last
    runner.stop()
    runner.thread.join(10)
    writer.close()
    reader = SpoolReader(tmp_path)
    stored = list(reader.events_of_kind("finding"))
    reader.close()
    assert [e.step for e in stored] == [2, 4] and told == [2, 4]
    console = ConsoleBackend({"interval": 0})
    console.open(RunInfo("p", "n", "r", tmp_path, 0.0), None)  # type: ignore[arg-type]
    console.write([MetricsEvent({"loss": 1.0}, 9, 0.0), *reversed(stored),
                   MetricsEvent({"loss": 1.0}, 10, 0.0)])
    console.close("finished")
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" @ step ")[1][0] for line in lines if "doctor" in line] == ["2", "4"]
    assert lines[0].startswith("step:9") and lines[-1].startswith("step:10")


def test_findings_whose_append_failed_are_appended_on_a_later_pass(tmp_path: Path) -> None:
    """A spool the trainer's writer kept locked past SQLite's busy timeout, a full disk:
    the append fails. The findings of that pass are kept and tried again on the next one
    (they were dropped: the doctor had marked them said, so nothing found them again),
    reported once, and finish()'s catch_up waits until they are in the spool."""
    writer = SpoolWriter(tmp_path)
    for step in range(8):
        writer.append(MetricsEvent({"x": float(step)}, step, 0.0))
    writer.flush(10)
    info = RunInfo("p", "n", "r", tmp_path, 0.0)
    failures, problems, told = [2], [], []

    def flaky(found: list[watch.WatchEvent]) -> int:
        if failures[0]:
            failures[0] -= 1
            raise OSError("database is locked")
        return watch.append_events(tmp_path, list(found))

    runner = watch.WatchRunner([watch.WatcherSpec(f"{__name__}:late_first")], info,
                               alive=lambda: False, on_found=told.extend,
                               on_problem=lambda name, message: problems.append(message),
                               append=flaky)
    runner.start()
    runner.catch_up(writer.last_seq, time.monotonic() + 30)
    runner.stop(wait=10)
    writer.close(10)
    reader = SpoolReader(tmp_path)
    try:
        stored = [(e.rule, e.step) for e in reader.events_of_kind("finding")]
    finally:
        reader.close()
    assert failures == [0]  # both failures happened, then the append went through
    assert stored == [("earlier", 2), ("later", 4)]
    assert [(f.rule, f.step) for f in told] == [("earlier", 2), ("later", 4)]
    assert len(problems) == 1 and "tried again" in problems[0], problems
