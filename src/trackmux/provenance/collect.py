"""What provenance records, section by section, and which part runs where.

At ``init()``, in the trainer's thread, only a snapshot (snapshot.py: copies of argv, the
working directory, the entry script and the environment variable names; microseconds). On
the provenance thread (:func:`cheap`): ``command`` (argv, redacted; executable; working
directory; the entry script), ``python``, ``host`` (name, OS, machine, CPU count) and
``env`` (the NAMES of the variables trainers read, never their values). In a child
process (``probe.py``, started and awaited by that thread, so that work never holds the
trainer's GIL): ``git`` (git calls with timeouts),
``packages`` (versions from ``importlib.metadata``, no ``pip freeze``), the CPU model
(``/proc/cpuinfo``) and ``gpu`` (NVML through ``pynvml`` when installed: models, memory,
driver and CUDA driver version).

Sections, as stored in ``ProvenanceEvent.data``:

- ``command``: ``argv`` (redacted, nested JSON and Hydra values too: core/values/argv.py),
  ``executable``, ``cwd``, ``entry`` (absolute path of the script, or ``-m module``)
- ``git``: ``available``, ``root``, ``commit``, ``branch``, ``detached``, ``dirty``,
  ``diff_redacted`` (the probe redacted the diff), ``diff_left_out`` (secret files),
  ``remote`` (credentials removed), ``untracked`` (up to 200) and ``untracked_count``,
  ``diff_bytes``, ``diff_sha256``, ``diff_truncated``; ``error`` when git could not say
- ``python``: ``version``, ``implementation``
- ``packages``: name -> version, for the ones in ``KEY_PACKAGES`` that are installed
- ``host``: ``hostname``, ``os``, ``platform``, ``machine``, ``cpu``, ``cpu_count``
- ``gpu``: ``source`` ("nvml" or "none"), ``driver``, ``cuda``, ``devices`` (name, memory)
- ``env``: sorted variable names matching ``ENV_PREFIXES``
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path
from typing import Any

from trackmux.core.values.argv import redact_argv
from trackmux.provenance.snapshot import (  # noqa: F401 - part of this module's words
    ENV_NAMES,
    ENV_PREFIXES,
    entry_script,
    env_names,
    snapshot,
)


def cheap(taken: dict[str, Any] | None = None) -> dict[str, Any]:
    """The in-process sections, from a snapshot (snapshot.py; taken now when not given):
    the redacted command, Python, host and the environment variable names."""
    taken = snapshot() if taken is None else taken
    uname = os.uname()
    return {
        "schema": 1,
        "command": {"argv": redact_argv(taken["argv"]), "executable": sys.executable,
                    "cwd": taken["cwd"], "entry": taken["entry"]},
        "python": {"version": platform.python_version(),
                   "implementation": platform.python_implementation()},
        "host": {"hostname": socket.gethostname(), "os": uname.sysname,
                 "platform": f"{uname.sysname}-{uname.release}-{uname.machine}",
                 "machine": uname.machine, "cpu_count": os.cpu_count()},
        "env": taken["env"],
    }


def script_dir(data: dict[str, Any]) -> Path:
    """Where to look for the git tree: the entry script's folder, else the working dir."""
    entry = data.get("command", {}).get("entry")
    if entry and not str(entry).startswith("-m ") and Path(entry).exists():
        return Path(entry).parent
    return Path(data.get("command", {}).get("cwd") or os.getcwd())
