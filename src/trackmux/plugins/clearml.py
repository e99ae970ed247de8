"""clearml backend: one ClearML task per trackmux run, online or as an offline session.

What each event becomes (see docs/backends/clearml.md):

- metrics: ``report_scalar`` at the event's step; the key splits at its first ``/`` into
  title and series as verl's ClearML adapter splits it (``reward/mean`` -> ``reward`` /
  ``mean``; a key without ``/`` is its own title and series; ``a/a`` would read back as
  ``a``, and ``trackmux/seq`` is this backend's own mark, so such a key that another key
  already holds gets a hash suffix: core/backends/keynames.py). ClearML itself reports NaN
  and inf as 0.0 (``Logger.set_reporting_nan_value``); the spool keeps the real value;
- table: ``report_table`` (header row, then the rows; text, numbers and None as logged);
- image: ``report_image`` (every step kept: no rolling image history);
- text: a line ``<key> @ step <n>: <text>`` in the task's console log (``report_text``);
- config: ``connect_configuration`` under ``Hyperparameters``, as verl does.

Offline: ``offline=True``, or ``CLEARML_OFFLINE_MODE=1`` as clearml reads it. The session
is a folder ``<dir>/offline/<task id>/`` (``dir``: ClearML's cache dir, ``CLEARML_CACHE_DIR``
by default) that ``clearml-task --import-offline-session`` uploads later. Nothing is sent
anywhere in this mode.

Resume: the task id is the remote id; a later delivery continues that task
(``continue_last_task``) at the same iterations, not shifted after the last one as
ClearML would by default.

Exactly once: after each event the backend reports its seq as scalar ``trackmux`` /
``seq`` (a chart in the UI). On a resumed offline delivery it reads the session's
``metrics.jsonl``, skips every event up to the last seq found there and, for the next
one, the reports that already follow that mark (a batch cut by a crash). Online, only
the stored checkpoint is used: a batch redelivered after a lost acknowledgement is
reported again (ClearML keeps one value per scalar series and iteration).

ClearML keeps one task per process, so one clearml backend can be open at a time.
ClearML's reporter runs as a thread of the delivering process (not its default forked
subprocess, whose flushes take seconds).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from io import BytesIO
from pathlib import Path
from typing import Any

from trackmux.core.backends.contract import Backend, ResumeState, RunInfo, check_option_types
from trackmux.core.backends.keynames import KeyNames
from trackmux.core.errors import EventRejected
from trackmux.core.events import (
    ConfigEvent,
    Event,
    ImageEvent,
    MetricsEvent,
    TableEvent,
    TextEvent,
)
from trackmux.hookspecs import RegisterBackend, hookimpl

OPTIONS = frozenset({"dir", "offline", "project", "name", "config_name"})
MARK = ("trackmux", "seq")
_TRUE = {"1", "true", "yes", "on"}


def title_series(key: str) -> tuple[str, str]:
    """ClearML's (title, series) of a trackmux key, split as verl's adapter splits it."""
    title, _, series = key.partition("/")
    return (title, series) if series else (key, key)


def key_of(title: str, series: str) -> str:
    """The trackmux key of a (title, series) pair: the inverse of :func:`title_series`."""
    return title if title == series else f"{title}/{series}"


def clearml_key(key: str) -> str:
    """The key ClearML's (title, series) of ``key`` reads back as: ``a/a`` is reported as
    title ``a``, series ``a``, which is also how ``a`` is reported."""
    return key_of(*title_series(key))


MAX_KEY = 255


def session_events(folder: Path) -> Iterator[dict[str, Any]]:
    """Every event of an offline session's ``metrics.jsonl``, in the order written."""
    path = folder / "metrics.jsonl"
    if not path.exists():
        return
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                batch = json.loads(line)
            except ValueError:
                return  # a torn last line: what follows it was never written
            yield from batch if isinstance(batch, list) else [batch]


