"""Connections to the team store, and the errors worth one clear line.

Bad credentials, a missing database or role, or a database that refuses the role are
``StoreConfigError``: retrying cannot fix them, so the backend reports them once at start.
A server that is down, restarting or unreachable is an ordinary ``OperationalError``:
delivery retries with backoff while the spool keeps every event.
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
                        r"missing \"=\"|invalid connection option|invalid URI",
                        re.IGNORECASE)
_DSN_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@|(password\s*=\s*)\S+", re.IGNORECASE)


class StoreUnavailable(RuntimeError):
    """psycopg is not installed."""


class StoreConfigError(RuntimeError):
    """A DSN, role or database that retrying cannot fix (the message says which)."""


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
    try:
        return pg.connect(dsn, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT,
                          application_name=application, **KEEPALIVES)
    except pg.ProgrammingError as exc:  # a malformed DSN
        raise StoreConfigError(f"bad DSN {hide_password(dsn)!r}: {exc}") from None
    except pg.OperationalError as exc:
        text = str(exc)
        if _PERMANENT.search(text):
            where = hide_password(dsn) or "(libpq PG* variables)"
            raise StoreConfigError(f"cannot use the store at {where}: "
                                   f"{text.strip().splitlines()[-1]}") from None
        raise
