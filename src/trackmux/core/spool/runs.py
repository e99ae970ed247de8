"""Finding runs on disk and telling their state, for the CLI and reports.

A run is "running" while its process holds ``run.lock``; a run whose meta still says
running but whose lock is free was killed: "crashed". The other states: "finished",
"failed" (a non-zero exit, SIGTERM), "pruned" (a sweep agent stopped it on purpose;
``pruned_reason`` says why, see docs/sweeps.md) and "stopped" (the doctor's ``stop_on``
asked the loop to stop and it ended cleanly; ``stop_reason`` is the finding, ``stops`` the
history across attempts, see docs/doctor.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock

from trackmux.core import settings
from trackmux.core.errors import SpoolUnreadableError
from trackmux.core.spool.attempts import Attempt
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.writer import RUN_LOCK, SPOOL_FILE


@dataclass
class RunSummary:
    run_dir: Path
    meta: dict[str, Any]
    state: str
    events: int
    last_seq: int
    delivered: dict[str, int] = field(default_factory=dict)
    remote_ids: dict[str, str | None] = field(default_factory=dict)
    damage: list[str] = field(default_factory=list)
    #: per backend, how many events (or keys of events) it refused for good
    quarantined: dict[str, int] = field(default_factory=dict)
    attempts: list[Attempt] = field(default_factory=list)
    superseded: int = 0

    @property
    def pending(self) -> dict[str, int]:
        return {name: max(0, self.last_seq - acked) for name, acked in self.delivered.items()}

    @property
    def backends(self) -> list[str]:
        """Backends the run was started with, then any a later sync delivered to."""
        names = list(self.meta.get("backends") or [])
        return names + [n for n in self.delivered if n not in names]


def lock_is_held(run_dir: Path) -> bool:
    path = run_dir / RUN_LOCK
    if not path.exists():
        return False
    lock = filelock.FileLock(str(path), timeout=0, thread_local=False)
    try:
        lock.acquire()
    except filelock.Timeout:
        return True
    lock.release()
    return False


def run_state(run_dir: Path, meta: dict[str, Any]) -> str:
    state = str(meta.get("state") or "crashed")
    if meta.get("store"):  # a replica of a team store run: its trainer is on another machine
        return state
    if state == "running" and not lock_is_held(run_dir):
        return "crashed"
    return state


def summarize(run_dir: Path) -> RunSummary:
    reader = SpoolReader(run_dir)
    try:
        meta = reader.meta()
        last = reader.last_seq()
        cursors = reader.cursors()
        quarantined: dict[str, int] = {}
        for entry in reader.quarantined():
            quarantined[entry.backend] = quarantined.get(entry.backend, 0) + 1
        return RunSummary(run_dir, meta, run_state(run_dir, meta), reader.count(), last,
                          {n: c.acked_seq for n, c in cursors.items()},
                          {n: c.remote_id for n, c in cursors.items()},
                          list(reader.damage.errors), quarantined, reader.attempts(),
                          reader.superseded_count())
    finally:
        reader.close()


def unreadable(reader: SpoolReader) -> str | None:
    """Why ``reader``'s spool cannot be read at all, or None. A spool with its run's meta
    or any readable event is readable: damage inside it is recorded by the reader (its
    ``damage``) and reported by each command as damage, not as this."""
    if reader.meta().get("run_id") or reader.read(0, limit=1).events:
        return None
    if reader.damage:
        return (f"the spool {reader.path} cannot be read ({reader.damage.errors[0]}): the "
                "file is damaged or truncated, and no run or event could be read from it")
    return (f"the spool {reader.path} holds no run (no run id, no event): an empty or "
            "foreign file, not a trackmux spool")


def check_readable(run_dir: Path) -> Path:
    """``run_dir`` if its spool can be read; else :class:`SpoolUnreadableError` saying why.
    Every reading command calls this first: an unreadable spool read as an empty run
    looks healthy (no findings, no samples, no differences)."""
    reader = SpoolReader(run_dir)
    try:
        reason = unreadable(reader)
    finally:
        reader.close()
    if reason:
        raise SpoolUnreadableError(reason)
    return run_dir


def pruned_words(meta: dict[str, Any]) -> str:
    """Why a pruned run was stopped and by whom (``trackmux runs`` and ``show``), or ""."""
    if meta.get("state") != "pruned":
        return ""
    return f"pruned by {meta.get('pruned_by') or 'a sweep agent'}: {meta.get('pruned_reason')}"


def stop_words(meta: dict[str, Any]) -> list[str]:
    """The doctor's stops of the run (issue 45), one line each for ``trackmux runs`` and
    ``show``: why a ``stopped`` run stopped, and the stops of earlier attempts a resumed
    run keeps in its history. Empty for a run never asked to stop."""
    stops = [s for s in meta.get("stops") or () if isinstance(s, dict)]
    lines = []
    for stop in stops:
        finding = stop.get("finding")
        if not isinstance(finding, dict):
            finding = {}
        what = (f"{finding.get('severity', '')} {finding.get('rule', '?')} @ step "
                f"{finding.get('step', '?')}: {finding.get('message', '')}")
        lines.append(f"stopped by the doctor (attempt {stop.get('attempt', '?')}, asked at "
                     f"step {stop.get('step', '?')}): {what}")
    if meta.get("state") == "stopped" and not lines and meta.get("stop_reason"):
        lines.append(f"stopped by the doctor: {meta.get('stop_reason')}")
    return lines


def stop_reason_line(run_dir: Path) -> str:
    """The finding that stopped the run as one line (``critical reward_collapse @ step 103:
    ...``), for backends closing a ``stopped`` run; "" when there is none."""
    try:
        reader = SpoolReader(run_dir)
        try:
            reason = reader.meta().get("stop_reason")
        finally:
            reader.close()
    except Exception:  # a line less on a backend, never a failed close
        return ""
    if not isinstance(reason, dict):
        return ""
    return (f"{reason.get('severity', '')} {reason.get('rule', '?')} @ step "
            f"{reason.get('step', '?')}: {reason.get('message', '')}")


def find_runs(root: Path) -> list[Path]:
    """Run directories under ``root`` (which may itself be a project or run directory)."""
    if (root / SPOOL_FILE).exists():
        return [root]
    found = [p.parent for p in root.glob(f"*/{SPOOL_FILE}")]
    found += [p.parent for p in root.glob(f"*/*/{SPOOL_FILE}")]
    return sorted(set(found), key=lambda p: p.name)


def _under(run: Path, base: Path) -> str:
    """The run's folder as ``PROJECT/RUN_ID`` (or ``RUN_ID``) relative to the root."""
    try:
        return run.relative_to(base).as_posix()
    except ValueError:
        return run.name


