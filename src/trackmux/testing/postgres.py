"""A private PostgreSQL cluster on 127.0.0.1 for tests and benchmarks.

    with private_postgres() as pg:
        pg.dsn              # postgresql://trackmux:...@127.0.0.1:PORT/trackmux (superuser)
        pg.sql("CREATE ROLE ...")            # run SQL through psql as the superuser
        pg.create_role("reader", "secret")   # a login role; pg.dsn_for("reader", "secret")
        pg.kill()           # SIGKILL the postmaster and every backend (a crash)
        pg.pause(); pg.resume()              # SIGSTOP / SIGCONT: a stuck server
        pg.start()          # same port, same data: crash recovery, then up again
        pg.stop()           # a clean shutdown

Why this shape: PostgreSQL refuses to run as root, so when the tests run as root (CI on a
fresh machine) ``initdb`` and ``pg_ctl`` run as the ``postgres`` system user through
``runuser`` and the data folder is handed to that user. The folder sits in a temporary
directory every user can reach (``/tmp`` when root: pytest's own temp dirs are private to
root). The server listens on loopback only, on a free port, with its socket in the data
folder; password authentication over TCP (scram), trust on the private socket for psql.
``fsync`` is off: a killed *server* still loses nothing committed (its WAL is in the OS
page cache), only a killed machine would. ``synchronous_commit`` stays on: with it off a
SIGKILL loses commits the client was told had succeeded, which no delivery could detect.

The binaries are found through ``TRACKMUX_PG_BIN``, then ``pg_config --bindir`` on PATH,
then the newest ``/usr/lib/postgresql/*/bin`` (Debian's layout). Only the standard library
is used, so the fixture works before psycopg is installed.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from trackmux.core.procs import process_alive as _alive

__all__ = ["PostgresError", "PrivatePostgres", "find_bindir", "postgres_available",
           "private_postgres"]

SUPERUSER = "trackmux"
DATABASE = "trackmux"
START_TIMEOUT = 60.0


class PostgresError(RuntimeError):
    """The cluster could not be created, started or stopped; the message holds the log tail."""


def find_bindir() -> Path | None:
    """The folder with initdb and pg_ctl, or None when PostgreSQL is not installed."""
    explicit = os.environ.get("TRACKMUX_PG_BIN")
    if explicit:
        return Path(explicit)
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                 check=True, timeout=30).stdout.strip()
            if (Path(out) / "initdb").exists():
                return Path(out)
    if shutil.which("initdb") and shutil.which("pg_ctl"):
        return Path(shutil.which("initdb") or "").parent

    def version(path: str) -> tuple[int, ...]:
        part = Path(path).parent.name
        return tuple(int(p) for p in part.split(".") if p.isdigit()) or (0,)

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version)
    found = [p for p in found if (Path(p) / "initdb").exists()]
    return Path(found[-1]) if found else None


def postgres_available() -> bool:
    """Whether a private cluster can be started here (binaries found; root has a postgres
    user to run them as)."""
    if find_bindir() is None:
        return False
    if os.geteuid() == 0:
        return _system_user() is not None
    return True


def _system_user() -> str | None:
    import pwd

    for name in ("postgres",):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivatePostgres:
    """One private cluster: ``create()`` once, then ``start``/``stop``/``kill`` freely;
    ``destroy()`` stops it and removes its folder."""

    def __init__(self, root: str | os.PathLike[str] | None = None, *,
                 port: int | None = None) -> None:
        bindir = find_bindir()
        if bindir is None:
            raise PostgresError("PostgreSQL not found: install it (Debian: postgresql) or "
                                "set TRACKMUX_PG_BIN to the folder with initdb and pg_ctl")
        self.bindir = bindir
        self._as_user: str | None = None
        if os.geteuid() == 0:
            self._as_user = _system_user()
            if self._as_user is None:
                raise PostgresError("running as root needs a 'postgres' system user to run "
                                    "the server as (PostgreSQL refuses root)")
        base = root if root is not None else ("/tmp" if self._as_user else None)
        self.root = Path(tempfile.mkdtemp(prefix="trackmux-pg-", dir=base))
        self.data = self.root / "data"
        self.logfile = self.root / "server.log"
        self.host = "127.0.0.1"
        self.port = port or _free_port()
        self.password = secrets.token_hex(12)
        self.user = SUPERUSER
        self.database = DATABASE
        self._created = False

    # -- addresses ---------------------------------------------------------------------

    @property
    def dsn(self) -> str:
        """The superuser's DSN to the ``trackmux`` database."""
        return self.dsn_for(self.user, self.password)

    def dsn_for(self, user: str, password: str | None = None,
                database: str | None = None) -> str:
        auth = user if password is None else f"{user}:{password}"
        return f"postgresql://{auth}@{self.host}:{self.port}/{database or self.database}"

    # -- lifecycle ---------------------------------------------------------------------

    def _run(self, args: list[str], *, timeout: float = START_TIMEOUT,
             check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self._as_user:
            cmd = ["runuser", "-u", self._as_user, "--", *cmd]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              input=input, cwd=self.root)
        if check and proc.returncode != 0:
            raise PostgresError(f"{args[0]} failed ({proc.returncode}): "
                                f"{proc.stderr.strip() or proc.stdout.strip()}\n"
                                f"{self.log_tail()}")
        return proc

    def create(self) -> PrivatePostgres:
        """initdb, start, and create the ``trackmux`` database."""
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self._as_user:
            shutil.chown(self.root, self._as_user)
            shutil.chown(pwfile, self._as_user)
            os.chmod(self.root, 0o700)
        self._run(["initdb", "-D", str(self.data), "-U", self.user, "--pwfile", str(pwfile),
                   "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8",
                   "--no-locale", "--no-sync"])
        pwfile.unlink()
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("\n# trackmux private test cluster\nfsync = off\n"
                       "full_page_writes = off\n"
                       "max_connections = 100\nshared_buffers = 32MB\n")
        self._created = True
        self.start()
        self.sql(f"CREATE DATABASE {self.database}", database="postgres")
        return self

    def start(self) -> None:
        """Start the server (after ``create``, ``stop`` or ``kill``) on the same port."""
        opts = f"-h {self.host} -p {self.port} -k {self.data}"
        self._run(["pg_ctl", "start", "-D", str(self.data), "-w", "-t", str(int(START_TIMEOUT)),
                   "-l", str(self.logfile), "-o", opts])
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:  # -w waits; recovery may still refuse briefly
            if self.is_up():
                return
            time.sleep(0.1)
        raise PostgresError(f"server not accepting connections\n{self.log_tail()}")

    def stop(self) -> None:
        """A clean, fast shutdown (clients are disconnected)."""
        if self._postmaster_pid() is not None:
            self._run(["pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w"],
                      check=False)

    def kill(self) -> None:
        """A crash: SIGKILL the postmaster and all its backends at once; data stays."""
        pid = self._postmaster_pid()
        if pid is None:
            return
        victims = [pid, *self._children(pid)]
        for victim in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_alive(v) for v in victims):
            time.sleep(0.05)
        # Its lock files are stale now, but a killed postmaster may linger as a zombie
        # until it is reaped, and the next start would take it for a live server.
        for lock in (self.data / "postmaster.pid", *self.data.glob(".s.PGSQL.*.lock")):
            with contextlib.suppress(OSError):
                lock.unlink()

    def pause(self) -> None:
        """SIGSTOP the server and its backends: connections hang, as with a stuck server."""
        self._signal_all(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        self._signal_all(signal.SIGCONT)

    def set_idle(self, idle: bool = True) -> None:
        """Put the server and its backends in the idle scheduling class (backends started
        later inherit it from the postmaster), or back: a benchmark's stand-in for a
        server on a machine of its own, whose CPU the clients beside it do not share."""
        pid = self._postmaster_pid()
        if pid is None:
            return
        policy = os.SCHED_IDLE if idle else os.SCHED_OTHER
        for target in (pid, *self._children(pid)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.sched_setscheduler(target, policy, os.sched_param(0))

    def _signal_all(self, sig: signal.Signals) -> None:
        pid = self._postmaster_pid()
        if pid is None:
            return
        for target in (pid, *self._children(pid)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(target, sig)

    def restart(self) -> None:
        self.stop()
        self.start()

    def destroy(self) -> None:
        with contextlib.suppress(PostgresError, subprocess.SubprocessError):
            self.stop()
        if _alive_pid(self._postmaster_pid()):
            self.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- helpers -----------------------------------------------------------------------

    def sql(self, statement: str, *, database: str | None = None) -> str:
        """Run SQL as the superuser over the private socket; returns psql's unaligned output."""
        proc = self._run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                          "-h", str(self.data), "-p", str(self.port), "-U", self.user,
                          "-d", database or self.database, "-f", "-"],
                         input=statement, timeout=60)
        return proc.stdout

    def create_role(self, name: str, password: str | None = None) -> str:
        """A login role (no rights beyond CONNECT); returns its DSN."""
        password = password or secrets.token_hex(8)
        self.sql(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        return self.dsn_for(name, password)

    def is_up(self) -> bool:
        proc = self._run(["pg_isready", "-h", self.host, "-p", str(self.port), "-t", "2"],
                         check=False, timeout=30)
        return proc.returncode == 0

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _postmaster_pid(self) -> int | None:
        try:
            first = (self.data / "postmaster.pid").read_text().splitlines()[0]
        except (OSError, IndexError):
            return None
        return int(first) if first.strip().isdigit() else None

    @staticmethod
    def _children(pid: int) -> list[int]:
        out = []
        for entry in Path("/proc").glob("[0-9]*"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                if int(stat[stat.rfind(")") + 2:].split()[1]) == pid:
                    out.append(int(entry.name))
        return out

    def __enter__(self) -> PrivatePostgres:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.destroy()


def _alive_pid(pid: int | None) -> bool:
    return pid is not None and _alive(pid)


@contextlib.contextmanager
def private_postgres(root: str | os.PathLike[str] | None = None) -> Iterator[PrivatePostgres]:
    """A created and started private cluster with a ``trackmux`` database; destroyed after."""
    pg = PrivatePostgres(root)
    try:
        pg.create()
        yield pg
    finally:
        pg.destroy()
