"""Why a backend's events are still pending, in one line, for ``trackmux runs`` and
``show``: the last problem its delivery process reported in the run's ``delivery.log``
(bad credentials, a refused connection), unless a later line says it recovered.

The delivery process writes that log in the run directory (its stdout and stderr, never
the trainer's); the reporter's lines have a fixed shape (core/delivery/reporting.py):
``backend 'NAME' failed permanently and is not retried: CAUSE. Its events stay ...`` and
``backend 'NAME': KIND: CAUSE (reported once; delivery continues)``, a message that spans
lines continuing on indented lines. A new delivery process (a resumed run) starts
afresh. Only the log's tail is read.
"""

from __future__ import annotations

import re
from pathlib import Path

LOG = "delivery.log"
TAIL_BYTES = 256 * 1024
WIDTH = 220

_FAILED = re.compile(r"backend '(?P<name>[^']+)' failed permanently and is not retried: "
                     r"(?P<cause>.*?)\. Its events stay in the spool")
_PROBLEM = re.compile(r"backend '(?P<name>[^']+)': (?P<kind>[a-z_]+): (?P<cause>.*?) "
                      r"\(reported once; delivery continues\)")
_RECOVERED = re.compile(r"backend '(?P<name>[^']+)': (opened after earlier failures|"
                        r"delivering again|recording progress again)")
_STARTED = re.compile(r"trackmux delivery: run \S+, backends ")  # a new delivery process


def last_problems(run_dir: Path) -> dict[str, str]:
    """Per backend, its last unresolved delivery problem as one line ("failed: ..." for a
    permanent failure, else "KIND: ..."); empty when the run has no delivery log."""
    try:
        with (run_dir / LOG).open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return {}
    entries: list[str] = []
    for line in text.splitlines():
        if line[:1].isspace() and entries:  # libpq's hint line, a traceback's body
            entries[-1] += " " + line.strip()
        else:
            entries.append(line)
    out: dict[str, str] = {}
    for entry in entries:
        if _STARTED.search(entry):  # what an earlier delivery process said is history
            out.clear()
            continue
        found = _FAILED.search(entry)
        if found:
            out[found["name"]] = "failed: " + found["cause"]
            continue
        found = _PROBLEM.search(entry)
        if found:
            if not out.get(found["name"], "").startswith("failed: "):
                out[found["name"]] = f"{found['kind']}: {found['cause']}"
            continue
        found = _RECOVERED.search(entry)
        if found:
            out.pop(found["name"], None)
    return {name: _cut(" ".join(cause.split())) for name, cause in out.items()}


def _cut(text: str) -> str:
    return text if len(text) <= WIDTH else text[:WIDTH - 3] + "..."
