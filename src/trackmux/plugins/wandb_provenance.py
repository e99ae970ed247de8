"""wandb's own git and program fields, filled from trackmux's provenance (issue 25).

wandb records the code state in two places of its run files, both written once at
``wandb.init`` from its settings: the run record (``git.remote_url``, ``git.commit``; the
run page's commit and repository) and the environment record that becomes
``wandb-metadata.json`` (``program``, ``code_path``, ``args``, ``git``, ``host``,
``executable``). The delivering backend turns wandb's own git probe off (it would look at
the delivery process's folder, not the trainer's), so these fields come from the
``ProvenanceEvent`` instead, and that event is written by the trainer's provenance thread
a few hundred milliseconds after ``init()``: :func:`wait` lets the backend's ``open``
wait for it (the run's spool meta says whether provenance is on for the current attempt;
at most ``provenance_wait`` seconds, default 10), before ``wandb.init``.

The environment record is turned on (``x_disable_meta=False``) only in a process other
than the trainer (the delivery process, ``trackmux sync``): wandb takes ``args`` from
``sys.argv`` of the process that calls ``wandb.init``, which there is trackmux's own, so it
is set to the trainer's redacted argv for the duration of the call. In the trainer's own
process (``delivery="thread"``) sys.argv is the user's and unredacted: wandb's environment
record stays off and only the run record's git fields are filled.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trackmux.core.events import ProvenanceEvent

log = logging.getLogger("trackmux")
#: how long ``open`` waits for a provenance event that is on its way (seconds)
DEFAULT_WAIT = 10.0
_POLL = 0.05
_argv_lock = threading.Lock()


def latest(run_dir: Path) -> tuple[ProvenanceEvent | None, dict[str, Any]]:
    """The newest provenance event of the run and the run's spool meta (none of either
    when the run folder holds no readable spool)."""
    from trackmux.core.spool.reader import SpoolReader

    if not (run_dir / "spool.db").is_file():
        return None, {}
    try:
        reader = SpoolReader(run_dir)
    except Exception as exc:  # the delivery itself reports a damaged spool
        log.debug("trackmux: wandb: provenance not read (%s)", exc)
        return None, {}
    try:
        meta = reader.meta()
        found = [e for e in reader.events_of_kind("provenance")
                 if isinstance(e, ProvenanceEvent)]
    finally:
        reader.close()
    return (found[-1] if found else None), meta


def _expected(meta: dict[str, Any], event: ProvenanceEvent | None) -> bool:
    """True while the current attempt records provenance and its event is not there yet."""
    if not meta.get("provenance") or meta.get("state", "running") != "running":
        return False
    attempt = meta.get("attempt", 1)
    return event is None or event.data.get("attempt", 1) != attempt


def wait(run_dir: Path, timeout: float) -> tuple[ProvenanceEvent | None, dict[str, Any]]:
    """The newest provenance event, waiting up to ``timeout`` s for the current attempt's
    when the spool says it is being collected (a run that ended no longer waits)."""
    deadline = time.monotonic() + max(0.0, timeout)
    event, meta = latest(run_dir)
    # the run's first commit (its meta) may trail a delivery thread by milliseconds
    while ((not meta and (run_dir / "spool.db").is_file())
           or _expected(meta, event)) and time.monotonic() < deadline:
        time.sleep(_POLL)
        event, meta = latest(run_dir)
    if _expected(meta, event):
        log.info("trackmux: wandb: provenance not recorded after %.1f s; wandb's own git "
                 "fields stay empty for this delivery (the config and code record still "
                 "get it)", timeout)
    return event, meta


def settings(event: ProvenanceEvent, in_trainer: bool) -> dict[str, Any]:
    """``wandb.Settings`` fields from one provenance record (credentials already removed
    at collection; the remote is cleaned again here)."""
    from trackmux.provenance.git import clean_remote

    data = event.data
    git = data.get("git") or {}
    command = data.get("command") or {}
    out: dict[str, Any] = {}
    if git.get("available") and git.get("commit"):
        out["git_commit"] = str(git["commit"])
    if git.get("available") and git.get("remote"):
        out["git_remote_url"] = clean_remote(str(git["remote"]))
    if git.get("available") and git.get("root"):
        out["git_root"] = str(git["root"])
    entry = command.get("entry")
    if entry:
        entry = str(entry)
        out["program"] = entry
        if not entry.startswith("-m "):
            out["program_abspath"] = entry
            root = str(git.get("root") or "") if git.get("available") else ""
            inside = bool(root) and os.path.commonpath([entry, root]) == root
            out["program_relpath"] = (os.path.relpath(entry, root) if inside
                                      else os.path.basename(entry))
    if command.get("executable"):
        out["x_executable"] = str(command["executable"])
    hostname = (data.get("host") or {}).get("hostname")
    if hostname:
        out["host"] = str(hostname)
    if not in_trainer:
        out["x_disable_meta"] = False
    return out


@contextlib.contextmanager
def argv_as(argv: list[str] | None) -> Iterator[None]:
    """``sys.argv`` set to the trainer's (redacted) argv while wandb reads it; a no-op for
    None. Only used outside the trainer's process (module docstring)."""
    if argv is None:
        yield
        return
    with _argv_lock:
        saved = sys.argv
        sys.argv = [str(a) for a in argv] or [""]
        try:
            yield
        finally:
            sys.argv = saved
