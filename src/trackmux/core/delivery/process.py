"""The delivery process: ``python -m trackmux.core.delivery.process CONTROL_FD STATUS_FD``.

Started by :class:`~trackmux.core.delivery.host.ProcessDelivery` for one live run. It
reads its set-up (run, backends and their options, which never touch the disk) as the
first line of the control pipe, then runs one ``DeliveryWorker`` per backend, the same
worker ``trackmux sync`` runs, so backend libraries load in this interpreter only.

Control pipe (trainer -> here): an empty line is a wake-up after a commit; a JSON line
``{"finish": {"target": N, "status": S}}`` says the trainer finished. End of file
without ``finish`` means the trainer is gone (SIGKILL, OOM, ``os._exit``, segfault); so
does a changed parent pid, checked every second (a forked child of the trainer may hold
the pipe open). Either way this process delivers every committed event, marks the run
crashed, and exits at the latest at the orphan deadline.

Status pipe (here -> trainer): JSON lines with progress and forwarded problems, and the
findings of the run's watchers (``{"found": [...]}``, core/delivery/watch.py: the doctor
runs here, once per run, never in the trainer); after ``finish`` the seq delivery goes up
to once the watchers have read everything (``{"settled": N}``).
stdout and stderr are ``delivery.log`` in the run directory, never the trainer's.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from trackmux.core.backends.contract import RunInfo
from trackmux.core.backends.registry import get_registry
from trackmux.core.delivery import priority
from trackmux.core.delivery.appends import TrainerAppender
from trackmux.core.delivery.reporting import Reporter
from trackmux.core.delivery.watch import WatcherSpec, WatchRunner, runner_problem_reporter
from trackmux.core.delivery.worker import ENDED, DeliveryWorker, Progress, acquire_delivery_lock
from trackmux.core.errors import SpoolLockedError
from trackmux.core.events import FindingEvent
from trackmux.core.spool.reader import SpoolReader

log = logging.getLogger("trackmux")

# After SIGTERM, keep draining this long before exiting; the rest stays in the spool.
DEFAULT_GRACE = 10.0
#: after SIGTERM, when no backend makes progress (each left only retrying): stop this soon
STUCK_GRACE = 2.0
#: at the deadline, how long the workers get to let go before the process exits anyway
STOP_WAIT = 0.5
PARENT_CHECK = 1.0


class DeliveryProcess:
    """The run's workers plus the two pipes, inside the delivery process."""

    def __init__(self, config: dict[str, Any], status: BinaryIO) -> None:
        info = config["info"]
        self.info = RunInfo(info["project"], info["name"], info["run_id"],
                            Path(info["run_dir"]), float(info["started_at"]),
                            tuple(info["tags"]))
        self.parent = int(config["parent"])
        self.orphan_timeout = float(config["orphan_timeout"])
        self.deadline: float | None = None
        self._status = status
        self._status_lock = threading.Lock()
        self._event = threading.Event()  # wakes the main loop: finish, EOF, signal
        self._finish: dict[str, Any] | None = None
        self._orphaned: str | None = None
        self._note: str | None = None  # a line the main loop says (from a signal handler)
        self.reporter = Reporter(listener=self._forward)
        self.workers: list[DeliveryWorker] = []
        registry = get_registry()
        for name, options in config["backends"].items():
            try:
                spec = registry.backend(name, options)
                lock = acquire_delivery_lock(self.info.run_dir, name)
            except (SpoolLockedError, Exception) as exc:
                self.reporter.report(name, "start", f"{type(exc).__name__}: {exc}")
                self._send({"state": {name: "failed"},
                            "failed": {name: f"{type(exc).__name__}: {exc}"}})
                continue
            self.workers.append(DeliveryWorker(
                name, functools.partial(spec.factory, dict(options)), self.info,
                self.reporter, lock=lock, on_progress=self._progress))
        # findings are appended by the trainer while it lives (core/delivery/appends.py)
        self._control_open = True
        self.appender = TrainerAppender(
            self.info.run_dir, self._send,
            listening=lambda: self._control_open and self._orphaned is None)
        self.watch = WatchRunner(
            [WatcherSpec.from_json(w) for w in config.get("watchers", [])], self.info,
            alive=lambda: self._finish is None and self._orphaned is None,
            on_found=self._found, on_problem=runner_problem_reporter(self.reporter.report),
            append=self.appender)

    # -- messages to the trainer ---------------------------------------------------------
    def _send(self, message: dict[str, Any]) -> bool:
        data = orjson.dumps(message) + b"\n"
        with self._status_lock:
            try:
                self._status.write(data)
                self._status.flush()
            except OSError:
                return False  # the trainer is gone; nobody to tell
        return True

    def _forward(self, op: str, backend: str, kind: str, message: str) -> None:
        self._send({"problem": [op, backend, kind, message]})

    def _found(self, findings: list[FindingEvent]) -> None:
        """Findings were appended to the spool: wake the workers, tell the trainer."""
        for worker in self.workers:
            worker.notify()
        self._send({"found": [{**f.as_dict(), "time": f.time} for f in findings]})

    def _progress(self, progress: Progress) -> None:
        message: dict[str, Any] = {"acked": {progress.backend: progress.acked},
                                   "state": {progress.backend: progress.state}}
        worker = next((w for w in self.workers if w.name == progress.backend), None)
        if worker is not None:
            message["quarantined"] = {worker.name: worker.quarantined}
            if worker.failed:
                message["failed"] = {worker.name: worker.error or ""}
        self._send(message)
        if progress.state in ENDED:
            self._event.set()

    # -- control ------------------------------------------------------------------------
    def read_control(self, control: BinaryIO) -> None:
        """Thread: wake-ups and finish from the trainer; EOF without finish = trainer gone."""
        for line in control:
            line = line.strip()
            if not line:
                for worker in self.workers:
                    worker.notify()
                self.watch.notify()
                continue
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                log.warning("trackmux delivery: unreadable control line %r", line[:100])
                continue
            if "appended" in message:
                self.appender.answered(message["appended"])
            if "finish" in message:
                self._finish = message["finish"]
                self._event.set()
        if self._finish is None:
            self._orphaned = "the trainer closed its pipe without finish()"
            self._event.set()
        self._control_open = False
        self.appender.stop_waiting()  # nobody answers any more

    def on_sigterm(self, signum: int, frame: object) -> None:
        """Drain for the grace period while some backend makes progress; when every one
        left is only retrying (a dead webhook, a server that is down), stop within
        ``STUCK_GRACE`` s: waiting would change nothing. Either way it is said, in
        delivery.log and to the trainer if it still listens."""
        grace = float(os.environ.get("TRACKMUX_DELIVERY_GRACE") or DEFAULT_GRACE)
        left = [w for w in self.workers if w.state not in ENDED]
        if all(w.state in ("retrying", "opening") for w in left):
            grace = min(grace, STUCK_GRACE)
            what = (f"SIGTERM; {', '.join(w.name for w in left) or 'nothing'} only retrying: "
                    f"stopping within {grace:.1f} s; what is left stays in the spool for "
                    f"trackmux sync {self.info.run_dir}")
        else:
            what = (f"SIGTERM; draining {', '.join(w.name for w in left)} for at most "
                    f"{grace:.1f} s more (TRACKMUX_DELIVERY_GRACE)")
        self._note = what  # said by the main loop: no lock is taken in a signal handler
        self._set_deadline(time.monotonic() + grace)
        self._event.set()

    def _say_note(self) -> None:
        note, self._note = self._note, None
        if note:
            log.warning("trackmux delivery: %s", note)
            self._send({"log": [logging.WARNING,
                                f"trackmux delivery (pid {os.getpid()}): {note}"]})

    def on_handover(self, signum: int, frame: object) -> None:
        """SIGUSR1 from ``trackmux sync``: the user delivers this run by hand now; stop at
        once and release the delivery locks (acknowledged progress is kept)."""
        log.warning("trackmux delivery: handing over to trackmux sync; stopping now")
        self._set_deadline(time.monotonic())
        self._event.set()

    def _set_deadline(self, deadline: float) -> None:
        self.deadline = deadline if self.deadline is None else min(self.deadline, deadline)

    def run(self) -> int:
        for worker in self.workers:
            worker.start()
        self.watch.start()
        self._send({"ready": os.getpid()})
        started_finish = False
        while True:
            wait = PARENT_CHECK if self.deadline is None else max(
                0.0, min(PARENT_CHECK, self.deadline - time.monotonic()))
            self._event.wait(wait)
            self._event.clear()
            self._say_note()
            if self._orphaned is None and self._finish is None and \
                    os.getppid() != self.parent:
                self._orphaned = f"the trainer (pid {self.parent}) is gone"
            if not started_finish and (self._finish is not None or self._orphaned):
                started_finish = True
                self._start_finish()
            # with no backend here (only watchers), the end is the finish
            if (self.workers or started_finish) and all(w.state in ENDED for w in self.workers):
                for worker in self.workers:  # each is past its last report: ending now
                    worker.join(5.0)
                break
            if self.deadline is not None and time.monotonic() >= self.deadline:
                log.warning("trackmux delivery: deadline reached; what is left stays in the "
                            "spool for trackmux sync")
                for worker in self.workers:
                    worker.stop()
                # a worker inside a backend call (an HTTP timeout) is not waited for: the
                # process ends with os._exit, and the spool keeps what was not acknowledged
                end = time.monotonic() + STOP_WAIT
                for worker in self.workers:
                    worker.join(max(0.0, end - time.monotonic()))
                break
        self.watch.stop()
        self._send({"done": True, "acked": {w.name: w.acked for w in self.workers}})
        return 0

    def _start_finish(self) -> None:
        # at least as long as the trainer waits, then the orphan deadline
        waits = float((self._finish or {}).get("wait", 0.0))
        self._set_deadline(time.monotonic() + max(self.orphan_timeout, waits))
        assert self.deadline is not None
        if self._finish is not None:
            target, status = int(self._finish["target"]), str(self._finish["status"])
        else:
            log.warning("trackmux delivery: %s; delivering what it committed", self._orphaned)
            target, status = self._mark_crashed()
        if self.watch.active:  # the findings of the last events go out with them
            target = self.watch.catch_up(target, self.deadline)
        self._send({"settled": target})  # always: the trainer waits for it (host.settled)
        log.info("trackmux delivery: finishing at seq %d (%s)", target, status)
        for worker in self.workers:
            worker.finish(target, status, self.deadline)

    def _mark_crashed(self) -> tuple[int, str]:
        reader = SpoolReader(self.info.run_dir)
        try:
            reader.mark_crashed()
            return reader.last_seq(), "crashed"
        finally:
            reader.close()