def describe_attempt(attempt: Attempt) -> str:
    """One line per attempt for ``trackmux runs`` and ``trackmux show``."""
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(attempt.started_at))
    line = (f"attempt {attempt.number}: started {started}, pid {attempt.pid} on "
            f"{attempt.host}, events from {attempt.first_seq}")
    if attempt.rewind_to is not None:
        line += (f", rewound to step {attempt.rewind_to} ({attempt.superseded} earlier "
                 "events superseded)")
    return line


#: Where else a run argument may name a run, asked first, in order: each returns the run's
#: local folder or None. ``--store`` (trackmux/readers/) adds the selected store's lookup;
#: core names no reader.
RUN_RESOLVERS: list[Callable[[str], Path | None]] = []


def resolve_run(arg: str, root: str | os.PathLike[str] | None = None) -> Path:
    """A run given as a directory, or as a run id, ``PROJECT/RUN_ID`` or the run's name
    (``init(name=...)``), else a unique id prefix, under the root, whose spool can be read
    (:func:`check_readable`); with a store selected (``--store``) the run in that store
    (``RUN_RESOLVERS``). A name several runs share is an error listing them."""
    for resolver in RUN_RESOLVERS:
        found = resolver(arg)
        if found is not None:
            return found
    return _resolve_on_disk(arg, root)


def _resolve_on_disk(arg: str, root: str | os.PathLike[str] | None = None) -> Path:
    path = Path(arg).expanduser()
    if (path / SPOOL_FILE).exists():
        return check_readable(path.absolute())
    base = settings.spool_root(root)
    # a run id (or its prefix), or PROJECT/RUN_ID (or a prefix of it) under the root
    matches = [p for p in find_runs(base)
               if p.name.startswith(arg) or _under(p, base).startswith(arg)]
    exact = [p for p in matches if arg in (p.name, _under(p, base))]
    if not exact:
        named = run_named(arg, base)
        exact = [named] if named is not None else []
    matches = exact or matches
    if len(matches) == 1:
        return check_readable(matches[0])
    if not matches:
        raise FileNotFoundError(f"no run {arg!r}: not a run directory, and no run id or "
                                f"name under {base}")
    raise FileNotFoundError(f"run {arg!r} is ambiguous under {base}: "
                            + ", ".join(p.name for p in matches))


def run_named(name: str, base: Path) -> Path | None:
    """The run under ``base`` named ``name`` (``init(name=...)``), None if none is;
    FileNotFoundError listing them (id and start) when several are."""
    named = _named(base, name)
    if len(named) > 1:
        raise FileNotFoundError(
            f"run {name!r} is ambiguous under {base}: {len(named)} runs are named so; "
            "pass one's id: " + "; ".join(_candidate(p, base, meta) for p, meta in named))
    return named[0][0] if named else None


def _named(base: Path, name: str) -> list[tuple[Path, dict[str, Any]]]:
    """The runs under ``base`` whose meta names them ``name``, with that meta (read-only:
    a run being written or a damaged spool is read as it is, or left out)."""
    import sqlite3

    import orjson

    from trackmux.core.spool.writer import connect

    out = []
    for run_dir in find_runs(base):
        try:
            conn = connect(run_dir / SPOOL_FILE, readonly=True)
            try:
                rows = conn.execute("SELECT key, value FROM meta WHERE key IN "
                                    "('name', 'project', 'started_at')").fetchall()
            finally:
                conn.close()
            meta = {str(key): orjson.loads(value) for key, value in rows}
        except (sqlite3.Error, orjson.JSONDecodeError, UnicodeDecodeError):
            continue
        if meta.get("name") == name:
            out.append((run_dir, meta))
    return sorted(out, key=lambda item: -float(item[1].get("started_at") or 0))


def _candidate(run_dir: Path, base: Path, meta: dict[str, Any]) -> str:
    started = meta.get("started_at")
    when = (time.strftime("%Y-%m-%d %H:%M", time.localtime(float(started)))
            if isinstance(started, (int, float)) else "start unknown")
    return f"{_under(run_dir, base)} ({when})"
