"""Attempts: a restarted run is the same run (same spool, same remote ids), one attempt more.

Each ``trackmux.init`` of a run records an attempt in the spool (number, start time, pid,
host, the first event seq it may write). ``rewind_to=N`` marks every event of earlier
attempts with step > N as superseded by the new attempt, in the spool, so the spool stays
the one truth: the reader that delivery, ``sync``, ``show`` and the report use skips
superseded events, and a backend that already showed some of them is told once, at the
attempt's boundary, through :meth:`trackmux.Backend.rewind`.

Config events are never superseded: they are not a per-step series, and a fresh sync must
still carry the run's hyperparameters.
"""

from __future__ import annotations

import re
import socket
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock
import orjson

from trackmux.core import settings
from trackmux.core.errors import SpoolLockedError
from trackmux.core.spool.writer import RUN_LOCK, SCHEMA, SPOOL_FILE, connect

RESUME_MODES = ("never", "allow", "must")
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class Attempt:
    """One start of a run, as recorded in its spool."""

    number: int
    started_at: float
    pid: int
    host: str
    first_seq: int
    rewind_to: int | None = None
    superseded: int = 0  # events of earlier attempts this one superseded
    first_superseded: int | None = None  # lowest seq it superseded


@dataclass(frozen=True)
class ResumePlan:
    """What ``init`` found for a run id: a new run, or an existing one to continue."""

    run_id: str | None
    run_dir: Path | None
    resuming: bool
    rewind_to: int | None
    meta: dict[str, Any]
    last_step: int = -1


# -- arguments -----------------------------------------------------------------------------
def check_run_id(run_id: object) -> str | None:
    """``run_id`` as given, if it is a safe folder name (one level, no ``..``)."""
    if run_id is None:
        return None
    if not isinstance(run_id, str):
        raise TypeError(f"run_id must be str or None, got {type(run_id).__name__}")
    if not _SAFE_ID.fullmatch(run_id) or run_id in (".", ".."):
        raise ValueError(f"run_id {run_id!r} is not a safe folder name: use 1 to 100 letters, "
                         "digits, '.', '_' or '-', starting with a letter or digit")
    return run_id


def check_args(run_id: object, resume: object, rewind_to: object) -> str | None:
    """Validate ``run_id``, ``resume`` and ``rewind_to`` before any I/O."""
    checked = check_run_id(run_id)
    if not isinstance(resume, str) or resume not in RESUME_MODES:
        raise ValueError(f"resume must be one of {RESUME_MODES}, got {resume!r}")
    if rewind_to is not None:
        if isinstance(rewind_to, bool) or not isinstance(rewind_to, int):
            raise TypeError(f"rewind_to must be an int or None, got {type(rewind_to).__name__}")
        if rewind_to < 0:
            raise ValueError(f"rewind_to must be >= 0, got {rewind_to}")
        if resume == "never":
            raise ValueError("rewind_to needs resume='allow' or 'must' (it rewinds an "
                             "existing run); got resume='never'")
    if resume == "must" and checked is None:
        raise ValueError("resume='must' needs the run_id of the run to continue")
    return checked


# -- finding the run -----------------------------------------------------------------------
def run_dir_of(root: Path, project: str, run_id: str) -> Path:
    return root / settings.safe_dirname(project) / run_id


def plan(root: Path, project: str, run_id: str | None, resume: str,
         rewind_to: int | None) -> ResumePlan:
    """Decide whether ``init`` starts a run or continues one; refuse what cannot be done."""
    if run_id is None:
        return ResumePlan(None, None, False, None, {})
    run_dir = run_dir_of(root, project, run_id)
    exists = (run_dir / SPOOL_FILE).exists()
    if not exists:
        if resume == "must":
            raise FileNotFoundError(
                f"resume='must': no run {run_id!r} in {run_dir.parent} (searched for "
                f"{run_dir / SPOOL_FILE}); check project, dir and run_id")
        return ResumePlan(run_id, run_dir, False, None, {})
    if resume == "never":
        raise FileExistsError(f"run {run_id!r} already exists in {run_dir.parent}; pass "
                              "resume='allow' or 'must' to continue it, or another run_id")
    meta, last = _read_state(run_dir)
    check_not_live(run_dir, meta)
    if rewind_to is not None and rewind_to > last:
        raise ValueError(f"rewind_to={rewind_to} is beyond the last step of run {run_id!r} "
                         f"({last}); a rewind can only go back")
    return ResumePlan(run_id, run_dir, True, rewind_to, meta, last)


def _read_state(run_dir: Path) -> tuple[dict[str, Any], int]:
    conn = connect(run_dir / SPOOL_FILE, readonly=True)
    try:
        meta = {}
        for key, value in conn.execute("SELECT key, value FROM meta"):
            try:
                meta[key] = orjson.loads(value)
            except orjson.JSONDecodeError:
                continue
        return meta, last_step(conn)
    finally:
        conn.close()


