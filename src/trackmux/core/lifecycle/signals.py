"""SIGTERM: the way schedulers (SLURM, Kubernetes, Ray) stop a trainer.

Without help, SIGTERM's default action kills the process between two spool commits: the
last ``log()`` calls that returned are lost, and the run stays "running" until someone
notices. And a handler of the user's that calls ``sys.exit()`` ends through atexit,
where nothing says the run was stopped rather than finished.

So the first ``init()`` in the main thread wraps the SIGTERM disposition once:

- default action: commit what is queued (at most ``FLUSH_SECONDS``), mark the runs
  ``failed`` with exit code 143, then die by SIGTERM as before (same exit status);
- a handler of the user's: note the signal (runs finished afterwards are marked
  ``failed``), then call it;
- ignored: left alone.

``TRACKMUX_HANDLE_SIGTERM=0`` turns this off. A handler set after ``init()`` replaces ours
and is not wrapped.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

FLUSH_SECONDS = 2.0
SIGTERM_EXIT_CODE = 128 + signal.SIGTERM

_installed = False
received = False  # a SIGTERM arrived; finish() at exit marks the run failed


def install(live_runs: Callable[[], list[Any]]) -> None:
    """Wrap SIGTERM once per process (main thread only; signals cannot be set elsewhere)."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    if os.environ.get("TRACKMUX_HANDLE_SIGTERM", "1").strip().lower() in ("0", "false", "no"):
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_IGN or previous is None:
        return
    _installed = True

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        global received
        received = True
        if callable(previous):
            previous(signum, frame)
            return
        for run in live_runs():
            run._terminated()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)
