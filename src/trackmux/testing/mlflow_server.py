"""A real ``mlflow server`` on 127.0.0.1 for integration tests and benchmarks.

    with MlflowServer(tmp_path / "mlflow") as server:
        client = MlflowClient(server.url)
        ...
        server.kill()       # crash it (SIGKILL to the whole process group); data stays
        server.restart()    # same port, same database, same artifacts
        server.pause()      # SIGSTOP: connections hang, as with a stuck server
        server.resume()     # SIGCONT

Why a class and not just ``subprocess.Popen``: ``mlflow server`` is a tree of processes
(a launcher, uvicorn or gunicorn workers, a job runner, huey consumers). Killing only
the launcher leaves the rest running, holding the port and the SQLite file. The server
therefore runs in its own session/process group (``start_new_session=True``) and is
stopped by signalling the whole group; any descendant that moved to another group is
found through ``/proc`` and killed as well, and ``stop()`` waits until none is left.

The backend store is ``sqlite:///<root>/mlflow.db``; artifacts go to ``<root>/artifacts``
and are served through the server (``--artifacts-destination``), so clients upload and
download over HTTP exactly as against a remote server. The server's output is appended
to ``<root>/server.log``; a failed start raises with the tail of that log.

Caveat: the server is in its own session, so if the process that started it is itself
SIGKILLed (no fixture teardown), the server outlives it; ``kill -- -<pid>`` ends it.

Only the standard library is used here; mlflow must be importable by ``python``
(default: the running interpreter).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from trackmux.core.procs import process_alive as _alive

__all__ = ["MlflowServer", "MlflowServerError", "free_port"]

START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0


class MlflowServerError(RuntimeError):
    """The server did not come up (or go down) as asked; the message holds its log tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _proc_table() -> list[tuple[int, int, int, str]]:
    """(pid, ppid, pgid, state) of every process in /proc (empty where /proc is missing)."""
    out: list[tuple[int, int, int, str]] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return out
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may contain spaces and parentheses
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2:
            out.append((int(entry.name), int(fields[1]), int(fields[2]), fields[0]))
    return out


def _children_map() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for pid, ppid, _, _ in _proc_table():
        out.setdefault(ppid, []).append(pid)
    return out


def _descendants(pid: int) -> set[int]:
    children = _children_map()
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _group_members(pgid: int) -> set[int]:
    """Live (non-zombie) processes of group ``pgid``. Zombies are ignored: in a container
    whose PID 1 does not reap, they would otherwise look alive forever."""
    if Path("/proc").is_dir():
        return {pid for pid, _, group, state in _proc_table() if group == pgid and state != "Z"}
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return set()
    return {-pgid}


