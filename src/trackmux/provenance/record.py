"""Provenance joins each run: cheap sections at ``init()``, the rest on a thread, one event.

Where each part runs (the ``init()`` budget is 50 ms more than without, see
docs/performance.md): :func:`snapshot.snapshot` (copies) in the trainer's thread at
``init()``; git
(status, remote, diff), package versions, CPU model and NVML in a child process
(``probe.py``) started through ``nice -n 10`` and awaited by a bare thread at the
trainer's priority (started without waiting for the OS to schedule it), which also
redacts the command line (the probe redacts the diff as text, after git.py left out the
files secret by name), then writes ``save_code``'s artifact (the entry script redacted
the same way) and appends ONE ``ProvenanceEvent``. Nothing unredacted leaves this
thread: the spool, every backend and the reports get these copies. No thread of the
trainer's process runs at a lower priority: a niced thread that runs Python holds the
GIL at a priority the OS deprioritises, so on a busy machine the trainer's ``log()``
waited for it (issue 34.9: the collector; issue 43 item 17: the helper that ran
``Popen`` at nice 10); only the child process is lowered.
``finish()`` waits for that thread up to its finish hook's deadline (at most 5 s); a run
that ends sooner still gets the event, with the sections not read by then named under
``incomplete``. Nothing here touches ``log()``'s path.
"""

from __future__ import annotations

import _thread
import logging
import os
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from trackmux.core.errors import RunFinishedError
from trackmux.core.events import ProvenanceEvent
from trackmux.core.values import redact
from trackmux.provenance.snapshot import snapshot

log = logging.getLogger("trackmux")
PROBE_TIMEOUT = 60.0
#: the probe process's nice value (below the trainer's 0)
NICE = 10
_collectors: weakref.WeakKeyDictionary[Any, Collector] = weakref.WeakKeyDictionary()


class Collector:
    """One run's provenance: the cheap part now, the slow part on a thread, one event."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.time = time.time()
        self.step = max(run.step, 0)
        self._snapshot = snapshot()  # the only part read in the trainer's thread
        self.data: dict[str, Any] = {
            "attempt": getattr(getattr(run, "attempt", None), "number", 1),
            "command": {"argv": [], "entry": self._snapshot["entry"],
                        "cwd": self._snapshot["cwd"]},
            # a backend copies the entry script into its code record only when this is set
            "save_code": bool(getattr(run, "save_code", False))}
        self.diff = ""
        self._pending = ["command", "python", "host", "env", "git", "packages", "host.cpu",
                         "gpu"]
        self._lock = threading.Lock()
        self._sent = False
        self.done = threading.Event()
        # a bare thread: threading.Thread.start() would block init() until the OS has
        # scheduled the new thread (milliseconds on a loaded machine); this one is not
        # waited for (daemon-like: it never keeps the interpreter alive)
        _thread.start_new_thread(self._main, ())

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the collection (and its event) to end; False on timeout."""
        return self.done.wait(timeout)

    def _main(self) -> None:
        try:
            self._collect()
        finally:
            self.done.set()

    def _collect(self) -> None:
        from trackmux.provenance import collect

        try:
            with self._lock:
                self.data.update(collect.cheap(self._snapshot))
                del self._pending[:4]
            found = self._probe(str(collect.script_dir(self.data)))
            diff = found["diff"]  # redacted by the probe (probe.py): never here, in the GIL
            if diff and not found["git"].get("diff_redacted"):
                diff = redact.redact_text(diff)
                found["git"]["diff_redacted"] = True
            with self._lock:
                self.data["git"] = found["git"]
                self.diff = diff
                self.data["packages"] = found["packages"]
                self.data["host"]["cpu"] = found["cpu"]
                self.data["gpu"] = found["gpu"]
                self._pending.clear()
            if getattr(self.run, "save_code", False):
                self._save_code()
        except Exception as exc:  # provenance must never disturb the run
            log.warning("trackmux: provenance collection failed (%s: %s)",
                        type(exc).__name__, exc)
        self.send()

    @staticmethod
    def _probe(directory: str) -> dict[str, Any]:
        """probe.py in a child process (its work never holds this interpreter's GIL); in
        this thread when a child cannot be started (an embedded interpreter)."""
        import json
        import subprocess
        import sys

        from trackmux.provenance import probe

        try:
            # -S -E: no site import (the trainer's sys.path is handed over on stdin), so
            # the child starts in ~10 ms; it runs at nice 10 (_run_niced)
            with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out:
                given.write(json.dumps(sys.path).encode())
                given.seek(0)
                _run_niced([sys.executable, "-S", "-E", probe.__file__, directory], given,
                           out)
                out.seek(0)
                found: dict[str, Any] = json.loads(out.read())
            return found
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            log.info("trackmux: provenance probe process failed (%s); reading here", exc)
            return probe.probe(directory)

    def _set(self, section: str, value: Any) -> None:
        with self._lock:
            self.data[section] = value

    def _done(self, section: str) -> None:
        with self._lock:
            if section in self._pending:
                self._pending.remove(section)

    def _save_code(self) -> None:
        """The entry script and the uncommitted diff as the artifact ``code``, both
        redacted as text (the diff already is; a script secret by name is left out)."""
        entry = self.data["command"].get("entry")
        with tempfile.TemporaryDirectory(prefix="trackmux-code-") as tmp:
            folder = Path(tmp)
            script = script_copy(entry)
            if script is not None:
                (folder / Path(str(entry)).name).write_text(script, encoding="utf-8")
            if self.diff:
                (folder / "uncommitted.diff").write_text(self.diff, encoding="utf-8")
            if any(folder.iterdir()):
                try:
                    self.run.log_artifact(folder, name="code", type="code", step=self.step)
                except RunFinishedError:
                    return
            else:
                log.info("trackmux: save_code: no entry script file and no diff to store")

    def send(self) -> None:
        """Append the event once (from the thread when done, or from finish()). The append
        is made holding the lock (a queue append, no I/O): finish()'s call, which found
        the thread's send begun, returns only once its event is queued, before the run
        stops taking events; released first, the event was refused as 'finished' and lost
        when the thread's append came after finish()'s wait ran out."""
        with self._lock:
            if self._sent:
                return
            self._sent = True
            data = dict(self.data)
            if self._pending:
                data["incomplete"] = list(self._pending)
            event = ProvenanceEvent(data, self.diff, self.step, self.time)
            try:
                self.run._append(event)
            except RunFinishedError:
                log.info("trackmux: provenance was not recorded: the run finished first")


