"""Whether a process runs: one answer for the attached sink and the test servers."""

from __future__ import annotations

import os
from pathlib import Path


def process_alive(pid: int) -> bool:
    """True while process ``pid`` exists on this host and is not a zombie (killed and
    not yet reaped counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc: the kernel's answer stands
        return True
    return state[state.rfind(")") + 2:].split()[0] != "Z"
