"""The delivery process runs below the trainer: the idle scheduling class by default,
or the nice increment ``TRACKMUX_DELIVERY_NICE`` asks for (benchmark B7 measures why)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import trackmux

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling")


def _settles(read: Callable[[], object], want: object, timeout: float = 20.0) -> object:
    """The process lowers its priority first thing after it starts; wait for that."""
    deadline = time.monotonic() + timeout
    while (got := read()) != want and time.monotonic() < deadline:
        time.sleep(0.02)
    return got


def _run(tmp_path: Path) -> trackmux.Run:
    return trackmux.init(project="p", backends=["file"], dir=tmp_path / "spool",
                         delivery="process",
                         backend_options={"file": {"path": str(tmp_path / "out.jsonl")}})


def test_delivery_runs_in_the_idle_class_by_default(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACKMUX_DELIVERY_NICE", raising=False)
    run = _run(tmp_path)
    pid = run.delivery_pid
    assert pid is not None
    try:
        assert _settles(lambda: os.sched_getscheduler(pid), os.SCHED_IDLE) == os.SCHED_IDLE
        run.log({"loss": 1.0}, step=1)  # and it still delivers
        assert run.finish(timeout=60).complete
    finally:
        run.finish(timeout=5)
    assert (tmp_path / "out.jsonl").read_text().count("\n") == 1
    # started through `nice`: its interpreter start and imports already ran below the
    # trainer, not at the trainer's priority until it could lower itself (issue 43 item 17)
    started = min(19, os.getpriority(os.PRIO_PROCESS, 0) + 19)
    assert (f"started at nice {started}, runs at idle class"
            in (run.dir / "delivery.log").read_text())


@pytest.mark.parametrize(("value", "increment"), [("5", 5), ("0", 0), ("lots", 19)])
def test_a_nice_increment_instead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  value: str, increment: int) -> None:
    """An int 0-19 is a nice increment in the normal class; anything else falls back to
    nice 19 with a warning in delivery.log."""
    monkeypatch.setenv("TRACKMUX_DELIVERY_NICE", value)
    own = os.getpriority(os.PRIO_PROCESS, 0)
    want = min(19, own + increment)
    run = _run(tmp_path)
    pid = run.delivery_pid
    assert pid is not None
    try:
        if increment:
            assert _settles(lambda: os.getpriority(os.PRIO_PROCESS, pid), want) == want
        else:  # nothing to wait for: wait for the process to be up instead
            run.log({"loss": 1.0}, step=1)
            assert _settles(lambda: run.delivery()["file"][0], 1) == 1
        assert os.sched_getscheduler(pid) == os.SCHED_OTHER
        assert os.getpriority(os.PRIO_PROCESS, pid) == want
    finally:
        run.finish(timeout=30)
    log = (run.dir / "delivery.log").read_text()
    assert ("TRACKMUX_DELIVERY_NICE='lots' is neither 'idle' nor an int 0-19" in log) == (
        value == "lots")
    # lowered once, by `nice` before its first instruction; not a second time by itself
    assert f"started at nice {want}, runs at nice {want}" in log


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Popen's process_group is 3.11+")
def test_delivery_stays_in_the_trainers_session(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Its own process group (a terminal's Ctrl-C does not reach it) but not its own
    session: Linux's autogroup scheduler shares the CPU equally between sessions, so in a
    session of its own the idle class did not keep it below the trainer (issue 43 item 17)."""
    monkeypatch.delenv("TRACKMUX_DELIVERY_NICE", raising=False)
    run = _run(tmp_path)
    pid = run.delivery_pid
    assert pid is not None
    try:
        assert os.getsid(pid) == os.getsid(0)
        assert os.getpgid(pid) == pid != os.getpgid(0)
    finally:
        run.finish(timeout=30)


@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="no autogroup scheduler")
def test_a_session_leader_lowers_its_session_too() -> None:
    """Where the process must lead a session of its own (Python 3.10: Popen has no
    process_group), it lowers the session's autogroup, the weight the kernel shares the
    CPU by between sessions."""
    code = ("from trackmux.core.delivery import priority; "
            "priority.lower(priority.wanted('idle'), 0); "
            "print(open('/proc/self/autogroup').read())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, start_new_session=True, check=True).stdout
    assert out.strip().endswith("nice 19"), out
