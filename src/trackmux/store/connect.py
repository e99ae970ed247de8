"""Connections to the team store, and the errors worth one clear line.

Bad credentials, a missing database or role, or a database that refuses the role are
``StoreConfigError``: retrying cannot fix them, so the backend reports them once at start.
A server that is down, restarting or unreachable is an ordinary ``OperationalError``:
delivery retries with backoff while the spool keeps every event.

For the commands (``runs --store``, ``goals``, ``show --store``, ``sync``), :func:`reach`
turns every way of not getting a connection (a malformed DSN, a wrong database or
password, a refused or silent server, psycopg missing) into one line and the one exit
status :data:`EXIT_UNREACHABLE`.
"""

from __future__ import annotations

import re
from typing import Any

from trackmux.core import settings

CONNECT_TIMEOUT = 5  # seconds: a slow or unreachable server must not hang delivery
# a server whose machine vanished (no RST ever comes) is found dead within about a minute
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10,
              "keepalives_count": 3}
# libpq's messages (and SQLSTATE classes 28 and 3D) for what a retry cannot fix
_PERMANENT = re.compile(r"password authentication failed|authentication failed|"
                        r"does not exist|no pg_hba\.conf entry|permission denied|"
                        r"role .* is not permitted to log in|invalid dsn|"
                        r"missing \"=\"|invalid connection option|invalid URI|"
                        r"no password supplied|invalid port|invalid integer value",
                        re.IGNORECASE)
#: where a connection goes without a DSN (the option unset, or dropped as a secret)
NO_DSN = "the libpq defaults (no DSN given: PG* variables, else the local socket)"
#: the exit status of a command that cannot reach (or use) the store it was given
EXIT_UNREACHABLE = 3
_STORE_SCHEMES = ("postgresql://", "postgres://")
_DSN_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@|(password\s*=\s*)\S+", re.IGNORECASE)


class StoreUnavailable(RuntimeError):
    """psycopg is not installed."""


class StoreConfigError(RuntimeError):
    """A DSN, role or database that retrying cannot fix (the message says which)."""


class StoreUnreachable(RuntimeError):
    """Nothing answered at the store's address (refused, timed out, unknown host), or
    the store could not be used for another reason; one line saying which."""


def malformed(uri: str) -> str | None:
    """Why ``uri`` is a mistyped store URL (``postgresql//u@h/db``, ``postgres:/db``,
    ``postgresql:u@h``), or None. Such a value names no folder anyone meant: read as one,
    it would list "no runs" and succeed."""
    text = uri.strip()
    if text.lower().startswith(_STORE_SCHEMES):
        return None
    if re.match(r"(?i)postgres(ql)?(\+\w+)?(:|//)", text):  # not postgres/runs, a folder
        return (f"malformed store URL {hide_password(text)!r}: a team store is "
                "postgresql://USER@HOST[:PORT]/DATABASE (is the ':' or a '/' missing?)")
    return None


def one_line(text: str) -> str:
    """libpq's message (``connection failed: connection to server at ... failed: FATAL:
    ...\n\tIs the server running ...``) as one line: its last cause, with the hint."""
    lines = [part.strip() for part in str(text).strip().splitlines() if part.strip()]
    if not lines:
        return "unknown error"
    head = re.sub(r"^(connection failed: )?connection to server (at|on) .*? failed: "
                  r"(FATAL: +)?", "", lines[0])
    head = re.sub(r"\s+", " ", head)
    return head + (f" ({' '.join(lines[1:])})" if len(lines) > 1 else "")


def reach(dsn: str, **kwargs: Any) -> Any:
    """:func:`connect` for a command: any failure is :class:`StoreUnreachable` with one
    line naming the store (never its password) and the cause."""
    where = hide_password(dsn) or NO_DSN
    bad = malformed(dsn)
    if bad:
        raise StoreUnreachable(bad)
    try:
        return connect(dsn, **kwargs)
    except (StoreConfigError, StoreUnavailable) as exc:
        raise StoreUnreachable(one_line(str(exc))) from None
    except Exception as exc:  # down, refused, timed out, unknown host
        raise StoreUnreachable(f"cannot reach the store at {where}: "
                               f"{one_line(str(exc))}") from None


def psycopg() -> Any:
    try:
        import psycopg as module
    except ImportError:
        raise StoreUnavailable("the team store needs psycopg 3, which is not installed: "
                               "pip install 'psycopg[binary]' (or, in the trackmux "
                               "checkout, pip install -e '.[postgres]')") from None
    return module


def hide_password(dsn: str) -> str:
    """The DSN without its password, for messages."""
    return _DSN_PASSWORD.sub(lambda m: f"{m.group(1)}***@" if m.group(1) else
                             f"{m.group(2)}***", dsn)


def connect(dsn: str | None = None, *, autocommit: bool = False,
            application: str = "trackmux") -> Any:
    """A psycopg connection; ``StoreConfigError`` for what no retry can fix."""
    pg = psycopg()
    dsn = settings.postgres_dsn(dsn)
    bad = malformed(dsn)
    if bad:
        raise StoreConfigError(bad)
    try:
        return pg.connect(dsn, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT,
                          application_name=application, **KEEPALIVES)
    except pg.ProgrammingError as exc:  # a malformed DSN
        raise StoreConfigError(f"bad DSN {hide_password(dsn)!r}: {one_line(str(exc))}"
                               ) from None
    except pg.OperationalError as exc:
        text = str(exc)
        if _PERMANENT.search(text):
            where = hide_password(dsn) or NO_DSN
            raise StoreConfigError(f"cannot use the store at {where}: "
                                   f"{one_line(text)}") from None
        raise