class _ForwardWarnings(logging.Handler):
    """Backends' own warnings (a project name mapped, a default output folder chosen) are
    meant for the user, who watches the trainer, not delivery.log: send them there too.
    Problems travel on their own (Reporter listener), so reporting's records are skipped."""

    def __init__(self, host: DeliveryProcess) -> None:
        super().__init__(logging.WARNING)
        self.host = host

    def emit(self, record: logging.LogRecord) -> None:
        # reporting's problems travel on their own; the registry's (a plugin that failed to
        # load, a shared backend name) the trainer said itself when it loaded the plugins
        if record.name.startswith("trackmux") and record.module not in ("reporting",
                                                                         "registry"):
            try:
                self.host._send({"log": [record.levelno, record.getMessage()]})
            except Exception:  # never let logging break delivery
                self.handleError(record)


SCRATCH = "tmp"  # the delivery process's temporary folder, inside the run folder


def _scratch_in_run(run_dir: Path) -> Path:
    """Temporary files of this process and the libraries it runs (mlflow's table staging,
    wandb's media copies, wandb-core) go to ``<run dir>/tmp``, removed when delivery
    ends: nothing is left in /tmp, and a run's files stay in its folder."""
    import tempfile

    scratch = run_dir / SCRATCH
    scratch.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(scratch)
    tempfile.tempdir = str(scratch)
    return scratch


