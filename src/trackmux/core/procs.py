"""Processes: whether one runs (one answer for the attached sink and the test servers),
and the command that starts one below the caller's priority."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def nice_command(increment: int) -> list[str]:
    """``["/usr/bin/nice", "-n", "19"]``: a prefix that starts a command ``increment`` nice
    values below the calling thread, from the command's first instruction (nothing for 0,
    off POSIX, or without the command). Raising one's own nice value is always allowed."""
    if increment <= 0 or os.name != "posix":
        return []
    path = shutil.which("nice")
    return [path, "-n", str(increment)] if path else []


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
