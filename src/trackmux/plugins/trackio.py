"""trackio backend: every trackmux event as one row of trackio's local SQLite store.

No server and no ``trackio.init``: trackio's own ``Run`` queues rows to a background thread
and turns every error into a warning, so a write could never be confirmed. The backend
calls the storage layer trackio's run uses (``SQLiteStorage.bulk_log``) directly, which
returns once the rows are committed to ``<TRACKIO_DIR>/<project>.db``; ``trackio show``
reads the same file.

What each event becomes (see docs/backends/trackio.md):

- metrics: a row at the event's own step and timestamp (trackio keeps both per row);
- table: a ``trackio.Table`` in a row of its own (cells as logged: str, numbers, None);
- image: a ``trackio.Image`` (PNG under trackio's media dir) with its caption;
- text: a ``trackio.Markdown``;
- finding of the doctor: a trackio alert (``bulk_alert``: title, text, level, step; the
  dashboard and ``trackio alerts`` list it) and a ``trackio.Markdown`` row ``doctor/<rule>``;
- config: the run's config (``configs`` table), plus ``_Created`` and ``_Group`` as
  trackio's run sets them; the row carrying it holds no metrics.

Exactly once: each row's ``log_id`` is ``tm-<trackio run id>-<seq>``. Before a batch is
written the backend reads which of its log ids the store already holds and skips those
events (so an image is not saved twice); trackio's unique index on ``log_id`` ignores any
row that slips through. A batch redelivered after a lost acknowledgement adds nothing.

``TRACKIO_DIR``: trackio reads it once, when ``trackio`` is first imported. The ``dir``
option is applied by setting ``TRACKIO_DIR`` just for that import; if trackio was already
imported in this process with another directory, ``open`` raises a ValueError naming
both rather than writing somewhere else. Without ``dir`` the backend writes where
trackio itself would (``TRACKIO_DIR``, else ``$HF_HOME/trackio``).

Samples (``log_samples``) arrive as core's table, except conversations (a ``messages``
column): those become a list of ``trackio.Trace`` under the key at their step (trackio's
trace view; the summary and the other columns in each trace's metadata), or the table
where the installed trackio has no traces.

Options (``backend_options={"trackio": {...}}``): ``dir``, ``project`` (default: the
trackmux project), ``name`` (default: the run name), ``id`` (trackio run id for a new
delivery; default: a new one), ``group``.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from io import BytesIO
from pathlib import Path
from typing import Any

from trackmux.core.backends.alerts import AlertGate
from trackmux.core.backends.contract import Backend, ResumeState, RunInfo, check_option_types
from trackmux.core.delivery.fallbacks import samples_table
from trackmux.core.errors import EventRejected
from trackmux.core.events import (
    ConfigEvent,
    Event,
    FindingEvent,
    ImageEvent,
    MetricsEvent,
    SamplesEvent,
    TableEvent,
    TextEvent,
)
from trackmux.hookspecs import RegisterBackend, hookimpl
from trackmux.plugins.chat import slack_escape

OPTIONS = frozenset({"dir", "project", "name", "id", "group"})
#: Keys trackio renames to ``__<key>`` (its ``RESERVED_KEYS``, and anything starting ``__``).
RESERVED = frozenset({"project", "run", "timestamp", "step", "time", "metrics"})


def trackio_key(key: str) -> str:
    """The name trackio stores ``key`` under (it renames reserved keys the same way)."""
    return f"__{key}" if key in RESERVED or key.startswith("__") else key


def iso_time(seconds: float) -> str:
    """trackio's timestamp format: ISO 8601 in UTC."""
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat()


def trackio_dir(wanted: str | os.PathLike[str] | None) -> Path:
    """Import trackio so that it uses ``wanted`` (if given) and return the directory it uses.

    Raises ValueError if trackio was imported earlier in this process with another one."""
    if wanted is not None:
        wanted = Path(wanted).expanduser().absolute()
    if "trackio.utils" not in sys.modules and wanted is not None:
        before = os.environ.get("TRACKIO_DIR")
        os.environ["TRACKIO_DIR"] = str(wanted)
        try:
            import trackio.utils  # noqa: F401 - reads TRACKIO_DIR now, and only now
        finally:
            if before is None:
                os.environ.pop("TRACKIO_DIR", None)
            else:
                os.environ["TRACKIO_DIR"] = before
    from trackio import utils

    actual = Path(utils.TRACKIO_DIR).expanduser().absolute()
    if wanted is not None and actual != wanted:
        raise ValueError(
            f"trackio option dir={str(wanted)!r}, but trackio was already imported in this "
            f"process with TRACKIO_DIR={str(actual)!r} (trackio reads it once, at import). "
            "Set TRACKIO_DIR before anything imports trackio, or drop the dir option.")
    return actual