def main(argv: list[str]) -> int:
    control_fd, status_fd = int(argv[1]), int(argv[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's; we drain
    launched = priority.describe()
    problem = priority.lower(priority.wanted(),
                             int(os.environ.get(priority.LAUNCHED_ENV) or 0))
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(process)d %(threadName)s %(levelname)s "
                               "%(name)s: %(message)s")
    if problem:
        log.warning("trackmux delivery: %s", problem)
    log.info("trackmux delivery: started at %s, runs at %s", launched, priority.describe())
    control = os.fdopen(control_fd, "rb")
    status = os.fdopen(status_fd, "wb")
    config = orjson.loads(control.readline())
    scratch = _scratch_in_run(Path(config["info"]["run_dir"]))
    log.info("trackmux delivery: run %s, backends %s", config["info"]["run_id"],
             ", ".join(config["backends"]))
    host = DeliveryProcess(config, status)
    logging.getLogger("trackmux").addHandler(_ForwardWarnings(host))
    signal.signal(signal.SIGTERM, host.on_sigterm)
    signal.signal(signal.SIGUSR1, host.on_handover)
    threading.Thread(target=host.read_control, args=(control,), name="trackmux-control",
                     daemon=True).start()
    code = host.run()
    log.info("trackmux delivery: exiting, acknowledged %s",
             {w.name: w.acked for w in host.workers})
    import shutil

    shutil.rmtree(scratch, ignore_errors=True)
    return code


if __name__ == "__main__":
    exit_code = main(sys.argv)
    # Not sys.exit: a backend library's non-daemon threads or atexit hooks (a request
    # stuck on a hung server) must not keep this process, and its delivery locks, alive.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
