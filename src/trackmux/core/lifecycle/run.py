"""The run: what the training loop holds. Thin over events, so a proxy can stand in for it.

``Run.log`` and friends normalise their input, stamp step and wall time, and queue one
event for the spool writer. They do no I/O and call no backend; delivery happens on one
worker thread per backend that reads the spool.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import logging
import os
import queue
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import filelock

from trackmux.core import settings
from trackmux.core.backends.contract import RunInfo, check_max_rows
from trackmux.core.backends.registry import BackendSpec, get_registry
from trackmux.core.delivery.host import ProcessDelivery, ThreadDelivery, stop_orphaned_delivery
from trackmux.core.delivery.reporting import Problem, Reporter
from trackmux.core.delivery.watch import WatcherSpec, WatchRunner, runner_problem_reporter
from trackmux.core.errors import RunFinishedError
from trackmux.core.events import (
    ArtifactEvent,
    ConfigEvent,
    DeferredEvent,
    Event,
    FindingEvent,
    MetricsEvent,
    TableEvent,
    TextEvent,
)
from trackmux.core.lifecycle import exit_status, signals
from trackmux.core.spool import attempts
from trackmux.core.spool.writer import RUN_LOCK, SpoolWriter
from trackmux.core.values import normalize, redact
from trackmux.core.values.intake import Intake

log = logging.getLogger("trackmux")

_start_hooks: list[Callable[[Run], None]] = []


def on_run_start(hook: Callable[[Run], None]) -> None:
    """Call ``hook(run)`` at the end of every new Run's construction, in the trainer's thread.

    This is how wings over core join a run without core naming them (the Ray sink serves
    attached workers this way). A hook that raises is logged and the run goes on."""
    if hook not in _start_hooks:
        _start_hooks.append(hook)


def _announce_start(run: Run) -> None:
    for hook in list(_start_hooks):
        try:
            hook(run)
        except Exception as exc:  # a wing must never stop the run from starting
            log.warning("trackmux: run start hook %s failed (%s: %s)",
                        getattr(hook, "__qualname__", hook), type(exc).__name__, exc)

# -- init hooks: a wing adds tags or config to every run a process starts ----------------
_init_hooks: list[Callable[[list[str], dict[str, Any] | None], dict[str, Any] | None]] = []


def on_run_init(hook: Callable[[list[str], dict[str, Any] | None],
                               dict[str, Any] | None]) -> None:
    """Call ``hook(tags, config)`` in ``init()`` before anything is written, in the caller's
    thread: it may append to ``tags`` and returns the config to use (``config`` itself, a
    copy with more keys, or None). What it adds is checked like the caller's own (a sweep
    trial joins its sweep this way, trackmux/sweeps/join.py). A hook that raises is logged
    and skipped: it never stops a run from starting."""
    if hook not in _init_hooks:
        _init_hooks.append(hook)


def _apply_init_hooks(tags: list[str], config: dict[str, Any] | None
                      ) -> tuple[list[str], dict[str, Any] | None]:
    for hook in list(_init_hooks):
        extra = list(tags)
        try:
            config = hook(extra, config)
        except Exception as exc:  # a wing must never stop the run from starting
            log.warning("trackmux: run init hook %s failed (%s: %s)",
                        getattr(hook, "__qualname__", hook), type(exc).__name__, exc)
            continue
        tags = extra
    return tags, config


_finish_hooks: list[Callable[[Run, float], None]] = []
_wing_methods: dict[str, Callable[..., Any]] = {}


def provide(name: str, function: Callable[..., Any]) -> None:
    """A wing provides what a thin Run method delegates to (``watch``, ``unwatch``,
    ``check_watch``), so core never imports the wing (tests/core/test_house.py)."""
    _wing_methods[name] = function


def _wing(name: str) -> Callable[..., Any]:
    function = _wing_methods.get(name)
    if function is None:
        raise RuntimeError(f"{name} is provided by a trackmux package that is not loaded; "
                           "import trackmux (not only trackmux.core)")
    return function



def on_run_finish(hook: Callable[[Run, float], None]) -> None:
    """Call ``hook(run, deadline)`` when ``finish()`` starts, before the run stops taking
    events, in the finishing thread; ``deadline`` is a ``time.monotonic()`` value the hook
    must not overrun (provenance joins its collector thread here). A hook that raises is
    logged and finish goes on."""
    if hook not in _finish_hooks:
        _finish_hooks.append(hook)


def _announce_finish(run: Run, deadline: float) -> None:
    for hook in list(_finish_hooks):
        try:
            hook(run, deadline)
        except Exception as exc:  # a wing must never stop the run from finishing
            log.warning("trackmux: run finish hook %s failed (%s: %s)",
                        getattr(hook, "__qualname__", hook), type(exc).__name__, exc)


# -- watchers (issue 22): a wing turns an init() argument into the run's watchers ----------
_watch_options: dict[str, tuple[Callable[..., list[WatcherSpec]], tuple[str, ...]]] = {}


def register_watch_option(name: str, resolve: Callable[..., list[WatcherSpec]],
                          takes: Sequence[str] = ()) -> None:
    """Let a wing turn ``init(<name>=value)`` into watchers (the doctor registers
    ``doctor``). ``resolve(value)`` runs in ``init()``, before any I/O: it validates the
    value and raises naming what is wrong; ``value`` is None when the argument was not
    given (the wing reads its environment variable then). ``takes``: other ``init()``
    arguments handed to ``resolve`` as keywords (the doctor takes ``signals``)."""
    _watch_options[name] = (resolve, tuple(takes))


def _resolve_watchers(values: Mapping[str, Any],
                      extras: Mapping[str, Any] | None = None) -> list[WatcherSpec]:
    extras = extras or {}
    taken = {t for _, takes in _watch_options.values() for t in takes}
    for extra, value in extras.items():
        if value is not None and extra not in taken:
            raise ValueError(f"{extra}={value!r}: no installed part of trackmux takes "
                             f"{extra!r}")
    specs: list[WatcherSpec] = []
    for name, value in values.items():
        entry = _watch_options.get(name)
        if entry is None:
            if value not in (None, False, "off"):
                raise ValueError(f"{name}={value!r}: no installed part of trackmux provides "
                                 f"{name!r}")
            continue
        resolve, takes = entry
        specs += resolve(value, **{t: extras.get(t) for t in takes})
    return specs


_live_runs: weakref.WeakSet[Run] = weakref.WeakSet()
#: the order runs started in (a WeakSet has none): attach() picks the newest live run
_births = itertools.count()
# Run names, projects and tags: long enough for any real name, short enough for backends
# (each backend maps longer file names safely; see plugins/file.py).
MAX_NAME_LENGTH = 1000


@dataclass
class FinishSummary:
    """What ``finish()`` achieved before its deadline."""

    status: str
    events: int
    delivered: dict[str, int] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    dropped: int = 0
    #: backends that failed permanently (not retried), with the cause
    failed: dict[str, str] = field(default_factory=dict)
    #: expected limits (a kind a backend cannot show), apart from ``problems``
    notes: list[Problem] = field(default_factory=list)
    #: events (or keys of events) each backend quarantined
    quarantined: dict[str, int] = field(default_factory=dict)
    #: bad input dropped at the door (also in ``problems``, backend "input")
    input_dropped: int = 0

    @property
    def complete(self) -> bool:
        return not self.pending and not self.dropped


def input_problems(intake: Intake) -> list[Problem]:
    """Bad input dropped at the door, as problems of the pseudo-backend ``input``: kind
    names what and which key (``metric 'val/acc'``), count says how often."""
    return [Problem("input", f"{d.what} {d.name}", d.reason, d.count)
            for d in intake.dropped()]


def new_run_id() -> str:
    """Sortable by start time, unique across processes."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:8]