def _report_key(event: Mapping[str, Any]) -> tuple[str, str, str, int]:
    return (str(event.get("type")), str(event.get("metric")), str(event.get("variant")),
            int(event.get("iter") or 0))


def scan_session(folder: Path) -> tuple[int, set[tuple[str, str, str, int]]]:
    """(highest seq marked in the session, reports written after that mark)."""
    seq, tail = 0, set[tuple[str, str, str, int]]()
    for event in session_events(folder):
        if (event.get("metric"), event.get("variant")) == MARK:
            seq, tail = max(seq, int(event.get("value") or 0)), set()
        else:
            tail.add(_report_key(event))
    return seq, tail


@contextmanager
def _cache_dir(path: Path | None) -> Iterator[None]:
    """``CLEARML_CACHE_DIR`` set to ``path`` while ClearML decides where the session goes."""
    if path is None:
        yield
        return
    before = os.environ.get("CLEARML_CACHE_DIR")
    os.environ["CLEARML_CACHE_DIR"] = str(path)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CLEARML_CACHE_DIR", None)
        else:
            os.environ["CLEARML_CACHE_DIR"] = before


def _check_options(options: Mapping[str, Any]) -> None:
    check_option_types("clearml", options, OPTIONS, strings=("project", "name", "config_name"),
                       paths=("dir",))
    if not isinstance(options.get("offline", False), bool):
        raise TypeError(f"clearml option offline must be True or False, got "
                        f"{options['offline']!r}")


