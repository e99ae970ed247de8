"""Child processes that a test stops with Ctrl-C (SIGINT)."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """A ``preexec_fn``: the child gets Ctrl-C's default, as a program in a terminal has
    it. A suite started in the background (``cmd &`` or ``nohup cmd &`` without job
    control) ignores SIGINT, an ignored SIGINT is inherited through every exec (tox,
    pytest, the child), and Python then leaves it ignored: the child would never see the
    test's Ctrl-C and the test would wait out its bound."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
