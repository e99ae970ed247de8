"""The last lines a trial's program wrote to stderr, kept for its failure reason.

A trial that exits with code 2 says nothing by its code alone; the traceback or usage
error it printed does. The agent reads the program's stderr through a pipe on a named
daemon thread, passes every byte on to its own stderr as it comes (the person watching
the agent sees what they saw before), and keeps the last ``LINES`` lines (each cut to
``WIDTH`` characters) for ``sweep show`` and the UI.
"""

from __future__ import annotations

import collections
import contextlib
import sys
import threading
from typing import IO

LINES = 10
WIDTH = 300


class StderrTail:
    """Forwards ``pipe`` to ``sink`` (default: this process's stderr) and keeps its tail."""

    def __init__(self, pipe: IO[bytes], sink: IO[bytes] | None = None) -> None:
        self._pipe = pipe
        self._sink = sink if sink is not None else getattr(sys.stderr, "buffer", None)
        self._lines: collections.deque[bytes] = collections.deque(maxlen=LINES)
        self._thread = threading.Thread(target=self._pump, name="trackmux-trial-stderr",
                                        daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in iter(self._pipe.readline, b""):
                self._lines.append(line[-4 * WIDTH:])
                if self._sink is not None:
                    with contextlib.suppress(OSError, ValueError):
                        self._sink.write(line)
                        self._sink.flush()
        with contextlib.suppress(OSError):
            self._pipe.close()

    def lines(self, wait: float = 2.0) -> list[str]:
        """The kept lines (blank ones left out), after waiting up to ``wait`` seconds for
        the pipe to close (a child the program left running may hold it open)."""
        self._thread.join(wait)
        out = []
        for raw in list(self._lines):
            text = raw.decode("utf-8", "replace").rstrip()
            if text.strip():
                out.append(text if len(text) <= WIDTH else text[:WIDTH - 3] + "...")
        return out
