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

    Core then delivers that batch one event at a time and skips, reporting once, the
    events that are rejected again. Any other exception is treated as transient and
    retried with backoff.
    """


class SpoolUnsafeError(TrackmuxError, ValueError):
    """A run's ``spool.db`` is not a regular file of its own (a symlink, a FIFO, a device):
    reading or acknowledging into it could block or write outside the run."""
