"""Exceptions trackmux raises to its caller. Backend failures never surface here."""

from __future__ import annotations


class TrackmuxError(Exception):
    """Base class of trackmux's own errors."""


class UnknownBackendError(TrackmuxError, ValueError):
    """A backend name that no installed plugin provides (or whose library is missing)."""


class RunFinishedError(TrackmuxError, RuntimeError):
    """A call on a run after ``finish()``."""


class SpoolLockedError(TrackmuxError, RuntimeError):
    """Another process is already delivering this run to this backend."""


class EventRejected(TrackmuxError, ValueError):
    """Raised by a backend for an event it can never accept (as opposed to being down).

    Core then delivers that batch one event at a time; an event rejected on its own is
    quarantined: recorded in the spool, counted and reported, and later events flow.
    ``keys``: the backend delivered the event except these keys (per-key quarantine);
    empty means nothing of the event was delivered.
    """

    def __init__(self, message: str, *, keys: tuple[str, ...] | list[str] = ()) -> None:
        super().__init__(message)
        self.keys: tuple[str, ...] = tuple(keys)


class PermanentBackendError(TrackmuxError):
    """Raised by a backend for a failure that retrying cannot fix (a refused project name,
    bad credentials, an unknown option).

    Core does not retry it: the backend's delivery stops in the state "failed", the cause
    is reported once naming the backend, ``finish()`` does not wait for it and
    ``trackmux sync`` exits non-zero. Its events stay in the spool for a later sync.
    """


class SpoolUnsafeError(TrackmuxError, ValueError):
    """A run's ``spool.db`` is not a regular file of its own (a symlink, a FIFO, a device):
    reading or acknowledging into it could block or write outside the run."""


class SpoolUnreadableError(TrackmuxError, ValueError):
    """A run's ``spool.db`` cannot be read as a spool at all (not an SQLite database: garbage
    or truncated; or no run recorded in it). A reader answers with this instead of an empty
    run, which would look healthy (no findings, no samples, no differences)."""