def _check_options(options: Mapping[str, Any]) -> None:
    check_option_types("trackio", options, OPTIONS, strings=("project", "name", "id", "group"),
                       paths=("dir",))


class TrackioBackend(Backend):
    name = "trackio"
    capabilities = frozenset({"metrics", "config", "table", "image", "text", "finding",
                              "samples"})
    destination_options = ("dir", "project")
    max_sample_rows = 64  # samples shown per log_samples batch (docs/samples.md)

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        _check_options(self.options)
        self._project = ""
        self._run_name = ""
        self._run_id = ""
        self._seq = 0
        self._config_extra: dict[str, Any] = {}
        self.dir: Path | None = None
        self._alerts = AlertGate()  # a finding's updates alert when its severity rises

    @property
    def db_path(self) -> Path:
        """The project's SQLite file in trackio's directory."""
        from trackio.sqlite_storage import SQLiteStorage

        return Path(SQLiteStorage.get_project_db_path(self._project))

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        self.dir = trackio_dir(self.options.get("dir"))
        self._project = self.options.get("project") or run.project
        self._run_name = self.options.get("name") or run.name
        self._run_id = resume.remote_id or self.options.get("id") or uuid.uuid4().hex
        self._seq = int(resume.state.get("seq", 0))
        self._config_extra = {"_Created": iso_time(run.started_at),
                              "_Group": self.options.get("group")}

    @property
    def remote_id(self) -> str | None:
        return self._run_id or None

    def state(self) -> dict[str, Any]:
        return {"seq": self._seq}

    def log_id(self, seq: int) -> str:
        return f"tm-{self._run_id}-{seq}"

    def _stored(self, log_ids: list[str]) -> set[str]:
        """Which of ``log_ids`` trackio's store already holds (earlier deliveries)."""
        path = self.db_path
        if not log_ids or not path.exists():
            return set()
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as conn:
            try:
                found: set[str] = set()
                for start in range(0, len(log_ids), 500):
                    part = log_ids[start:start + 500]
                    marks = ",".join("?" * len(part))
                    found.update(row[0] for row in conn.execute(
                        f"SELECT log_id FROM metrics WHERE log_id IN ({marks})", part))
                return found
            except sqlite3.OperationalError as exc:
                if "no such" in str(exc):  # an empty or older store: nothing of ours in it
                    return set()
                raise

    def write(self, events: Sequence[Event]) -> None:
        from trackio.sqlite_storage import SQLiteStorage

        fresh = [e for e in events if not (e.seq and e.seq <= self._seq)]
        stored = self._stored([self.log_id(e.seq) for e in fresh if e.seq])
        rows: list[dict[str, Any]] = []
        steps: list[int] = []
        times: list[str] = []
        ids: list[str] = []
        config: dict[str, Any] | None = None
        findings: list[FindingEvent] = []
        for event in fresh:
            if event.seq and self.log_id(event.seq) in stored:
                continue
            if isinstance(event, FindingEvent) and self._alerts.due(event):
                findings.append(event)  # an update alerts when its severity rose
            if isinstance(event, ConfigEvent):
                config = {**event.config, **self._config_extra}
                row: dict[str, Any] = {}
            else:
                row = self._checked_row(event)
            rows.append(row)
            steps.append(event.step)
            times.append(iso_time(event.time))
            ids.append(self.log_id(event.seq) if event.seq else f"tm-{uuid.uuid4().hex}")
        if rows:
            SQLiteStorage.bulk_log(project=self._project, run=self._run_name, run_id=self._run_id,
                                   metrics_list=rows, steps=steps, timestamps=times,
                                   config=config, log_ids=ids)
        if findings:  # trackio's own alerts (its dashboard and ``trackio alerts`` list them)
            SQLiteStorage.bulk_alert(
                project=self._project, run=self._run_name, run_id=self._run_id,
                titles=[slack_escape(f"trackmux doctor: {f.rule} at step {f.step}")
                        for f in findings],  # a rule a plugin or the user named
                texts=[slack_escape(f.message) for f in findings],  # forwarded to Slack
                levels=[ALERT_LEVELS.get(f.severity, "info") for f in findings],
                steps=[f.step for f in findings], timestamps=[iso_time(f.time) for f in findings],
                alert_ids=[self.log_id(f.seq) + "-alert" for f in findings])
        for event in events:
            self._seq = max(self._seq, event.seq)

    def _checked_row(self, event: Event) -> dict[str, Any]:
        """The row of ``event``; one trackio can never take is rejected, not retried."""
        from PIL import UnidentifiedImageError

        try:
            return self._row(event)
        except (TypeError, ValueError, UnidentifiedImageError) as exc:
            raise EventRejected(f"trackio cannot take {event.kind} "
                                f"{getattr(event, 'key', '')!r} at step {event.step}: {exc}"
                                ) from exc

    def _row(self, event: Event) -> dict[str, Any]:
        if isinstance(event, MetricsEvent):
            return {trackio_key(k): v for k, v in event.data.items()}
        if isinstance(event, SamplesEvent):
            traces = self._traces(event)
            if traces is not None:
                return {trackio_key(event.key): traces}
            event = samples_table(event, self)
        if isinstance(event, TableEvent):
            from trackio.table import Table

            table = Table(columns=list(event.columns), data=[list(r) for r in event.rows])
            return {trackio_key(event.key): table._to_dict(project=self._project,
                                                            run=self._run_name, step=event.step)}
        if isinstance(event, ImageEvent):
            from PIL import Image
            from trackio.media.image import TrackioImage

            with Image.open(BytesIO(event.png)) as image:
                image.load()
                media = TrackioImage(image, caption=event.caption)
                media._save(self._project, self._run_name, event.step)
            return {trackio_key(event.key): media._to_dict()}
        if isinstance(event, TextEvent):
            from trackio.markdown import Markdown

            return {trackio_key(event.key): Markdown(event.text)._to_dict()}
        if isinstance(event, FindingEvent):  # also an alert (write); a row to see it at its step
            from trackio.markdown import Markdown

            return {trackio_key(event.key): Markdown(event.line())._to_dict()}
        raise TypeError(f"unknown event kind {event.kind!r}")

    def _traces(self, event: SamplesEvent) -> list[dict[str, Any]] | None:
        """The chosen conversations as trackio traces (its trace view: messages, tool calls
        paired by ``tool_call_id``), or None without conversations or ``trackio.Trace``."""
        if not event.trajectories:
            return None
        try:
            from trackio.trace import Trace
        except ImportError:  # trackio before traces: the table fallback
            return None
        from trackmux.core.values import trajectory
        from trackmux.samples.projection import chosen

        column = event.values[event.columns.index(event.trajectories[0])]
        others = [(name, values) for name, values in zip(event.columns, event.values,
                                                          strict=True)
                  if name not in event.trajectories]
        traces = []
        for i in chosen(event, self):
            messages = trajectory.decode(column[i])
            if messages is None:
                continue
            s = trajectory.summary(messages)
            latency = sum(m["latency_ms"] for m in messages
                          if isinstance(m.get("latency_ms"), (int, float)))
            metadata = {"sample": i, "turns": s.turns, "tool_calls": s.tool_calls,
                        "tool_errors": s.tool_errors, "tools": s.tools,
                        "status": "error" if s.tool_errors else "ok", "latency_ms": latency,
                        **{name: values[i] for name, values in others}}
            traces.append(Trace(messages, metadata=metadata)._to_dict(
                project=self._project, run=self._run_name, step=event.step))
        return traces

    def close(self, status: str) -> None:
        """Nothing to end: every row is committed by ``write``."""


ALERT_LEVELS = {"critical": "error", "warning": "warn", "info": "info"}  # trackio.AlertLevel values


@hookimpl
def trackmux_register_backends(register: RegisterBackend) -> None:
    register("trackio", TrackioBackend, requires=("trackio",), extra="trackio",
             description="trackio's local SQLite store: rows at their own step and time, "
                         "tables, images, markdown, config")
