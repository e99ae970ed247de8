"""``--follow``: keep importing live sources as they grow, with the live doctor watching.

Every ``interval`` seconds (0.5 by default) each source run is read from its cursors; a
poll of a source that did not grow costs a ``stat`` per file, so an idle follow stays far
under 1% of a core. Runs that appear under a followed folder (a new TensorBoard run) are
picked up every few polls. The doctor (``TRACKMUX_DOCTOR``, or ``--doctor``) runs on a
thread here, as it does in a live run's delivery process, following each run's spool:
its findings are appended to the spool (so ``trackmux ui``, ``show`` and a later ``sync``
see them) and printed as they come.

``--to NAME[,NAME]`` delivers each run while it is followed (its points and the
doctor's findings) to those backends, on threads here, with the same delivery worker a
live run uses: a webhook or the console for alerts, a tracker to mirror the run.

It ends on Ctrl-C or SIGTERM, or when every source says its run ended (a wandb exit
record, an MLflow run no longer RUNNING); a last read then takes what is left, the
doctor catches up, the delivery to ``--to`` backends finishes (within 10 s; the rest
stays for ``trackmux sync``), and each run is marked ``finished``.
"""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trackmux.core.backends.contract import Backend, RunInfo
from trackmux.core.delivery.host import ThreadDelivery
from trackmux.core.delivery.reporting import Reporter
from trackmux.core.delivery.watch import WatcherSpec, WatchRunner
from trackmux.core.events import FindingEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.importers.base import SourceError
from trackmux.importers.engine import RunImport

INTERVAL = 0.5
#: polls between two looks for new runs under a followed folder
RESCAN_EVERY = 10
CATCH_UP = 10.0


class Follower:
    """The runs of one ``trackmux import --follow``."""

    def __init__(self, discover: Callable[[], list[RunImport]], *,
                 watchers: Sequence[WatcherSpec] = (), interval: float = INTERVAL,
                 say: Callable[[str], None] = print,
                 on_pull: Callable[[RunImport, int], None] | None = None,
                 deliver: Mapping[str, Callable[[], Backend]] | None = None) -> None:
        self.discover = discover
        self.watchers = list(watchers)
        #: backends each run is delivered to while it is followed (``--to``), on threads
        self.deliver = dict(deliver or {})
        self.hosts: dict[Path, ThreadDelivery] = {}
        self.reporter = Reporter()
        self.interval = interval
        self.say = say
        self.on_pull = on_pull
        self.stop = threading.Event()
        self.runs: dict[Path, RunImport] = {}
        self.runners: dict[Path, WatchRunner] = {}
        self._said: set[str] = set()

    def _adopt(self) -> None:
        for run in self.discover():
            if run.dir in self.runs:
                continue
            self.runs[run.dir] = run
            info = RunInfo(run.project, run.name, run.run_id, run.dir, time.time(),
                           ("imported",))
            if self.deliver:
                try:
                    self.hosts[run.dir] = ThreadDelivery(run.dir, info, self.deliver,
                                                         self.reporter)
                except Exception as exc:  # another sync of this run holds a backend
                    self._problem(str(run.dir), f"not delivered live: {exc}")
            if self.watchers:
                runner = WatchRunner(self.watchers, info, alive=lambda: not self.stop.is_set(),
                                     on_found=self._found, on_problem=self._problem)
                self.runners[run.dir] = runner
            self._pull(run)
            if run.dir in self.runners:
                self.runners[run.dir].start()

    def _found(self, findings: list[FindingEvent]) -> None:
        for finding in findings:
            self.say(finding.line())

    def _problem(self, name: str, message: str) -> None:
        line = f"trackmux import: {name}: {message}"
        if line not in self._said:  # a poll that fails the same way is said once
            self._said.add(line)
            self.say(line)

    def _pull(self, run: RunImport) -> None:
        try:
            added = run.pull(live=True)
        except (OSError, sqlite3.Error, SourceError) as exc:  # said once, tried again
            self._problem(str(run.dir), f"cannot write: {type(exc).__name__}: {exc}")
            return
        if added and run.dir in self.runners:
            self.runners[run.dir].notify()
        if self.on_pull is not None:
            self.on_pull(run, added)

    def run(self) -> list[RunImport]:
        """Follow until Ctrl-C, SIGTERM or every source finished; returns the runs."""
        previous = _on_sigterm(self.stop.set)
        try:
            self._adopt()
            polls = 0
            while not self.stop.is_set():
                if self.runs and all(r.source.finished() for r in self.runs.values()):
                    break
                self.stop.wait(self.interval)
                polls += 1
                if polls % RESCAN_EVERY == 0:
                    self._adopt()
                for run in list(self.runs.values()):
                    self._pull(run)
        except KeyboardInterrupt:
            pass
        finally:
            _restore(previous)
        self.stop.set()
        for run in self.runs.values():  # what came in since the last poll
            with contextlib.suppress(KeyboardInterrupt):
                added = run.pull(live=True)
                if added and run.dir in self.runners:
                    self.runners[run.dir].notify()
        deadline = time.monotonic() + CATCH_UP
        for path, runner in self.runners.items():
            runner.catch_up(_last_seq(path), deadline)
            runner.stop(wait=2.0)
        for path, host in self.hosts.items():  # what was read and found, delivered
            target = _last_seq(path)
            finish_by = time.monotonic() + CATCH_UP
            host.request_finish(target, "finished", finish_by)
            host.wait(target, finish_by)
            host.abandon()
        return list(self.runs.values())


def _last_seq(run_dir: Path) -> int:
    reader = SpoolReader(run_dir)
    try:
        return reader.last_seq()
    finally:
        reader.close()


def _on_sigterm(handler: Callable[[], Any]) -> Any:
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, lambda signum, frame: handler())


def _restore(previous: Any) -> None:
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, previous)
