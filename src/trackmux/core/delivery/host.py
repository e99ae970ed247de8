"""Where a live run's delivery workers run: a delivery process (the default) or threads here.

Both hosts run the same :class:`~trackmux.core.delivery.worker.DeliveryWorker` that ``trackmux
sync`` runs, reading the spool. The difference is whose interpreter pays for the backend
libraries:

- :class:`ProcessDelivery` starts ``python -m trackmux.core.delivery.process`` beside the
  trainer. wandb, mlflow, swanlab and tensorboard are imported and run there, so their
  CPU time, GIL holds, memory and crashes stay out of the training loop. The trainer
  talks to it over two pipes: commits wake it (one byte, non-blocking), ``finish``
  sends a target; it answers with progress and problems. A closed pipe tells it the
  trainer is gone: it then delivers what was committed, marks the run crashed and exits.
- :class:`ThreadDelivery` keeps the workers on threads of this process: for places that
  cannot spawn a process, and for backends that exist only here (a plugin registered at
  run time, or one registered with ``in_trainer=True`` such as the console).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from trackmux.core.backends.contract import Backend, RunInfo
from trackmux.core.delivery import appends, priority
from trackmux.core.delivery.reporting import Reporter
from trackmux.core.delivery.watch import WatcherSpec
from trackmux.core.delivery.worker import DeliveryWorker, acquire_delivery_lock
from trackmux.core.events import FindingEvent

log = logging.getLogger("trackmux")

DELIVERY_LOG = "delivery.log"
_SESSION_VARIABLES = frozenset({"CLEARML_PROC_MASTER_ID", "TRAINS_PROC_MASTER_ID",
                                "WANDB_SERVICE"})
MAX_RESTARTS = 3


class ThreadDelivery:
    """One worker thread per backend in this process (``delivery="thread"``)."""

    mode = "thread"

    def __init__(self, run_dir: Path, info: RunInfo,
                 factories: Mapping[str, Callable[[], Backend]], reporter: Reporter) -> None:
        # A script may end before a worker has imported its backend library; the import
        # then runs during interpreter exit, where concurrent.futures (which mlflow, wandb
        # and others import) can no longer register its exit hook and raises. Imported now,
        # it has registered already.
        import concurrent.futures.thread  # noqa: F401

        locks = {name: acquire_delivery_lock(run_dir, name) for name in factories}
        self.workers = [DeliveryWorker(name, factory, info, reporter, lock=locks[name])
                        for name, factory in factories.items()]
        for worker in self.workers:
            worker.start()

    @property
    def names(self) -> list[str]:
        return [w.name for w in self.workers]

    def notify(self) -> None:
        for worker in self.workers:
            worker.notify()

    def acked(self) -> dict[str, int]:
        return {w.name: w.acked for w in self.workers}

    def failed(self) -> dict[str, str]:
        return {w.name: w.error or "" for w in self.workers if w.failed}

    def quarantined(self) -> dict[str, int]:
        return {w.name: w.quarantined for w in self.workers if w.quarantined}

    def request_finish(self, target: int, status: str, deadline: float) -> None:
        for worker in self.workers:
            worker.finish(target, status, deadline)

    def wait(self, target: int, deadline: float) -> None:
        for worker in self.workers:
            worker.join(max(0.0, deadline - time.monotonic()))

    def abandon(self) -> str:
        """Deadline passed: stop what is still running; the rest stays in the spool."""
        for worker in self.workers:
            if worker.thread.is_alive():
                worker.stop()
        return ""


class ProcessDelivery:
    """The run's delivery process, seen from the trainer."""

    mode = "process"

    def __init__(self, run_dir: Path, info: RunInfo, options: Mapping[str, Mapping[str, Any]],
                 reporter: Reporter, *, orphan_timeout: float,
                 watchers: Sequence[WatcherSpec] = (),
                 on_found: Callable[[list[FindingEvent]], None] | None = None) -> None:
        self.run_dir = run_dir
        self._on_found = on_found
        self._settled: int | None = None
        self._names = list(options)
        self._reporter = reporter
        self._config = {
            "info": {"project": info.project, "name": info.name, "run_id": info.run_id,
                     "run_dir": str(info.run_dir), "started_at": info.started_at,
                     "tags": list(info.tags)},
            "backends": {name: dict(opts) for name, opts in options.items()},
            "parent": os.getpid(),
            "orphan_timeout": orphan_timeout,
            "watchers": [w.as_json() for w in watchers],
        }
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()
        self._acked = {name: 0 for name in self._names}
        self._failed: dict[str, str] = {}
        self._quarantined: dict[str, int] = {}
        self._finish: dict[str, Any] | None = None
        self._done = False      # the process said it finished its work
        self._gone = False      # no process, and none will be started again
        self._restarts = 0
        self._control = -1
        self.proc: subprocess.Popen[bytes] = self._spawn()
        _live_hosts.add(self)

    @property
    def names(self) -> list[str]:
        return list(self._names)

    @property
    def pid(self) -> int:
        return self.proc.pid

    # -- the trainer's side ------------------------------------------------------------
    def notify(self) -> None:
        """New events were committed: one byte down the pipe. Never blocks; a full pipe
        already holds a wake-up, and a dead process is the monitor's business."""
        if not self._send_lock.acquire(blocking=False):
            return  # a message is being sent; it wakes the process too
        try:
            os.write(self._control, b"\n")
        except (BlockingIOError, OSError):
            pass
        finally:
            self._send_lock.release()

    def acked(self) -> dict[str, int]:
        with self._cond:
            return dict(self._acked)

    def failed(self) -> dict[str, str]:
        with self._cond:
            return dict(self._failed)

    def quarantined(self) -> dict[str, int]:
        with self._cond:
            return {name: n for name, n in self._quarantined.items() if n}

    def request_finish(self, target: int, status: str, deadline: float) -> None:
        with self._cond:
            self._finish = {"target": target, "status": status,
                            "wait": max(0.0, deadline - time.monotonic())}
        self._send({"finish": self._finish}, deadline)

    def settled(self, target: int, deadline: float) -> int:
        """After ``request_finish``, with watchers: the seq delivery goes up to once they
        read every event (their findings included); ``target`` if no answer by then."""
        if not self._config["watchers"]:
            return target
        with self._cond:
            while self._settled is None and not self._gone:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(min(remaining, 0.2))
            return max(target, self._settled or 0)

    def wait(self, target: int, deadline: float) -> None:
        """Until the process has exited: every backend closed (a backend writes its last
        bytes at close: wandb's exit record, the file backend's tidy-up) and nothing of
        trackmux touches the run's files any more, as after thread mode's join."""
        with self._cond:
            while not self._gone:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._cond.wait(min(remaining, 0.5))

    def abandon(self) -> str:
        """The trainer stops waiting. The process keeps delivering on its own, up to its
        orphan deadline; say so, so the pending count is not mistaken for a loss."""
        with self._cond:
            still_running = not self._gone and not self._done
        if still_running:
            return (f"the delivery process (pid {self.proc.pid}) goes on delivering them in "
                    f"the background after this script exits, for up to "
                    f"{self._config['orphan_timeout']:.0f} s (TRACKMUX_ORPHAN_TIMEOUT); watch "
                    f"it: tail -f {self.run_dir / DELIVERY_LOG}, or trackmux runs "
                    f"{self.run_dir.parent.parent}")
        return ""

    def background_seconds(self) -> float | None:
        """How long the process may go on delivering after the trainer exits (its orphan
        timeout), None when it has already ended."""
        with self._cond:
            if self._gone or self._done:
                return None
        seconds: float = self._config["orphan_timeout"]  # type: ignore[assignment]
        return float(seconds)

    def _send(self, message: dict[str, Any], deadline: float | None = None) -> bool:
        data = orjson.dumps(message) + b"\n"
        with self._send_lock:
            while data:
                try:
                    written = os.write(self._control, data)
                except BlockingIOError:
                    if deadline is not None and time.monotonic() >= deadline:
                        return False
                    time.sleep(0.005)
                    continue
                except OSError:
                    return False  # the process is gone; the monitor restarts it
                data = data[written:]
        return True

    # -- starting and watching the process ----------------------------------------------
    def _spawn(self) -> subprocess.Popen[bytes]:
        control_read, control_write = os.pipe()
        status_read, status_write = os.pipe()
        # Variables a backend library sets in this process to tie its own children to this
        # process's session; the delivery process is not such a child (it outlives us).
        env = {k: v for k, v in os.environ.items() if k not in _SESSION_VARIABLES}
        # The child must import the same trackmux and plugins as this interpreter, even
        # when they were put on sys.path by hand (a source checkout, a test runner).
        paths = [p for p in sys.path if p and os.path.isabs(p)]
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        # below the trainer from its first instruction, its imports included (priority.py)
        lowered = priority.launch_prefix(priority.wanted())
        env[priority.LAUNCHED_ENV] = lowered[-1] if lowered else "0"
        logfile = open(self.run_dir / DELIVERY_LOG, "ab")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen(
                [*lowered, sys.executable, "-m", "trackmux.core.delivery.process",
                 str(control_read), str(status_write)],
                stdin=subprocess.DEVNULL, stdout=logfile, stderr=logfile,
                pass_fds=(control_read, status_write), env=env,
                # its own process group: Ctrl-C and the job's process-group signals reach
                # the trainer, not the drain of what the trainer already logged
                **priority.own_process_group())
        finally:
            logfile.close()
            os.close(control_read)
            os.close(status_write)
        with contextlib.suppress(OSError):
            os.chmod(self.run_dir / DELIVERY_LOG, 0o600)
        with self._send_lock:
            self._control = control_write
            os.write(control_write, orjson.dumps(self._config) + b"\n")  # < pipe buffer
        os.set_blocking(control_write, False)
        if self._finish is not None:  # a restart after finish() began
            self._send({"finish": self._finish})
        threading.Thread(target=self._monitor, args=(proc, status_read),
                         name=f"trackmux-delivery-monitor-{proc.pid}", daemon=True).start()
        return proc

    def _monitor(self, proc: subprocess.Popen[bytes], status_read: int) -> None:
        """Read the process's reports until it exits, then reap it (no zombie) and start
        another if it died before its work was done."""
        with os.fdopen(status_read, "rb") as status:
            for line in status:
                try:
                    message = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                self._handle(message)
        code = proc.wait()
        with self._send_lock:  # never write to a reused fd number
            control, self._control = self._control, -1
            with contextlib.suppress(OSError):
                os.close(control)
        with self._cond:
            if self._done:
                self._gone = True
                self._cond.notify_all()
                return
            restart = self._restarts < MAX_RESTARTS
            self._restarts += 1
        if restart:
            self._reporter.report("delivery", "process",
                                  f"delivery process (pid {proc.pid}) exited with code {code} "
                                  f"before its work was done; starting another "
                                  f"(log: {self.run_dir / DELIVERY_LOG})")
            time.sleep(min(2.0, 0.25 * self._restarts))
            try:
                self.proc = self._spawn()
                return
            except OSError as exc:
                self._reporter.report("delivery", "spawn", f"cannot start: {exc}")
        self._reporter.report(
            "delivery", "gave-up",
            f"the delivery process died {self._restarts} times; events stay in the spool. "
            f"Deliver them with: trackmux sync {self.run_dir}")
        with self._cond:
            self._gone = True
            self._cond.notify_all()

    def _handle(self, message: dict[str, Any]) -> None:
        if "problem" in message:
            self._reporter.replay(*message["problem"])
            return
        if "append" in message:  # findings to append here, at the trainer's priority
            answer = appends.append_requested(self.run_dir, message["append"])
            self._send({"appended": answer}, time.monotonic() + 5.0)
            return
        if "found" in message:  # the watchers' findings (already in the spool)
            if self._on_found is not None:
                self._on_found([FindingEvent.from_dict(f, f["time"])
                                for f in message["found"]])
            return
        if "log" in message:  # a backend's warning meant for the user
            level, text = message["log"]
            log.log(int(level), "%s", text)
            return
        with self._cond:
            if "acked" in message:
                self._acked.update(message["acked"])
            if "failed" in message:
                self._failed.update(message["failed"])
            if "quarantined" in message:
                self._quarantined.update(message["quarantined"])
            if "settled" in message:
                self._settled = int(message["settled"])
            if message.get("done"):
                self._done = True
            self._cond.notify_all()