class ClearMLBackend(Backend):
    name = "clearml"
    capabilities = frozenset({"metrics", "config", "table", "image", "text"})
    destination_options = ("dir", "project")
    max_sample_rows = 64  # samples shown per log_samples batch (docs/samples.md)

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        _check_options(self.options)
        self._task: Any = None
        self._run_dir: Path | None = None  # the spool's run folder (a stop's reason)
        self._seq = 0
        self._partial: set[tuple[str, str, str, int]] = set()
        self.session: Path | None = None

    @property
    def offline(self) -> bool:
        """The option if given, else ``CLEARML_OFFLINE_MODE`` as ClearML reads it."""
        if "offline" in self.options:
            return bool(self.options["offline"])
        return os.environ.get("CLEARML_OFFLINE_MODE", "").strip().lower() in _TRUE

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        from clearml import Task

        self._run_dir = run.run_dir
        if Task.current_task() is not None:
            raise RuntimeError("a ClearML task is already open in this process; ClearML "
                               "keeps one task per process, so the clearml backend cannot "
                               "open another (close it, or deliver from another process)")
        offline = self.offline
        if offline:
            Task.set_offline(True)
        # ClearML's default on Linux reports from a forked subprocess: each flush then
        # waits ~6 s and each close ~11 s (measured). The backend already runs off the
        # trainer's path, so ClearML's in-process reporter thread is used instead.
        Task._report_subprocess_enabled = False
        directory = self.options.get("dir")
        if directory:  # ClearML's session cache is ~/.clearml unless moved: keep it in dir
            from clearml.config.cache import SessionCache

            SessionCache.SESSION_CACHE_FOLDER = str(
                Path(directory).expanduser().absolute() / ".clearml")
        with _cache_dir(Path(directory).expanduser().absolute() if directory else None):
            self._task = Task.init(
                project_name=self.options.get("project") or run.project,
                task_name=self.options.get("name") or run.name,
                continue_last_task=resume.remote_id or False, reuse_last_task_id=False,
                output_uri=False, auto_connect_frameworks=False,
                auto_resource_monitoring=False, auto_connect_streams=False,
                auto_connect_arg_parser=False)
            if offline:
                self.session = Path(self._task.get_offline_mode_folder())  # cached by ClearML
        self._task.set_initial_iteration(0)  # report at the logged steps, also on resume
        self._seq = int(resume.state.get("seq", 0))
        names = resume.state.get("names")
        self._names = KeyNames(clearml_key, "clearml key", max_length=MAX_KEY,
                               state=names if isinstance(names, Mapping) else None,
                               reserved=["/".join(MARK)])
        if resume.remote_id and self.session is not None:
            marked, self._partial = scan_session(self.session)
            self._seq = max(self._seq, marked)

    @property
    def remote_id(self) -> str | None:
        return None if self._task is None else str(self._task.id)

    def state(self) -> dict[str, Any]:
        names = self._names.state() if hasattr(self, "_names") else {}
        return {"seq": self._seq, **({"names": names} if names else {})}

    def write(self, events: Sequence[Event]) -> None:
        logger = self._task.get_logger()
        for event in events:
            if event.seq and event.seq <= self._seq:
                continue
            done, self._partial = self._partial, set()  # only the event cut by a crash
            if isinstance(event, ConfigEvent):
                self._task.connect_configuration(
                    event.config, name=self.options.get("config_name") or "Hyperparameters")
            else:
                self._report(logger, event, done)
            logger.report_scalar(MARK[0], MARK[1], value=event.seq, iteration=event.step)
            self._seq = max(self._seq, event.seq)

    def _report(self, logger: Any, event: Event, done: set[tuple[str, str, str, int]]) -> None:
        """Report one event; what ``done`` holds is already in the session."""
        if isinstance(event, MetricsEvent):
            self._names.prepare(event.data)
            for key, value in event.data.items():
                title, series = title_series(self._names(key))
                if ("training_stats_scalar", title, series, event.step) not in done:
                    logger.report_scalar(title, series, value=value, iteration=event.step)
            return
        if isinstance(event, TextEvent):
            logger.report_text(f"{event.key} @ step {event.step}: {event.text}",
                               print_console=False)
            return
        if not isinstance(event, (TableEvent, ImageEvent)):
            raise TypeError(f"unknown event kind {event.kind!r}")
        title, series = title_series(self._names(event.key))
        kind = "plot" if isinstance(event, TableEvent) else "training_debug_image"
        if (kind, title, series, event.step) in done:
            return
        from PIL import UnidentifiedImageError

        try:
            if isinstance(event, TableEvent):
                logger.report_table(title, series, iteration=event.step,
                                    table_plot=[list(event.columns), *map(list, event.rows)])
            else:
                logger.report_image(title, series, iteration=event.step,
                                    image=_pixels(event.png), max_image_history=-1)
        except (TypeError, ValueError, UnidentifiedImageError) as exc:
            raise EventRejected(f"clearml cannot take {event.kind} {event.key!r} at step "
                                f"{event.step}: {exc}") from exc

    def flush(self) -> None:
        """Wait until ClearML's reporter has written (or sent) everything reported."""
        if self._task is not None:
            self._task.flush(wait_for_uploads=True)

    def close(self, status: str) -> None:
        if self._task is None:
            return
        task, self._task = self._task, None
        task.flush(wait_for_uploads=True)
        if status == "stopped":  # issue 45: ClearML's own state for a task stopped early
            from trackmux.core.spool.runs import stop_reason_line

            why = stop_reason_line(self._run_dir) if self._run_dir is not None else ""
            task.mark_stopped(force=True, status_message=f"trackmux doctor: {why}"[:255])
        elif status != "finished":
            task.mark_failed(ignore_errors=True, status_reason="trackmux: run crashed")
        task.close()


def _pixels(png: bytes) -> Any:
    """A PNG as the uint8 array ClearML's report_image takes."""
    import numpy as np
    from PIL import Image

    with Image.open(BytesIO(png)) as opened:
        opened.load()
        image = opened if opened.mode in ("L", "RGB", "RGBA") else opened.convert(
            "RGBA" if "A" in opened.mode else "RGB")
        return np.asarray(image)


@hookimpl
def trackmux_register_backends(register: RegisterBackend) -> None:
    register("clearml", ClearMLBackend, requires=("clearml",), extra="clearml",
             description="ClearML task (or offline session): scalars, tables, images, "
                         "console text, config; resumes the same task")