def last_step(conn: sqlite3.Connection) -> int:
    """The highest step of a live (not superseded) non-config event; -1 when none."""
    try:
        found = conn.execute(
            "SELECT max(step) FROM events e WHERE kind != 'config' AND NOT EXISTS "
            "(SELECT 1 FROM superseded s WHERE s.seq = e.seq)").fetchone()
    except sqlite3.OperationalError:  # a spool from before attempts: nothing superseded
        found = conn.execute("SELECT max(step) FROM events WHERE kind != 'config'").fetchone()
    return -1 if found is None or found[0] is None else int(found[0])


def run_last_step(run_dir: Path) -> int:
    """:func:`last_step` of the run in ``run_dir`` (-1 when it has no spool or no steps)."""
    if not (run_dir / SPOOL_FILE).exists():
        return -1
    return _read_state(run_dir)[1]


def check_not_live(run_dir: Path, meta: dict[str, Any]) -> None:
    """Refuse a run whose ``run.lock`` is held by a live process, naming that process."""
    lock = filelock.FileLock(str(run_dir / RUN_LOCK), timeout=0, thread_local=False)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise SpoolLockedError(
            f"run {run_dir.name} is live in another process (pid {meta.get('pid')} on "
            f"{meta.get('host')}; lock {run_dir / RUN_LOCK}); stop it before resuming"
        ) from None
    lock.release()


def acquire_run_lock(lock: filelock.BaseFileLock, run_dir: Path) -> None:
    """Take the run's lock without waiting; a holder is named instead of waited for."""
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        meta, _ = _read_state(run_dir)
        raise SpoolLockedError(
            f"run {run_dir.name} is live in another process (pid {meta.get('pid')} on "
            f"{meta.get('host')}; lock {run_dir / RUN_LOCK})") from None


# -- recording -----------------------------------------------------------------------------
def begin(run_dir: Path, rewind_to: int | None, *, pid: int, started_at: float | None = None
          ) -> Attempt:
    """Record a new attempt (and its rewind) in one transaction, before it logs anything.

    The caller holds the run lock and has not appended events yet, so ``max(seq) + 1`` is
    the first seq this attempt writes."""
    conn = connect(run_dir / SPOOL_FILE)
    try:
        conn.executescript(SCHEMA)
        conn.execute("BEGIN IMMEDIATE")
        try:
            last_seq = int(conn.execute("SELECT coalesce(max(seq), 0) FROM events"
                                        ).fetchone()[0])
            number = int(conn.execute("SELECT coalesce(max(number), 0) FROM attempts"
                                      ).fetchone()[0])
            host = socket.gethostname()
            if number == 0 and last_seq > 0:  # a spool from before attempts were recorded
                number = 1
                conn.execute("INSERT INTO attempts(number, started_at, pid, host, first_seq) "
                             "VALUES (1, ?, ?, ?, 1)", _legacy_first(conn))
            number += 1
            now = time.time() if started_at is None else started_at
            conn.execute("INSERT INTO attempts(number, started_at, pid, host, first_seq, "
                         "rewind_to) VALUES (?, ?, ?, ?, ?, ?)",
                         (number, now, pid, host, last_seq + 1, rewind_to))
            if rewind_to is not None:
                conn.execute(
                    "INSERT OR IGNORE INTO superseded(seq, attempt) SELECT seq, ? FROM events "
                    "WHERE step > ? AND kind != 'config'", (number, rewind_to))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return next(a for a in read(conn) if a.number == number)
    finally:
        conn.close()


def _legacy_first(conn: sqlite3.Connection) -> tuple[float, int, str]:
    meta = {k: orjson.loads(v) for k, v in conn.execute(
        "SELECT key, value FROM meta WHERE key IN ('started_at', 'pid', 'host')")}
    return (float(meta.get("started_at") or 0.0), int(meta.get("pid") or 0),
            str(meta.get("host") or ""))


def read(conn: sqlite3.Connection) -> list[Attempt]:
    """Every attempt of the spool behind ``conn``, oldest first ([] for an older spool)."""
    try:
        rows = conn.execute(
            "SELECT a.number, a.started_at, a.pid, a.host, a.first_seq, a.rewind_to, "
            "count(s.seq), min(s.seq) FROM attempts a LEFT JOIN superseded s "
            "ON s.attempt = a.number GROUP BY a.number ORDER BY a.number").fetchall()
    except sqlite3.DatabaseError:
        return []
    return [Attempt(int(n), float(t), int(p), str(h), int(f), None if r is None else int(r),
                    int(c), None if m is None else int(m))
            for n, t, p, h, f, r, c, m in rows]


def rewinds_due(attempts: Sequence[Attempt], acked: int, delivered_before: bool
                ) -> list[Attempt]:
    """Attempts a backend at cursor ``acked`` must be told about (``Backend.rewind``) before
    their first event: they rewound and superseded events, and this backend may hold some
    of them -- acknowledged (seq <= ``acked``) or written but never acknowledged (a crash
    between write and ack). ``delivered_before``: the spool has a cursor for the backend;
    a fresh destination never got a superseded event, so it is not told."""
    return [a for a in attempts if a.rewind_to is not None and a.first_seq > acked
            and a.first_superseded is not None and delivered_before]
