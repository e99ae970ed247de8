"""Where sweeps live: Optuna's RDB storage, an SQLite file by default, PostgreSQL to share.

- Default: ``sqlite:///<trackmux root>/.sweeps/sweeps.db`` (``TRACKMUX_DIR``, else
  ``./trackmux``). Several agents on one machine share it safely: every transaction
  starts with ``BEGIN IMMEDIATE`` (it takes SQLite's write lock at once, so two agents
  never both read and then both try to write, which SQLite answers with "database is
  locked" at once instead of waiting) and waits up to a minute for the lock.
- Agents record a heartbeat for their running trial (``TRACKMUX_SWEEP_HEARTBEAT``, every
  30 s): a trial whose agent died is failed by the next agent that asks for a trial.
- ``--storage postgresql://user:pass@host/db`` (or ``TRACKMUX_SWEEP_STORAGE``): agents on
  many machines, the same server as the team store. Driven by psycopg 3 when installed.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import Any

from trackmux.core import settings

ENV = "TRACKMUX_SWEEP_STORAGE"
HEARTBEAT_ENV = "TRACKMUX_SWEEP_HEARTBEAT"
DEFAULT_HEARTBEAT = 30
LOCK_WAIT_SECONDS = 60
SWEEPS_DIR = ".sweeps"


def default_url(root: str | os.PathLike[str] | None = None) -> str:
    path = settings.spool_root(root) / SWEEPS_DIR / "sweeps.db"
    return f"sqlite:///{path}"


def resolve_url(url: str | None, root: str | os.PathLike[str] | None = None) -> str:
    """``url``, then ``TRACKMUX_SWEEP_STORAGE``, then the SQLite file under the root."""
    url = url or os.environ.get(ENV) or default_url(root)
    if url.startswith(("postgresql://", "postgres://")):
        _, rest = url.split("://", 1)
        try:
            import psycopg  # noqa: F401
        except ImportError:
            return f"postgresql://{rest}"  # SQLAlchemy's default driver, psycopg2
        return f"postgresql+psycopg://{rest}"
    if not re.match(r"^(sqlite:///.+|(postgresql|mysql)(\+\w+)?://.+)$", url):
        raise ValueError(f"--storage {url!r}: use sqlite:///path/to/file.db or "
                         "postgresql://user:password@host:port/database")
    return url


def heartbeat_seconds() -> int:
    """How often an agent says its trial is alive (``TRACKMUX_SWEEP_HEARTBEAT``, 30 s); a
    running trial silent for four times that is failed by the next agent that asks."""
    raw = os.environ.get(HEARTBEAT_ENV, "").strip()
    if not raw:
        return DEFAULT_HEARTBEAT
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{HEARTBEAT_ENV}={raw!r}: give whole seconds >= 1")
    return int(raw)


def sqlite_path(url: str) -> Path | None:
    if url.startswith("sqlite:///"):
        return Path(url[len("sqlite:///"):])
    return None


def open_storage(url: str) -> Any:
    """Optuna's RDBStorage for ``url`` (already resolved), with SQLite's locking fixed."""
    try:
        import optuna
    except ImportError:
        raise RuntimeError("sweeps need Optuna, which is not installed: pip install optuna "
                           "pyyaml (or, in the trackmux checkout, pip install -e "
                           "'.[sweeps]')") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    path = sqlite_path(url)
    beat = heartbeat_seconds()
    engine: dict[str, Any] = {"pool_pre_ping": True}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        engine = {"connect_args": {"timeout": LOCK_WAIT_SECONDS}}
    try:
        with warnings.catch_warnings():  # heartbeats are "experimental" in Optuna 4-5
            warnings.simplefilter("ignore")
            storage = optuna.storages.RDBStorage(url, engine_kwargs=engine,
                                                 heartbeat_interval=beat,
                                                 grace_period=4 * beat)
    except Exception as exc:  # a server that is down, a bad password, a missing driver
        raise RuntimeError(f"cannot open the sweep storage {safe_url(url)}: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    if path is not None:
        _lock_immediately(storage.engine)
    return storage


def safe_url(url: str) -> str:
    """A storage URL without its password (for messages)."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        userinfo, host = rest.rsplit("@", 1)
        return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{host}"
    return url


def _lock_immediately(engine: Any) -> None:
    """Every transaction takes the write lock first (SQLAlchemy's pysqlite recipe)."""
    from sqlalchemy import event

    def on_connect(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None  # we say BEGIN ourselves, below
        dbapi_connection.execute(f"PRAGMA busy_timeout = {LOCK_WAIT_SECONDS * 1000}")

    def on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    event.listen(engine, "connect", on_connect)
    event.listen(engine, "begin", on_begin)
    engine.dispose()  # the connections made so far did not run on_connect