class MlflowServer:
    """One ``mlflow server`` process tree with a SQLite store under ``root``.

    ``port`` defaults to a free port chosen once, so ``restart()`` keeps the URL.
    ``jobs``: mlflow 3 starts a job runner with seven huey consumer processes (for
    GenAI jobs, not tracking); they cost seconds of CPU at every start, so they are off
    (``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false``) unless ``jobs=True``.
    ``extra_args`` are appended to the command line; ``env`` updates the environment
    (``MLFLOW_DISABLE_TELEMETRY=true`` is always set: telemetry would try DNS).
    """

    def __init__(self, root: str | os.PathLike[str], port: int | None = None, *,
                 host: str = "127.0.0.1", python: str | None = None,
                 extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None,
                 jobs: bool = False, start_timeout: float = START_TIMEOUT) -> None:
        self.root = Path(root).absolute()
        self.host = host
        self.port = port or free_port(host)
        self.python = python or sys.executable
        self.extra_args = tuple(extra_args)
        self.jobs = jobs
        self.start_timeout = start_timeout
        self._env = dict(env or {})
        self._proc: subprocess.Popen[bytes] | None = None
        self._known: set[int] = set()
        self._paused = False

    # -- where things are -------------------------------------------------------------
    @property
    def url(self) -> str:
        """The tracking URI clients use (``http://127.0.0.1:PORT``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def db_path(self) -> Path:
        return self.root / "mlflow.db"

    @property
    def artifacts_dir(self) -> Path:
        return self.root / "artifacts"

    @property
    def log_path(self) -> Path:
        return self.root / "server.log"

    @property
    def pid(self) -> int | None:
        """The launcher's pid (also the process group id), or None when not running."""
        return self._proc.pid if self._proc is not None else None

    def command(self) -> list[str]:
        return [
            self.python, "-m", "mlflow", "server",
            "--backend-store-uri", f"sqlite:///{self.db_path}",
            "--artifacts-destination", str(self.artifacts_dir),
            "--host", self.host, "--port", str(self.port), "--workers", "1",
            *self.extra_args,
        ]

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> MlflowServer:
        """Start the server and wait until ``GET /health`` answers 200."""
        if self._proc is not None:
            raise MlflowServerError(f"mlflow server on {self.url} is already started")
        self.root.mkdir(parents=True, exist_ok=True)
        self.artifacts_dir.mkdir(parents=True, exist_ok=True)
        if self._port_busy():
            raise MlflowServerError(f"port {self.port} on {self.host} is already in use")
        env = dict(os.environ)
        env.update({"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1",
                    "PYTHONUNBUFFERED": "1"})
        env.pop("MLFLOW_TRACKING_URI", None)
        if not self.jobs:
            env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
        env.update(self._env)
        with open(self.log_path, "ab") as log:
            log.write(f"\n--- trackmux: starting {' '.join(self.command())}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env=env, cwd=self.root, start_new_session=True)
        self._paused = False
        try:
            self._wait_healthy()
        except BaseException:
            self._terminate(signal.SIGKILL)
            raise
        return self

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop gracefully (SIGTERM to the group, SIGKILL after ``timeout``); idempotent."""
        if self._proc is None:
            return
        if self._paused:
            self.resume()  # a stopped process cannot act on SIGTERM
        self._terminate(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """Crash the server: SIGKILL to every process of it. The database and artifacts
        stay, so ``restart()`` serves the same data on the same port."""
        if self._proc is not None:
            self._terminate(signal.SIGKILL)

    def restart(self) -> MlflowServer:
        """Stop (if running) and start again on the same port with the same data."""
        self.stop()
        return self.start()

    def pause(self) -> None:
        """SIGSTOP every process: the port stays open but nothing answers (a hung server)."""
        self._signal_all(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """SIGCONT after ``pause()``."""
        self._signal_all(signal.SIGCONT)
        self._paused = False

    def is_healthy(self, timeout: float = 2.0) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=timeout) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])

    def processes(self) -> set[int]:
        """Every live pid of the server: its process group plus any known descendant."""
        if self._proc is None:
            return set()
        pids = {self._proc.pid} | _descendants(self._proc.pid) | self._known
        return {p for p in pids if _alive(p)}

    def __enter__(self) -> MlflowServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self._proc is not None else "stopped"
        return f"MlflowServer({self.url}, {state}, root={self.root})"

    # -- internals --------------------------------------------------------------------
    def _port_busy(self) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.5)
            return sock.connect_ex((self.host, self.port)) == 0

    def _wait_healthy(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            self._known |= _descendants(self._proc.pid)
            code = self._proc.poll()
            if code is not None:
                raise MlflowServerError(
                    f"mlflow server exited with code {code} while starting on {self.url}; "
                    f"log {self.log_path}:\n{self.log_tail()}")
            if self.is_healthy(timeout=1.0):
                self._known |= _descendants(self._proc.pid)
                return
            time.sleep(0.2)
        raise MlflowServerError(
            f"mlflow server on {self.url} did not answer GET /health with 200 within "
            f"{self.start_timeout:.0f} s; log {self.log_path}:\n{self.log_tail()}")

    def _signal_all(self, sig: signal.Signals) -> None:
        if self._proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)
        for pid in self.processes():  # descendants that left the group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def _terminate(self, sig: signal.Signals, timeout: float = STOP_TIMEOUT) -> None:
        proc = self._proc
        assert proc is not None
        self._known |= _descendants(proc.pid)
        self._signal_all(sig)
        if self._paused and sig != signal.SIGKILL:
            self._signal_all(signal.SIGCONT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._any_left(proc):
            time.sleep(0.05)
        if self._any_left(proc):
            self._signal_all(signal.SIGKILL)
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline and self._any_left(proc):
                time.sleep(0.05)
        left = self._any_left(proc)
        self._proc = None
        self._known = set()
        self._paused = False
        if left:
            raise MlflowServerError(f"mlflow server processes survived SIGKILL: {left}")

    def _any_left(self, proc: subprocess.Popen[bytes]) -> set[int]:
        proc.poll()  # reap the launcher so it does not linger as a zombie
        left = {p for p in (self._known | _descendants(proc.pid)) if _alive(p)}
        if proc.returncode is None:
            left.add(proc.pid)
        return left | _group_members(proc.pid)  # includes members reparented before we looked