def script_copy(entry: Any) -> str | None:
    """The entry script's text as a code record may carry it: redacted as text, or a line
    saying it was left out when its name is secret; None without a readable script file."""
    from trackmux.provenance.git import LEFT_OUT, is_secret_file

    if not entry or str(entry).startswith("-m ") or not Path(str(entry)).is_file():
        return None
    if is_secret_file(str(entry)):
        return LEFT_OUT.format(name=Path(str(entry)).name) + "\n"
    try:
        text = Path(str(entry)).read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None
    return redact.redact_text(text)


def _run_niced(args: list[str], given: Any, out: Any) -> None:
    """Run ``args`` (stdin from ``given``, stdout to ``out``: files, so no Python loop
    copies pipes) at nice 10, below the trainer, and wait for it in ``waitpid`` (GIL
    released). Raises ``subprocess.CalledProcessError`` or ``TimeoutExpired`` as
    ``subprocess.run`` does.

    The calling thread keeps the trainer's priority: a thread lowered to nice 10 that runs
    ``Popen``'s Python code holds the GIL, and on a busy machine the OS can leave it off
    the CPU with the GIL for tens of ms while the trainer's ``log()`` waits for it (issue
    43 item 17). The child is lowered instead: through ``nice -n 10`` where the command
    exists (below the trainer from its first instruction), else by the probe itself."""
    import subprocess

    command = [*_nice_prefix(), *args]
    proc = subprocess.Popen(command, stdin=given, stdout=out, stderr=subprocess.DEVNULL)
    try:
        code = proc.wait(PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    if code:
        raise subprocess.CalledProcessError(code, args)


def _nice_prefix() -> list[str]:
    """``["/usr/bin/nice", "-n", "10"]``: what takes the child from this thread's nice value
    to ``NICE`` (nothing when it is there already, or without the command)."""
    from trackmux.core.procs import nice_command

    if os.name != "posix":  # no os.nice
        return []
    try:
        increment = NICE - os.nice(0)  # this thread's value on Linux, the process's elsewhere
    except OSError:
        return []
    return nice_command(increment)


def start(run: Any) -> None:
    """The run start hook: record provenance unless ``run.provenance`` is off."""
    if not getattr(run, "provenance", False):
        return
    _collectors[run] = Collector(run)


def wait_recorded(run: Any, timeout: float) -> bool:
    """Wait up to ``timeout`` s for the run's provenance event to be appended (True when
    it is, or when none is being collected). For a caller that wants the event before
    its first step in the spool, so a console prints the ``[provenance]`` line above the
    steps (``trackmux demo``); training never needs to wait for it."""
    collector = _collectors.get(run)
    return collector is None or collector.join(timeout)


def finish(run: Any, deadline: float) -> None:
    """The run finish hook: give the collector until ``deadline``, then send what it has."""
    collector = _collectors.pop(run, None)
    if collector is None:
        return
    collector.join(max(0.0, deadline - time.monotonic()))
    collector.send()