class Run:
    """A live run. Create it with :func:`trackmux.init`."""

    def __init__(self, *, project: str, name: str | None, backends: list[str],
                 config: Mapping[str, Any] | None, root: Path, durability: str,
                 backend_options: Mapping[str, Mapping[str, Any]] | None,
                 finish_timeout: float, tags: Sequence[str], max_spool_bytes: int | None,
                 max_buffered: int = 1_000_000,
                 run_id: str | None = None,
                 resume_plan: attempts.ResumePlan | None = None, delivery: str = "process",
                 orphan_timeout: float = settings.DEFAULT_ORPHAN_TIMEOUT,
                 system_metrics: float | None = None, strict: bool = False,
                 provenance: bool = False, save_code: bool = False,
                 watchers: Sequence[WatcherSpec] = (),
                 on_finding: Callable[[dict[str, Any]], None] | None = None) -> None:
        registry = get_registry()
        specs = [registry.backend(b, (backend_options or {}).get(b))  # unknown names fail
                 for b in backends]  # before any I/O
        options = dict(backend_options or {})
        for key in options:
            if key not in backends:
                raise ValueError(f"backend_options has options for {key!r}, which is not in "
                                 f"backends {backends}")
        for spec in specs:  # bad options fail here, before any I/O or delivery starts
            spec.check_options(options.get(spec.name, {}))
        self.id = run_id or new_run_id()
        self.project = project
        # -- resume (issue 13): an existing run continues under its name, step and start
        resuming = resume_plan is not None and resume_plan.resuming
        earlier = resume_plan.meta if resume_plan is not None and resuming else {}
        name = name or earlier.get("name")
        self.name = name or self.id
        self.backends = list(backends)
        self.dir = root / settings.safe_dirname(project) / settings.safe_dirname(self.id)
        self.finish_timeout = finish_timeout
        self._step = -1
        if resume_plan is not None and resuming:
            self._step = (resume_plan.last_step if resume_plan.rewind_to is None
                          else resume_plan.rewind_to)
        self._finished = False
        self._summary: FinishSummary | None = None
        self._finish_lock = threading.Lock()
        self._finishing_thread: int | None = None
        self._pid = os.getpid()
        self._reporter = Reporter()
        #: bad input: dropped, named once and counted (raised when strict)
        self._intake = Intake(strict)
        self._went_back = False
        self._deliveries: list[ThreadDelivery | ProcessDelivery] = []
        self._sinks: list[Any] = []  # what serves attached workers (trackmux.attach)
        self._watchers = list(watchers)
        self._watch: WatchRunner | None = None  # watchers on a thread here (thread mode)
        #: events that wait for the step of the next log() call (run.watch's gradients,
        #: as wandb.watch attaches them): owner id -> builder of the events at that step
        self._next_log: dict[int, Callable[[int, float], Sequence[Event]]] = {}
        self._findings: list[FindingEvent] = []
        self._findings_lock = threading.Lock()
        self._on_finding = on_finding
        self._finding_queue: queue.SimpleQueue[FindingEvent | None] | None = None
        self._finding_thread: threading.Thread | None = None
        #: issue 45: set (True) when a finding matches the doctor's ``stop_on``; a plain
        #: attribute the loop reads at each step boundary (no I/O, no lock)
        self.should_stop = False
        #: the finding that asked the run to stop, as :meth:`findings` gives it (or None)
        self.stop_reason: dict[str, Any] | None = None
        self._stop_policies = [w.stop for w in self._watchers if w.stop is not None]
        #: every stop of this run, its earlier attempts' first (a resumed run keeps them)
        self._stops: list[dict[str, Any]] = list(earlier.get("stops") or [])
        self._spool = SpoolWriter(self.dir, durability=durability, max_bytes=max_spool_bytes,
                                  max_buffered=max_buffered,
                                  on_commit=self._committed,
                                  meta_source=self._input_meta)
        self._run_lock = filelock.FileLock(str(self.dir / RUN_LOCK), thread_local=False,
                                           mode=0o600)
        try:
            attempts.acquire_run_lock(self._run_lock, self.dir)
        except BaseException:
            self._spool.close(1.0)
            raise
        #: this start of the run (number, pid, host, rewind) as recorded in the spool
        self.attempt = attempts.begin(self.dir, resume_plan.rewind_to if resuming and
                                      resume_plan is not None else None, pid=self._pid)
        self.started_at = float(earlier.get("started_at") or time.time())
        self._info = RunInfo(project, self.name, self.id, self.dir, self.started_at,
                             tuple(tags))
        self._spool.set_meta(
            run_id=self.id, project=project, name=self.name, state="running",
            started_at=self.started_at, pid=self._pid, host=settings.host_name(), user=_user(),
            backends=self.backends, durability=durability, tags=list(tags),
            backend_options=redact.redact(normalize.to_json_value(options)),
            trackmux_version=_version(), attempt=self.attempt.number,
            provenance=provenance,  # issue 25: the wandb backend waits for it (plugins/)
        )
        if self._watchers:  # readers know the run was watched live (no findings = healthy)
            self._spool.set_meta(watchers=[w.target for w in self._watchers],
                                 watcher_options={w.target: dict(w.options)
                                                  for w in self._watchers})
        if self._stop_policies or earlier.get("stop_reason"):
            # this attempt's policy; an earlier attempt's stop stays in ``stops`` only
            self._spool.set_meta(stop_on=[p.describe() if hasattr(p, "describe") else repr(p)
                                          for p in self._stop_policies], stop_reason=None)
        if config is not None:
            self.log_config(config)
        if earlier:  # the crashed attempt's delivery process may still be retrying
            stop_orphaned_delivery(self.dir, earlier, ours=True)
        #: backends that take only the doctor's findings (webhook): their pending events
        #: are counted as findings in finish()'s last line
        self._alert_only = {s.name for s in specs if getattr(s.factory, "capabilities", None)
                            == frozenset({"finding"})}
        self._deliveries = self._start_delivery(specs, options, delivery, orphan_timeout)
        self._sampler: Any = None
        self._nonfinite_keys: set[str] = set()  # histogram keys warned about NaN/inf
        #: log_samples problems (bad cells, columns of the wrong length), reported once
        #: each: message pattern -> how many times it happened
        self.samples_problems: dict[str, int] = {}
        if system_metrics:
            from trackmux.core.lifecycle.system_metrics import SystemSampler

            self._sampler = SystemSampler(self._system_sample, system_metrics, self.dir)
            self._sampler.start()
        #: issue 25: whether trackmux/provenance/ records what produced the run, and whether
        #: it stores the entry script and the uncommitted diff as an artifact
        self.provenance = provenance
        self.save_code = save_code
        _warn_if_concurrent(self)
        self._born = next(_births)
        _live_runs.add(self)
        signals.install(lambda: list(_live_runs))
        exit_status.install()
        _announce_start(self)
        threading.Thread(target=_warm_image_imports, name="trackmux-warm-imports",
                         daemon=True).start()

    # -- the training loop's API ---------------------------------------------------
    def log(self, data: Mapping[str, Any], step: int | None = None) -> None:
        """Log scalar metrics at ``step`` (default: one past the last step). Microseconds."""
        if self._finished:
            raise RunFinishedError(f"run {self.id} is finished; log() is not accepted")
        metrics = self._intake.metrics(data)
        if step is None:
            step = self._step + 1
        elif type(step) is not int or step < 0 or step > normalize.MAX_INT:
            step = self._intake.step(step)
            if step is None:
                return
        if step < self._step and not self._went_back:
            self._step_went_back(step)
        self._step = step
        if self._next_log:
            self._log_deferred(step)
        if metrics and self._pid == os.getpid():
            # one flat tuple, made a MetricsEvent by the writer: the garbage collector stops
            # tracking it at once (spool/writer.py ``Queued``, issue 43 item 17)
            self._spool.append((step, time.time(), *metrics, *metrics.values()))
        elif metrics:
            self._forked()

    def log_table(self, key: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                  step: int | None = None, max_rows: int | None = None) -> None:
        """Log rows of samples (e.g. prompt, response, reward) at ``step`` (default: last).
        ``max_rows``: each backend shows at most this many, chosen evenly over the rows;
        the spool keeps them all."""
        self._check_open()
        intake = self._intake
        name = intake.key(key, "table")
        if name is None:
            return
        try:
            cap = None if max_rows is None else check_max_rows(max_rows)
        except (TypeError, ValueError) as exc:
            intake.drop("table", name, exc)
            return
        table = intake.table(name, columns, rows)
        at = None if table is None else self._attach_step(step)
        if table is not None and at is not None:
            self._append(TableEvent(name, table[0], table[1], at, time.time(), max_rows=cap))

    def log_image(self, key: str, image: Any, step: int | None = None,
                  caption: str | None = None) -> None:
        """Log an image (numpy HW/HWC/CHW, torch, PIL, or a path), encoded once as PNG.
        Checked and copied here; the PNG is made on the spool writer's thread."""
        from trackmux.core.values.media import PendingImage

        self._check_open()
        intake = self._intake
        name = intake.key(key, "image")
        if name is None:
            return
        if caption is not None:
            caption = intake.text(name, caption, "caption")  # a bad caption alone is dropped
        prepared = intake.image_later(name, image)
        at = None if prepared is None else self._attach_step(step)
        if prepared is not None and at is not None:
            self._append(PendingImage(name, prepared, at, time.time(), caption))

    def log_text(self, key: str, text: str, step: int | None = None) -> None:
        """Log free text (markdown) at ``step`` (default: last)."""
        self._check_open()
        name = self._intake.key(key, "text")
        checked = None if name is None else self._intake.text(name, text)
        at = None if checked is None else self._attach_step(step)
        if name is not None and checked is not None and at is not None:
            self._append(TextEvent(name, checked, at, time.time()))

    def log_histogram(self, key: str, values: Any, step: int | None = None,
                      bins: int = 64) -> None:
        """Log a distribution (list, numpy, torch on any device/dtype, or ``(counts, edges)``)
        at ``step`` (default: last). Binned here, in the caller's thread: the spool keeps
        counts, edges and moments, never the values. NaN/inf are counted apart."""
        from trackmux.core.values.histogram import warn_nonfinite

        self._check_open()
        name = self._intake.key(key, "histogram")
        binned = None if name is None else self._intake.histogram(name, values, bins)
        at = None if binned is None else self._attach_step(step)
        if name is None or binned is None or at is None:
            return
        warn_nonfinite(name, binned, self._nonfinite_keys)
        self._append(binned.event(name, at, time.time()))

    def log_samples(self, key: str, samples: Any, step: int | None = None,
                    tokens: Mapping[str, Any] | None = None, *,
                    token_lengths: Any = None, token_dtype: str = "float16",
                    max_rows: int | None = None, strict: bool = False) -> None:
        """Log a batch of samples (the rollout ledger, docs/samples.md) at ``step``.

        ``samples``: columns (``{"prompt": [...], "reward": [...]}``) or rows (a list of
        dicts); ``tokens``: per-token arrays (ragged lists, numpy or torch; 2-D ones padded
        on the right, ``token_lengths`` real values per row). Checked and converted here,
        in the caller's thread; the spool keeps every sample, each backend shows at most
        ``max_rows`` (and its own cap). A bad cell drops its sample, reported once and
        counted in ``samples_problems``; ``strict=True`` raises instead."""
        self._check_open()
        name = self._intake.key(key, "samples")
        at = None if name is None else self._attach_step(step)
        event = None if name is None or at is None else samples_event(
            self._intake, name, name, at, samples, self.samples_problems, tokens=tokens,
            token_lengths=token_lengths, token_dtype=token_dtype, max_rows=max_rows,
            strict=strict)
        if event is not None:
            self._append(event)

    def log_artifact(self, path: str | os.PathLike[str], name: str | None = None,
                     type: str | None = None, step: int | None = None,
                     copy_max_bytes: int | None = None) -> None:
        """Log a file or folder (checkpoint, eval outputs, resolved config) as ``name``.

        Reads and hashes every file in the caller's thread (not for the inner loop): files
        up to ``copy_max_bytes`` (default 50 MB) are copied into the run folder by hash,
        larger ones referenced where they are (see docs/values.md). A missing, empty or
        unreadable path, or a bad name, type or limit, is bad input: dropped, named and
        counted (strict raises)."""
        if self._finished:
            raise RunFinishedError(f"run {self.id} is finished; no more events are accepted")
        at = self._attach_step(step)
        if at is None:  # a bad step: dropped and named like any bad input
            return
        collected = self._intake.artifact(path, name, "artifact" if type is None else type,
                                          self.dir, copy_max_bytes)
        if collected is not None:
            art_name, art_type, source, files = collected
            self._append(ArtifactEvent(art_name, art_type, source, files, at, time.time()))

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Record hyperparameters (nested allowed; secrets redacted before anything is kept)."""
        self._check_open()
        checked = self._intake.config(config)
        if checked is not None:
            self._append(ConfigEvent(redact.redact(checked), max(self._step, 0), time.time()))

    def watch(self, model: Any, log: str = "gradients", every: int = 100,
              bins: int = 64) -> Any:
        """Log per-layer histograms and norms of ``model``'s gradients and/or parameters
        every ``every`` optimizer steps (issue 25: trackmux/watch/, docs/provenance.md)."""
        return _wing("watch")(self, model, log=log, every=every, bins=bins)

    def unwatch(self, model: Any = None) -> None:
        """Stop watching ``model`` (None: every model this run watches)."""
        _wing("unwatch")(self, model)

    @property
    def step(self) -> int:
        """The last step used (-1 before the first log)."""
        return self._step

    def problems(self) -> list[Problem]:
        """Problems seen so far: backends' (each reported once in the log), then bad input
        dropped at the door (backend ``input``, with counts); an empty list means healthy
        (expected limits are in :meth:`notes`)."""
        return self._reporter.problems() + input_problems(self._intake)

    def notes(self) -> list[Problem]:
        """Expected limits seen so far, e.g. an event kind a backend cannot show."""
        return self._reporter.notes()

    def delivery(self) -> dict[str, tuple[int, int]]:
        """Per backend: (acknowledged seq, last committed seq)."""
        last = self._spool.last_seq
        return {name: (acked, last) for name, acked in self._acked().items()}

    def findings(self) -> list[dict[str, Any]]:
        """What the run's watchers (the doctor) found so far, oldest first: dicts with
        ``rule``, ``severity``, ``step``, ``keys``, ``message``, ``id`` ..., one per finding
        id in its latest state (``on_finding`` is called with every update too)."""
        from trackmux.core.events import latest_findings

        with self._findings_lock:
            return [f.as_dict() for f in latest_findings(self._findings)]

    @property
    def delivery_pid(self) -> int | None:
        """The pid of this run's delivery process (None in thread mode)."""
        for host in self._deliveries:
            if isinstance(host, ProcessDelivery):
                return host.pid
        return None

    # -- lifecycle -----------------------------------------------------------------
    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until every event logged so far is committed to the spool, where a SIGKILL
        cannot take it (the default durability may lose the last 0.5 s of ``log()``).

        For a trainer's own checkpoints: flush before writing one, and a resume from it
        finds every step up to it (the verl drop-in does so). Blocks for one commit, not
        for delivery to backends (``finish()`` waits for that). False if ``timeout``
        passed first, or in a forked child, whose spool belongs to the parent."""
        budget = None if timeout is None else settings.finish_timeout(timeout)
        if self._pid != os.getpid():
            return False
        return self._spool.flush(budget)

    def finish(self, timeout: float | None = None, exit_code: int = 0) -> FinishSummary:
        """Deliver what can be delivered within ``timeout`` seconds, then close. Idempotent.

        What is not delivered by then stays in the spool and is reported with the
        ``trackmux sync`` command that delivers it. Called again from a signal handler
        while this thread is already inside ``finish()``, it returns at once with the
        progress so far (status "finishing") instead of deadlocking."""
        exit_code = normalize.exit_code(exit_code)  # checked before any state changes
        if timeout is not None:
            settings.finish_timeout(timeout)
        if self._summary is not None:
            return self._summary
        if self._finishing_thread == threading.get_ident():
            return self._progress_summary("finishing")
        with self._finish_lock:
            if self._summary is not None:
                return self._summary
            self._finishing_thread = threading.get_ident()
            try:
                self._summary = self._finish(timeout, exit_code)
            finally:
                self._finishing_thread = None
            return self._summary

    def _finish(self, timeout: float | None, exit_code: int) -> FinishSummary:
        if self._pid == os.getpid() and _finish_hooks:
            _announce_finish(self, time.monotonic() + min(5.0, settings.finish_timeout(
                timeout if timeout is not None else self.finish_timeout) / 2))
        if self._next_log:  # the last watched step's gradients, after the last log()
            self._log_deferred(self._step + 1)
        self._finished = True
        if self._sampler is not None:
            self._sampler.stop()
        if self._pid != os.getpid():
            return FinishSummary("forked", 0)
        budget = settings.finish_timeout(timeout if timeout is not None
                                         else self.finish_timeout)
        deadline = time.monotonic() + budget
        status = "finished" if exit_code == 0 else "failed"
        if self.stop_reason is not None and exit_code == 0:
            status = "stopped"  # ended cleanly after the doctor asked it to (issue 45)
        for sink in self._sinks:  # attached workers: their last flush, then closed
            sink.close(deadline)
        self._spool.set_meta(state=status, finished_at=time.time(), exit_code=exit_code)
        self._spool.flush(budget)
        target = self._spool.last_seq
        if self._watch is not None:  # thread mode: the last events' findings go out too
            target = self._watch.catch_up(target, deadline)
            self._watch.stop(wait=max(0.1, min(5.0, deadline - time.monotonic())))
        for host in self._deliveries:  # the delivery process first: its watchers settle
            if isinstance(host, ProcessDelivery):
                host.request_finish(target, status, deadline)
                target = max(target, host.settled(target, deadline))
        for host in self._deliveries:
            if not isinstance(host, ProcessDelivery):
                host.request_finish(target, status, deadline)
        for host in self._deliveries:
            host.wait(target, deadline)
        acked = self._acked()
        later = [note for note in (host.abandon() for host in self._deliveries) if note]
        # Events still queued when the deadline came (a burst right before a short
        # timeout) are committed now, after delivery stopped: they count as pending.
        self._spool.close(max(0.5, deadline - time.monotonic()))
        # the watchers' findings (appended by the delivery process) count as events too:
        # a backend that could not take them is pending, not complete
        total = max(self._spool.last_seq + self._spool.queued, target)
        pending = {name: total - n for name, n in acked.items() if n < total}
        self._run_lock.release()
        _live_runs.discard(self)
        if self._finding_queue is not None:
            self._finding_queue.put(None)
        if self._finding_thread not in (None, threading.current_thread()):
            # every finding is handed to on_finding before finish() returns (a script that
            # exits next would end the daemon thread mid-queue), up to the deadline
            self._finding_thread.join(max(0.1, deadline - time.monotonic()))
        summary = FinishSummary(status, total, acked, pending, self.problems(),
                                self._spool.status.dropped, *self._outcomes(),
                                input_dropped=self._intake.total)
        if pending:
            names = ",".join(pending)
            log.warning("trackmux: run %s finished with undelivered events %s; they are "
                        "kept in the spool. Deliver them with: trackmux sync %s --to %s",
                        self.id, pending, self.dir, names)
            for note in later:  # one line: what goes on after exit, how long, how to watch
                log.warning("trackmux: run %s: %s", self.id, note)
            self._say_undelivered_findings(pending, acked)
        if summary.dropped:
            log.error("trackmux: run %s dropped %d events: %s", self.id, summary.dropped,
                      self._spool.status.drop_causes())
        if summary.input_dropped:
            log.warning("trackmux: run %s dropped bad input at the door: %s", self.id,
                        "; ".join(f"{d.what} {d.name} x{d.count}"
                                  for d in self._intake.dropped()[:10]))
        return summary

    def _say_undelivered_findings(self, pending: dict[str, int], acked: dict[str, int]
                                  ) -> None:
        """The last line for an alert backend that is behind (a dead webhook): how many
        findings, and what happens to them now (retried in the background, up to when)."""
        behind = {name: acked.get(name, 0) for name in pending if name in self._alert_only}
        if not behind:
            return
        from trackmux.core.events import FindingEvent
        from trackmux.core.spool.reader import SpoolReader

        try:
            reader = SpoolReader(self.dir)
            try:
                seqs = [e.seq for e in reader.events_of_kind("finding")
                        if isinstance(e, FindingEvent)]
            finally:
                reader.close()
        except Exception as exc:  # a line less, never an error at finish
            log.debug("trackmux: findings not counted: %s", exc)
            return
        background = [h.background_seconds() for h in self._deliveries
                      if isinstance(h, ProcessDelivery)]
        seconds = next((b for b in background if b is not None), None)
        for name, done in behind.items():
            count = sum(1 for seq in seqs if seq > done)
            if not count:
                continue
            then = (f"retrying in the background up to {seconds:.0f} s "
                    f"(TRACKMUX_ORPHAN_TIMEOUT; SIGTERM to the delivery process stops it), "
                    f"then kept in the spool" if seconds is not None else "kept in the spool")
            log.warning("trackmux: run %s: %d finding%s not delivered to %s; %s: trackmux sync "
                        "%s --to %s", self.id, count, "" if count == 1 else "s", name, then,
                        self.dir, name)

    def _terminated(self) -> None:
        """SIGTERM with its default action is about to end this process: commit what is
        queued and mark the run failed; the delivery process delivers the rest."""
        if self._finished or self._pid != os.getpid():
            return
        self._finished = True

        def commit() -> None:
            self._spool.set_meta(state="failed", finished_at=time.time(),
                                 exit_code=signals.SIGTERM_EXIT_CODE)
            self._spool.close(signals.FLUSH_SECONDS)

        # On another thread: the signal may have interrupted this thread inside append()
        # while it held the spool's lock; then the wait below ends at its bound.
        worker = threading.Thread(target=commit, name="trackmux-sigterm", daemon=True)
        worker.start()
        worker.join(signals.FLUSH_SECONDS + 0.5)

    def _progress_summary(self, status: str) -> FinishSummary:
        total = self._spool.last_seq + self._spool.queued
        acked = self._acked()
        return FinishSummary(status, total, acked,
                             {name: total - n for name, n in acked.items() if n < total},
                             self.problems(), self._spool.status.dropped,
                             *self._outcomes(), input_dropped=self._intake.total)

    def _outcomes(self) -> tuple[dict[str, str], list[Problem], dict[str, int]]:
        """Backends that failed for good (with the cause), notes, quarantined counts."""
        failed: dict[str, str] = {}
        quarantined: dict[str, int] = {}
        for host in self._deliveries:
            failed.update(host.failed())
            quarantined.update(host.quarantined())
        return failed, self._reporter.notes(), quarantined

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.finish(exit_code=_block_exit_code(exc))

    def __repr__(self) -> str:
        return f"<trackmux.Run {self.project}/{self.id} backends={self.backends}>"

    # -- internals -------------------------------------------------------------------
    def _attach_step(self, step: object) -> int | None:
        """The step of a table, image, text ...: the last one by default; None (the call
        is dropped) for a bad one."""
        return max(self._step, 0) if step is None else self._intake.step(step)

    def _check_open(self) -> None:
        if self._finished:
            raise RunFinishedError(f"run {self.id} is finished; no more events are accepted")

    def _step_went_back(self, step: int) -> None:
        """Said once per run: the data is kept (a rewind, an eval loop with its own steps),
        but some backends show only the latest value of a step or refuse earlier ones."""
        self._went_back = True
        log.warning("trackmux: run %s: log() went back from step %d to step %d; the data is "
                    "kept (said once per run). wandb ignores steps below its last one; "
                    "after restoring a checkpoint use init(run_id=..., resume='allow', "
                    "rewind_to=N)", self.id, self._step, step)

    def _at_next_log(self, owner: object, build: Callable[[int, float], Sequence[Event]]
                     ) -> None:
        """Log ``build(step, time)``'s events at the step of the next ``log()`` call (the
        watch wing: a step's gradients line up with that step's loss). A later call of the
        same ``owner`` replaces its pending one; what is pending at ``finish()`` is logged
        at the step after the last."""
        self._next_log[id(owner)] = build

    def _log_deferred(self, step: int) -> None:
        pending, self._next_log = self._next_log, {}
        if self._pid != os.getpid():
            return
        now = time.time()
        for build in pending.values():
            try:
                events = build(step, now)
            except Exception as exc:  # a tracker never kills training
                log.warning("trackmux: run %s: deferred events could not be built (%s: %s)",
                            self.id, type(exc).__name__, exc)
                continue
            for event in events:
                self._spool.append(event)

    def _input_meta(self) -> dict[str, Any] | None:
        """For the spool writer, at each commit: the bad-input counts when they changed."""
        changed = self._intake.changed()
        return None if changed is None else {"input_dropped": changed}

    def _append(self, event: Event | DeferredEvent) -> None:
        if self._finished:
            raise RunFinishedError(f"run {self.id} is finished; no more events are accepted")
        if self._pid != os.getpid():
            self._forked()
            return
        self._spool.append(event)

    def _append_stamped(self, event: Event) -> None:
        """Append an event an attached worker already normalised and stamped (its step and
        wall time are kept; this run's own step is not moved)."""
        self._spool.append(event)

    def _count_dropped(self, count: int) -> None:
        """Count events attached workers had to drop, in the run's ``dropped_events``."""
        self._spool.count_attached_drops(count)

    def _system_sample(self, data: dict[str, float]) -> None:
        """From the sampler thread: one metrics event at the run's current step."""
        if not self._finished and self._pid == os.getpid():
            self._spool.append(MetricsEvent(data, max(self._step, 0), time.time()))

    def _committed(self, last_seq: int) -> None:
        for host in self._deliveries:
            host.notify()
        if self._watch is not None:
            self._watch.notify()

    def _found(self, findings: list[FindingEvent]) -> None:
        """From the delivery monitor (or the watch thread): findings are in the spool.
        Wake the backends here (the console), keep them, hand them to ``on_finding``."""
        for host in self._deliveries:
            if not isinstance(host, ProcessDelivery):
                host.notify()
        with self._findings_lock:
            self._findings.extend(findings)
        if self._stop_policies and not self.should_stop and not self._finished:
            self._consider_stop(findings)  # a run already finishing has nothing to stop
        if self._on_finding is None:
            return
        if self._finding_queue is None:
            self._finding_queue = queue.SimpleQueue()
            self._finding_thread = threading.Thread(
                target=self._call_on_finding, args=(self._finding_queue,),
                name="trackmux-on-finding", daemon=True)
            self._finding_thread.start()
        for finding in findings:
            self._finding_queue.put(finding)

    def _consider_stop(self, findings: list[FindingEvent]) -> None:
        """Ask the loop to stop on the first finding the stop policy names: the reason is
        set before the flag (who sees the flag sees why), recorded in the spool's meta
        (``stop_reason``, and ``stops``, the run's history across attempts) and said once.
        A policy that raises is reported and never reaches the loop."""
        for finding in findings:
            found = finding.as_dict()
            try:
                wanted = any(policy(found) for policy in self._stop_policies)
            except Exception as exc:
                self._reporter.report("doctor", "stop_on", f"the stop policy raised "
                                      f"{type(exc).__name__}: {exc}")
                return
            if not wanted:
                continue
            self.stop_reason = found
            self.should_stop = True
            self._stops.append({"attempt": self.attempt.number, "step": self._step,
                                "at": time.time(), "finding": found})
            self._spool.set_meta(stop_reason=found, stops=self._stops)
            log.warning("trackmux: run %s: the doctor asks the run to stop (stop_on): %s",
                        self.id, finding.line())
            return

    def _call_on_finding(self, findings: queue.SimpleQueue[FindingEvent | None]) -> None:
        """The user's callback, on a thread of its own: a slow one delays nothing else."""
        assert self._on_finding is not None
        while (finding := findings.get()) is not None:
            try:
                self._on_finding(finding.as_dict())
            except Exception as exc:
                self._reporter.report("doctor", "on_finding",
                                      f"the on_finding callback raised {type(exc).__name__}: "
                                      f"{exc}")

    def _acked(self) -> dict[str, int]:
        acked: dict[str, int] = {}
        for host in self._deliveries:
            acked.update(host.acked())
        return {name: acked.get(name, 0) for name in self.backends}

    def _start_delivery(self, specs: list[BackendSpec], options: Mapping[str, Any],
                        mode: str, orphan_timeout: float
                        ) -> list[ThreadDelivery | ProcessDelivery]:
        """Backends a fresh interpreter can build go to the delivery process (unless
        ``mode`` is "thread"); the others (registered at run time, or ``in_trainer``)
        are delivered on threads here."""
        remote = {s.name: dict(options.get(s.name, {})) for s in specs
                  if mode == "process" and s.portable}
        local = {s.name: functools.partial(s.factory, dict(options.get(s.name, {})))
                 for s in specs if s.name not in remote}
        hosts: list[ThreadDelivery | ProcessDelivery] = []
        watch_there = mode == "process" and bool(self._watchers)
        if remote or watch_there:
            try:
                hosts.append(ProcessDelivery(self.dir, self._info, remote, self._reporter,
                                             orphan_timeout=orphan_timeout,
                                             watchers=self._watchers, on_found=self._found))
            except OSError as exc:
                watch_there = False
                log.warning("trackmux: cannot start a delivery process (%s); delivering on "
                            "threads of this process instead", exc)
                by_name = {s.name: s for s in specs}
                local.update({name: functools.partial(by_name[name].factory, opts)
                              for name, opts in remote.items()})
        if local:
            hosts.insert(0, ThreadDelivery(self.dir, self._info, local, self._reporter))
        if self._watchers and not watch_there:  # thread mode: the watchers run here too
            self._watch = WatchRunner(self._watchers, self._info,
                                      alive=lambda: not self._finished, on_found=self._found,
                                      on_problem=runner_problem_reporter(self._reporter.report))
            self._watch.start()
        self._spool.set_meta(delivery=mode, delivery_pid=next(
            (h.pid for h in hosts if isinstance(h, ProcessDelivery)), None))
        return hosts

    _fork_warned = False

    def _forked(self) -> None:
        if not Run._fork_warned:
            Run._fork_warned = True
            log.warning("trackmux: run %s was created in process %d; calls from forked "
                        "process %d are ignored. Call trackmux.init() in the child for its "
                        "own run.", self.id, self._pid, os.getpid())



def samples_event(intake: Intake, name: str, stored_key: str, step: int, samples: Any,
                  problems: Any, *, tokens: Any, token_lengths: Any, token_dtype: str,
                  max_rows: int | None, strict: bool) -> Any:
    """One ``log_samples`` call as a SamplesEvent under ``stored_key``, for Run and the
    attached handle alike: a bad cell drops its sample (reported once, counted in
    ``problems``); a call that is not a batch at all is dropped and counted (None);
    ``strict`` (or the run's strict mode) raises instead."""
    # the spool writer encodes the event with samplepack: import it here, in the caller's
    # thread, so the writer thread never compiles a module while the trainer compiles
    # another (CPython 3.11.7 can then raise "AST constructor recursion depth mismatch"
    # in the writer, which dropped the batch)
    from trackmux.core.spool import samplepack  # noqa: F401
    from trackmux.core.values import samples as samples_mod

    strict = strict or intake.strict
    try:
        cap = None if max_rows is None else check_max_rows(max_rows)
        event, found = samples_mod.to_event(
            stored_key, samples, step, time.time(), tokens=tokens, token_lengths=token_lengths,
            token_dtype=token_dtype, max_rows=cap, strict=strict)
    except (TypeError, ValueError, OverflowError) as exc:
        if strict and isinstance(exc, OverflowError):  # named, never a bare overflow
            raise ValueError(f"log_samples {name!r}: {exc}") from None
        if strict:
            raise
        intake.drop("samples", name, exc, "the whole call is dropped")
        return None
    if found:
        samples_mod.report_once(found, name, problems, log)
    return event


class DisabledRun:
    """What non-zero ranks get by default: the same API, checking input with the same
    policy as Run (drop, name once, count; raise when strict), keeping nothing."""

    def __init__(self, project: str, name: str | None, reason: str,
                 strict: bool = False) -> None:
        self.id = ""
        self.project = project
        self.name = name or ""
        self.backends: list[str] = []
        self.dir: Path | None = None
        self.reason = reason
        self._step = -1
        self._intake = Intake(strict, where=reason.split(":")[0])
        #: as on Run; never set here: the rank that holds the run decides (integrations
        #: share its decision with the other ranks)
        self.should_stop = False
        self.stop_reason: dict[str, Any] | None = None

    def log(self, data: Mapping[str, Any], step: int | None = None) -> None:
        self._intake.metrics(data)
        if step is None:
            self._step += 1
        else:
            checked = self._intake.step(step)
            if checked is not None:
                self._step = checked

    # The same checks as Run (rank 0), so a bug shows on every rank, not only on rank 0.
    def log_table(self, key: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                  step: int | None = None, max_rows: int | None = None) -> None:
        name = self._intake.key(key, "table")
        if name is None:
            return
        if max_rows is not None:
            try:
                check_max_rows(max_rows)
            except (TypeError, ValueError) as exc:
                self._intake.drop("table", name, exc)
                return
        if self._intake.table(name, columns, rows) is not None:
            self._check_step(step)

    def log_image(self, key: str, image: Any, step: int | None = None,
                  caption: str | None = None) -> None:
        name = self._intake.key(key, "image")
        if name is None:
            return
        if caption is not None:
            self._intake.text(name, caption, "caption")
        if self._intake.image_later(name, image) is not None:
            self._check_step(step)

    def log_text(self, key: str, text: str, step: int | None = None) -> None:
        name = self._intake.key(key, "text")
        if name is not None and self._intake.text(name, text) is not None:
            self._check_step(step)

    def log_histogram(self, key: str, values: Any, step: int | None = None,
                      bins: int = 64) -> None:
        from trackmux.core.values.histogram import check_bins

        name = self._intake.key(key, "histogram")
        if name is None:
            return
        try:  # the values are not binned: nothing would keep them
            check_bins(bins)
        except (TypeError, ValueError) as exc:
            self._intake.drop("histogram", name, exc)

    def log_samples(self, key: str, samples: Any, step: int | None = None,
                    tokens: Mapping[str, Any] | None = None, *,
                    token_lengths: Any = None, token_dtype: str = "float16",
                    max_rows: int | None = None, strict: bool = False) -> None:
        from trackmux.core.values import samples as samples_mod

        name = self._intake.key(key, "samples")  # accepts and refuses what Run does
        if name is None:
            return
        try:
            if max_rows is not None:
                check_max_rows(max_rows)
            samples_mod.to_event(name, samples, 0, 0.0, tokens=tokens,
                                 token_lengths=token_lengths, token_dtype=token_dtype,
                                 strict=strict or self._intake.strict)
        except (TypeError, ValueError) as exc:
            if strict:
                raise
            self._intake.drop("samples", name, exc, "the whole call is dropped")
            return
        self._check_step(step)

    def log_artifact(self, path: str | os.PathLike[str], name: str | None = None,
                     type: str | None = None, step: int | None = None,
                     copy_max_bytes: int | None = None) -> None:
        from trackmux.core.values import artifacts

        try:  # checks the arguments as Run does; reads no file
            artifacts.copy_limit(copy_max_bytes)
            if name is not None:
                artifacts.check_name(name, "name")
            if type is not None:
                artifacts.check_name(type, "type")
        except (TypeError, ValueError) as exc:
            self._intake.drop("artifact", name if isinstance(name, str) else path, exc,
                              "the call is dropped")

    def log_config(self, config: Mapping[str, Any]) -> None:
        self._intake.config(config)

    def watch(self, model: Any, log: str = "gradients", every: int = 100,
              bins: int = 64) -> None:
        """Checks the arguments as Run.watch does; watches nothing (no hook is added)."""
        _wing("check_watch")(model, log, every, bins)

    def unwatch(self, model: Any = None) -> None:
        """Nothing is watched on a disabled run."""

    def _check_step(self, step: object) -> None:
        if step is not None:
            self._intake.step(step)

    @property
    def step(self) -> int:
        return self._step

    def problems(self) -> list[Problem]:
        """Bad input this rank dropped (nothing else happens here)."""
        return input_problems(self._intake)

    def findings(self) -> list[dict[str, Any]]:
        return []

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Nothing is kept on this rank, so nothing waits; ``timeout`` checked as on Run."""
        if timeout is not None:
            settings.finish_timeout(timeout)
        return True

    def finish(self, timeout: float | None = None, exit_code: int = 0) -> FinishSummary:
        normalize.exit_code(exit_code)
        if timeout is not None:
            settings.finish_timeout(timeout)
        return FinishSummary("disabled", 0, problems=self.problems(),
                             input_dropped=self._intake.total)

    def __enter__(self) -> DisabledRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()


def init(project: str | None = None, name: str | None = None,
         backends: Sequence[str] | str | None = None, config: Mapping[str, Any] | None = None,
         *, dir: str | os.PathLike[str] | None = None, durability: str = "default",
         backend_options: Mapping[str, Mapping[str, Any]] | None = None,
         timeout: float | None = None, tags: Sequence[str] = (),
         max_spool_bytes: int | None = None, max_buffered: int | None = None,
         all_ranks: bool = False, run_id: str | None = None, resume: str = "never",
         rewind_to: int | None = None, delivery: str | None = None,
         orphan_timeout: float | None = None, system_metrics: bool | float | None = None,
         strict: bool | None = None, provenance: bool | None = None,
         save_code: bool = False, doctor: Any = None,
         on_finding: Callable[[dict[str, Any]], None] | None = None,
         signals: Mapping[str, str | Sequence[str]] | None = None
         ) -> Run | DisabledRun:
    """Start a run: a spool under ``dir`` and one delivery worker per backend.

    ``backends``: names (or a comma string); None reads ``TRACKMUX_BACKENDS``, then uses
    ``["console"]``. Only rank 0 (``RANK``/``LOCAL_RANK``) creates a run unless
    ``all_ranks=True``; other ranks get a :class:`DisabledRun`. With ``all_ranks=True``
    each rank gets its own run (its own run id; put the rank in ``name`` if you want it
    shown) -- frameworks that already pick the logging process pass it too.

    ``name``: what the UI, the CLI and every backend call the run; None reads
    ``TRACKMUX_RUN_NAME`` (a sweep agent sets it per trial), else the run id names it.

    ``delivery``: "process" (default; ``TRACKMUX_DELIVERY``) runs the backends in a
    delivery process beside this one, so their libraries never share the training loop's
    interpreter; "thread" keeps them on threads here, for places that cannot spawn a
    process. ``orphan_timeout`` (``TRACKMUX_ORPHAN_TIMEOUT``, 600 s): how long that
    process keeps delivering after this one finished or died.

    Resume (docs/guarantees.md): ``run_id`` names the run's folder under ``dir/project``.
    ``resume="allow"`` continues that run if it exists (same spool, same remote runs, one
    attempt more) and starts it otherwise; ``"must"`` fails if it does not exist; ``"never"``
    (default) fails if it does. ``rewind_to=N`` (with allow/must) supersedes every event of
    earlier attempts with step > N, e.g. the steps re-done after restoring a checkpoint.

    ``system_metrics``: True (every 10 s) or seconds samples CPU, memory, disk, network
    and GPUs under ``system/...`` (needs ``trackmux[system]``; None reads
    ``TRACKMUX_SYSTEM_METRICS``).

    ``strict``: bad input (a ``None`` metric, a str, a bad key, table row, image ...) raises
    ``TypeError``/``ValueError`` into the caller. By default (False; None reads
    ``TRACKMUX_STRICT``) it is dropped, named once in a warning, counted in the run's
    problems, and the rest of the call is kept: a tracker never kills training.
    ``provenance`` (default on; ``TRACKMUX_PROVENANCE=0`` turns it off): record the git
    state, command line, packages, host and GPUs once (docs/provenance.md).
    ``save_code=True`` also stores the entry script and the uncommitted diff as the
    artifact ``code``.
    ``doctor`` (docs/doctor.md): watches the run for RL failure modes in the delivery
    process and appends findings that every backend shows. None reads ``TRACKMUX_DOCTOR``
    (default: on); False or "off"; True or "on" for the default rules; a dict of per-rule
    overrides; or a path to a TOML or YAML rules file. Checked here, naming a bad rule,
    threshold or pattern. ``on_finding(dict)`` is called with each finding, and each
    update of one that grows (same ``id``, next ``revision``), on a thread of this
    process, every one before ``finish()`` returns (within its timeout);
    ``run.findings()`` lists them, one per id in its latest state. ``signals``: which of
    your keys carry which of the doctor's signals, ``{"reward": "my/return", "kl":
    ["kl_a", "kl_b"]}``; a declared signal is read from those keys only (docs/doctor.md
    "Declaring your keys"); an unknown signal or a key that is not a string is refused
    here. The doctor's key ``stop_on`` (else
    ``TRACKMUX_DOCTOR_STOP_ON``): ``"critical"``, a list of rule names, or False (default)
    sets ``run.should_stop`` and ``run.stop_reason`` when a finding matches; the loop saves
    and ends at a step boundary and the run ends ``stopped`` (docs/doctor.md).
    """
    project = normalize.check_name(project or os.environ.get("TRACKMUX_PROJECT") or "default",
                                   "project", MAX_NAME_LENGTH)
    name = settings.run_name(name)
    if name is not None and name != "":  # "" names the run by its id, as None does
        name = normalize.check_name(name, "name", MAX_NAME_LENGTH)
    if isinstance(tags, (str, bytes)) or not isinstance(tags, Sequence):
        raise TypeError(f"tags must be a list of str, got {type(tags).__name__}")
    tags = [normalize.check_name(t, f"tags[{i}]", MAX_NAME_LENGTH) for i, t in enumerate(tags)]
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping, got {type(config).__name__}")
    # a config the spool cannot store fails here, not in the writer
    checked: dict[str, Any] | None = (None if config is None
                                      else normalize.to_json_value(config))
    if _init_hooks:  # they get the checked copy (a cycle was named at its own path above)
        added, checked = _apply_init_hooks(list(tags), checked)
        tags += [normalize.check_name(t, f"tags[{i}]", MAX_NAME_LENGTH)
                 for i, t in enumerate(added[len(tags):], start=len(tags)) if t not in tags]
        if checked is not None:  # what the hooks added is checked the same way
            checked = normalize.to_json_value(checked)
    config = checked
    run_id = attempts.check_args(run_id, resume, rewind_to)
    if on_finding is not None and not callable(on_finding):
        raise TypeError(f"on_finding must be callable, got {type(on_finding).__name__}")
    watchers = _resolve_watchers({"doctor": doctor}, {"signals": signals})
    names = settings.backends_from(backends)
    mode = settings.delivery_mode(delivery)
    orphan = settings.orphan_timeout(orphan_timeout)
    from trackmux.core.lifecycle import system_metrics as system

    sample_every = (system.from_env() if system_metrics is None
                    else system.interval_of(system_metrics))
    if sample_every is not None:
        system.load_psutil()  # a missing extra fails here, before any I/O
    strict = settings.strict(strict)
    record = settings.provenance(provenance)
    if not isinstance(save_code, bool):
        raise TypeError(f"save_code must be True or False, got {type(save_code).__name__}")
    rank = settings.rank()
    if rank != 0 and not all_ranks:
        return DisabledRun(project, name, f"rank {rank}: only rank 0 creates a run", strict)
    max_bytes = max_spool_bytes
    env_cap = os.environ.get("TRACKMUX_MAX_SPOOL_BYTES")
    if max_bytes is None and env_cap:
        max_bytes = int(env_cap)
    root = settings.spool_root(dir)
    resume_plan = attempts.plan(root, project, run_id, resume, rewind_to)
    return Run(project=project, name=name, backends=names, config=config,
               root=root, durability=durability, run_id=run_id, resume_plan=resume_plan,
               backend_options=backend_options,
               finish_timeout=settings.finish_timeout(timeout), tags=list(tags),
               max_spool_bytes=max_bytes,
               max_buffered=settings.positive_int("max_buffered", max_buffered,
                                                  "TRACKMUX_MAX_BUFFERED", 1_000_000),
               delivery=mode, orphan_timeout=orphan, system_metrics=sample_every,
               strict=strict, provenance=record, save_code=save_code,
               watchers=watchers, on_finding=on_finding)



# A fork while the warm-up thread holds an import lock would leave the child waiting on
# that lock forever (the thread does not exist in the child): fork waits for the warm-up.
_warm_lock = threading.Lock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_warm_lock.acquire, after_in_parent=_warm_lock.release,
                        after_in_child=_warm_lock.release)


def _warm_image_imports() -> None:
    """Import Pillow off the trainer's thread, so the first log_image() does not pay for it.

    Only the PNG writer and Pillow's common formats (``preinit``, 45 ms of CPU here):
    ``Image.init()`` would load every format plugin, 180 ms holding the GIL while the
    loop starts (B7), and ``Image.open`` loads the rare ones itself when it meets one."""
    with _warm_lock:
        try:
            import PIL.Image
            import PIL.PngImagePlugin

            PIL.Image.preinit()
        except Exception:  # images are optional; log_image reports its own errors
            pass


def _version() -> str:
    from trackmux import __version__

    return __version__


_concurrent_warned = False


def _warn_if_concurrent(run: Run) -> None:
    """Say once per process that ``init()`` opened a run while another is live here.

    Not an error: a sweep or an evaluation beside training may want two runs on purpose,
    and each is complete on its own. But a second ``init()`` is more often a script run
    twice in a notebook, or a callback and a script both starting one: every ``log()`` then
    goes to whichever run the caller holds, and the first stays live until exit."""
    global _concurrent_warned
    live = [r for r in list(_live_runs) if r._pid == os.getpid() and not r._finished]
    if not live or _concurrent_warned:
        return
    _concurrent_warned = True
    log.warning("trackmux: init() started run %s/%s (%s) while run %s/%s (%s) is still live "
                "in this process; both are recorded, side by side. finish() the first run "
                "(or use `with trackmux.init(...)`) if one was meant. Said once per process.",
                run.project, run.id, run.name, live[0].project, live[0].id, live[0].name)


def _block_exit_code(exc: BaseException | None) -> int:
    """A ``with`` block's end: 0, SystemExit's own status (``sys.exit(0)`` inside the
    block is a success), 1 for any other exception."""
    if exc is None:
        return 0
    if isinstance(exc, SystemExit):
        return exit_status.status_of(exc.code)
    return 1


@atexit.register
def _finish_at_exit() -> None:
    failed = hasattr(sys, "last_value") and sys.last_value is not None
    exited = exit_status.noted()
    code = (signals.SIGTERM_EXIT_CODE if signals.received else 1 if failed
            else exited if exited is not None else 0)
    for run in list(_live_runs):
        try:
            run.finish(exit_code=code)
        except Exception:  # never turn interpreter exit into a traceback storm
            log.exception("trackmux: finishing run %s at exit failed", run.id)


def _user() -> str:
    """Who runs the trainer (shown with the run in the team store); "" when unknown."""
    import getpass

    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):
        return ""