def stop_orphaned_delivery(run_dir: Path, meta: Mapping[str, Any], wait: float = 15.0,
                           ours: bool = False) -> bool:
    """Before ``trackmux sync`` delivers a run by hand, or a resumed attempt starts its own
    delivery (``ours``: this process holds the run's lock now): a delivery process that
    outlived its trainer (still retrying a backend that was down) holds the delivery locks.
    Ask it to hand over (SIGUSR1: stop now, keep what it acknowledged) and wait until it is
    gone. A run whose trainer is still alive is left alone. True if one was stopped."""
    from trackmux.core.spool.runs import lock_is_held

    pid = meta.get("delivery_pid")
    if not isinstance(pid, int) or not _is_delivery_process(pid):
        return False
    if not ours and lock_is_held(run_dir):
        return False
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and _is_delivery_process(pid):
        time.sleep(0.05)
    return True


def _is_delivery_process(pid: int) -> bool:
    """True if ``pid`` is alive (not a zombie) and runs trackmux's delivery process."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
    except OSError:
        return False
    # the module's name before core/ was grouped (a delivery process left by an older trackmux)
    return b"trackmux.core.delivery.process" in cmdline or b"trackmux.core.delivery_proc" in cmdline


_live_hosts: weakref.WeakSet[ProcessDelivery] = weakref.WeakSet()


def _close_in_forked_child() -> None:
    """A process forked from the trainer (a DataLoader worker) must not keep the control
    pipe open, or the delivery process would not see the trainer's death until it exits."""
    for host in list(_live_hosts):
        control, host._control = host._control, -1
        with contextlib.suppress(OSError):
            os.close(control)


os.register_at_fork(after_in_child=_close_in_forked_child)
