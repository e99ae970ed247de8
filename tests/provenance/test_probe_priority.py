"""Only the probe process runs below the trainer (issue 34.9): the provenance thread,
which runs Python and so holds the GIL, keeps the trainer's priority (a niced GIL holder
made log() wait on a busy machine), and so does the thread that starts the child (issue 43
item 17); the child runs at nice 10 through ``nice -n``."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

import trackmux
from trackmux.provenance import record

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="per-thread nice values are Linux's")


def _priority() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_the_child_runs_at_nice_10_and_the_caller_keeps_its_priority() -> None:
    before = _priority()
    with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out:
        given.write(b"ignored")
        given.seek(0)
        record._run_niced([sys.executable, "-c", "import os; print(os.nice(0))"], given, out)
        out.seek(0)
        assert int(out.read()) == max(before, record.NICE)
    assert _priority() == before


def test_no_thread_of_the_trainer_runs_python_below_its_priority(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43 item 17: the thread that runs ``Popen``'s Python code (GIL held) keeps the
    trainer's priority; a helper lowered to nice 10 for the spawn could be left off a busy
    CPU holding the GIL while ``log()`` waited."""
    import subprocess

    spawning: list[int] = []
    real = subprocess.Popen

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            spawning.append(_priority())
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Recording)
    trainer = _priority()
    with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out:
        record._run_niced([sys.executable, "-c", "pass"], given, out)
    assert spawning == [trainer]
    assert _priority() == trainer


def test_a_failing_child_raises_in_the_caller() -> None:
    import subprocess

    with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out, \
            pytest.raises(subprocess.CalledProcessError):
        record._run_niced([sys.executable, "-c", "raise SystemExit(3)"], given, out)


def test_the_collector_thread_keeps_the_trainers_priority(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    real = record.Collector._probe

    def probe(directory: str) -> dict[str, Any]:
        seen.append(_priority())
        return real(directory)

    monkeypatch.setattr(record.Collector, "_probe", staticmethod(probe))
    trainer = _priority()
    run = trackmux.init(project="p", backends=[], dir=tmp_path, provenance=True)
    assert record.wait_recorded(run, 600)  # the probe answered (finish() waits 5 s at most)
    run.finish(timeout=60)
    assert seen == [trainer]
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run.dir)
    try:
        (event,) = reader.events_of_kind("provenance")
    finally:
        reader.close()
    assert "packages" in event.data and "incomplete" not in event.data  # the probe answered
