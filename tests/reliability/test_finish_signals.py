"""How a run ends under pressure: SIGTERM, a signal handler that re-enters finish(), a
log() racing finish() from another thread, and finish(timeout≈0) right after a burst.

Each case checks the spool (what landed) against what the caller was told (what
returned, what raised)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
from _reliability import spawn

import trackmux
from trackmux.core.spool.reader import SpoolReader


def _spool(run_dir: Path) -> tuple[dict[str, object], list[int]]:
    reader = SpoolReader(run_dir)
    try:
        return reader.meta(), [e.step for e in reader.iter_events() if e.kind == "metrics"]
    finally:
        reader.close()


LOG_UNTIL_SIGTERM = r"""
import signal, sys, time, trackmux
if sys.argv[2] == "exit-handler":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
run = trackmux.init(project="sig", backends=[], dir=sys.argv[1])
sys.stdout.write(f"RUN {run.dir}\n"); sys.stdout.flush()
step = 0
while True:
    run.log({"x": float(step)}, step=step)
    sys.stdout.write(f"{step}\n"); sys.stdout.flush()
    step += 1
    time.sleep(0.002)
"""


@pytest.mark.parametrize("handler", ["default", "exit-handler"])
def test_sigterm_keeps_every_returned_log_and_marks_the_run_failed(
        tmp_path: Path, handler: str) -> None:
    child = spawn(LOG_UNTIL_SIGTERM, str(tmp_path), handler)
    assert child.stdout is not None
    first = child.stdout.readline().decode()
    assert first.startswith("RUN "), first
    run_dir = Path(first[4:].strip())
    # 60 steps returned before the signal (a sleep gave a loaded machine too few)
    before = [child.stdout.readline() for _ in range(60)]
    child.send_signal(signal.SIGTERM)
    child.wait(30)
    out, err = child.stdout.read(), child.stderr.read()  # type: ignore[union-attr]
    returned = [int(line) for line in b"".join([*before, out]).decode().split()]
    assert len(returned) > 50
    if handler == "default":  # it still dies by SIGTERM, as it would without trackmux
        assert child.returncode == -signal.SIGTERM, err.decode()
    meta, steps = _spool(run_dir)
    # no durability window: what returned before the signal is committed, in order
    assert steps[:len(returned)] == returned
    assert meta["state"] == "failed"
    assert meta["exit_code"] == 128 + signal.SIGTERM


REENTER_FINISH = r"""
import signal, sys, time, trackmux
from trackmux.core.lifecycle.run import on_run_finish
from trackmux.testing import faults
faults.register_fault_backends("sig-")
run = trackmux.init(project="sig", backends=["sig-hanging"], dir=sys.argv[1],
                    delivery="thread")
def on_term(*_):
    summary = run.finish(timeout=1)        # re-enters the finish() below
    sys.stdout.write(f"HANDLER {summary.status}\n"); sys.stdout.flush()
    sys.exit(1)
signal.signal(signal.SIGTERM, on_term)
run.log({"x": 1.0}, step=0)
def inside(run, deadline):                  # said from inside finish(), not before it
    sys.stdout.write("FINISHING\n"); sys.stdout.flush()
on_run_finish(inside)
run.finish(timeout=600)                     # the hanging backend holds it to the deadline
"""


def test_a_sigterm_handler_calling_finish_inside_finish_does_not_hang(tmp_path: Path) -> None:
    child = spawn(REENTER_FINISH, str(tmp_path), TRACKMUX_FINISH_TIMEOUT="2")
    assert child.stdout is not None
    assert child.stdout.readline().decode().strip() == "FINISHING"  # inside finish()
    child.send_signal(signal.SIGTERM)
    # before: a deadlock, the process never exited. The outer finish() waits 600 s for its
    # hung backend: an exit within 120 s (the handler's finish has 1 s) means the handler
    # did not wait on it; 120 s is a bound only a hang reaches, not a speed claim.
    child.wait(120)
    out, err = child.stdout.read(), child.stderr.read()  # type: ignore[union-attr]
    assert "HANDLER finishing" in out.decode(), err.decode()
    assert child.returncode == 1


def _log_until_finished(run: trackmux.Run, go: threading.Event, returned: list[int],
                        errors: list[BaseException]) -> None:
    go.wait()
    for step in range(100_000):
        try:
            run.log({"x": float(step)}, step=step)
        except trackmux.RunFinishedError:
            return
        except BaseException as exc:  # anything else is a failure of the contract
            errors.append(exc)
            return
        returned.append(step)


def test_log_racing_finish_either_lands_or_raises(tmp_path: Path) -> None:
    for attempt in range(5):
        run = trackmux.init(project="race", backends=[], dir=tmp_path / str(attempt))
        assert isinstance(run, trackmux.Run)
        returned: list[int] = []
        errors: list[BaseException] = []
        go = threading.Event()
        thread = threading.Thread(target=_log_until_finished,
                                  args=(run, go, returned, errors))
        thread.start()
        go.set()
        time.sleep(0.02 * (attempt + 1))
        summary = run.finish(timeout=10)
        thread.join(10)
        assert not errors
        _, steps = _spool(run.dir)
        assert steps == returned, f"attempt {attempt}: returned calls missing from the spool"
        assert summary.events == len(steps)


def test_finish_with_no_time_right_after_a_burst_reports_what_is_pending(
        tmp_path: Path) -> None:
    run = trackmux.init(project="burst", backends=["file"], dir=tmp_path,
                        backend_options={"file": {"path": str(tmp_path / "out.jsonl")}})
    assert isinstance(run, trackmux.Run)
    for step in range(20_000):
        run.log({"x": float(step)}, step=step)
    summary = run.finish(timeout=0)
    _, steps = _spool(run.dir)
    assert steps == list(range(20_000))  # committed by close, not lost
    assert summary.events == 20_000
    delivered = summary.delivered["file"]
    assert summary.pending == ({} if delivered == 20_000 else {"file": 20_000 - delivered})
    assert summary.complete == (delivered == 20_000)
