"""wandb backend: the reference mapping of every trackmux event kind onto one wandb run.

What each event becomes (see docs/backends/wandb.md):

- metrics: one history row per event, ``trackmux/step`` holding the event's own step.
  ``define_metric("*", step_metric="trackmux/step")`` makes it every chart's x axis, and
  wandb's ``_step`` is only a row counter that keeps growing (also across resumes). So a
  step that goes backwards (late data from async RL workers) is kept and plotted at its
  own step, where a ``log(step=...)`` would make wandb drop it.
- table: a ``wandb.Table(log_mode="INCREMENTAL")`` per key; each event logs only its own
  rows, so a growing table is never re-sent whole. New columns for a key start a new table.
- image: ``wandb.Image`` with its caption; text: an incremental table ``[step, text]``.
- histogram: ``wandb.Histogram(np_histogram=(counts, edges))`` (at most 512 bins, as core
  allows), plus ``<key>/nan``, ``<key>/inf``, ``<key>/neginf`` in the same row when values
  were not finite.
- artifact: a ``wandb.Artifact`` of the same name and type (copied files added, large
  referenced files as ``file://`` references), aliased ``step<N>``; wandb versions it by
  content, so a redelivered artifact is the same version.
- config: ``run.config.update`` (nested, already redacted by core).
- provenance (issue 25): the config section ``_provenance`` and a code record: an
  artifact of type ``code`` named ``source-<run id>``, made by ``run.log_code`` as wandb's
  ``save_code`` does, holding ``provenance.json``, ``diff.patch`` (the uncommitted diff,
  redacted, files secret by name left out) and, only when the run was started with
  ``save_code=True`` (wandb's own default is off), the entry script redacted as text.
  wandb's own fields (the run record's git commit and remote, the environment record's
  program, args, git, host) are filled from the provenance at ``wandb.init``: ``open``
  waits for it up to ``provenance_wait`` seconds (see wandb_provenance.py).
- summary: wandb's own (last row per key), corrected at close to each metric's value at
  its highest step when late data came last.

Exactly once: each row carries the event's seq in ``_trackmux_seq`` (hidden, as every
``_`` key). On a resumed delivery the backend reads the earlier transaction logs of the same
wandb run id in its dir (``run-<id>.wandb``) and skips every event already written there,
so a batch redelivered after a lost acknowledgement does not appear twice. ``close`` returns
only once wandb-core has written the whole log (``wait_for_log``), so the next open reads it all.

Options (``backend_options={"wandb": {...}}``):
``dir`` (default ``WANDB_DIR``, else the trackmux run dir; wandb adds ``wandb/``;
wandb's staging copies and cache, ``WANDB_DATA_DIR`` and ``WANDB_CACHE_DIR``, default to
``<dir>/wandb/staging`` and ``<dir>/wandb/cache`` instead of the home folder, and the
staging copies and cached artifact files are removed once ``finish`` has written or
uploaded them),
``mode`` ("online", "offline", "disabled"; default: wandb's, i.e. ``WANDB_MODE``),
``entity`` (default ``WANDB_ENTITY``), ``project``, ``name``, ``group``, ``job_type``,
``tags``, ``notes``, ``id`` (a wandb run id for a new delivery; default ``WANDB_RUN_ID`` or a
new one), ``proxy`` (http(s) proxy, verl's ``trainer.wandb_proxy``), ``tables``
("incremental" or "per_step": a fresh table per event), ``provenance_wait`` (seconds
``open`` waits for the run's provenance, default 10), ``settings`` (a dict of extra
``wandb.Settings`` fields; console capture and system stats are off by default because the
delivering process need not be the training process).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import re
import secrets
import string
import struct
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

from trackmux.core.backends.alerts import AlertGate
from trackmux.core.backends.contract import Backend, ResumeState, RunInfo
from trackmux.core.errors import EventRejected
from trackmux.core.events import (
    ArtifactEvent,
    ConfigEvent,
    Event,
    FindingEvent,
    HistogramEvent,
    ImageEvent,
    MetricsEvent,
    ProvenanceEvent,
    TableEvent,
    TextEvent,
)
from trackmux.hookspecs import RegisterBackend, hookimpl
from trackmux.plugins import wandb_provenance
from trackmux.plugins.chat import slack_escape

log = logging.getLogger("trackmux")

STEP_KEY = "trackmux/step"
SEQ_KEY = "_trackmux_seq"
OPTIONS = frozenset({"dir", "mode", "entity", "project", "name", "group", "job_type", "tags",
                     "notes", "id", "proxy", "tables", "settings", "provenance_wait"})
MODES = ("online", "offline", "disabled")
#: how long ``close`` waits for wandb-core to finish writing the run's transaction log
LOG_WRITE_TIMEOUT = 60.0
TABLE_MODES = ("incremental", "per_step")
QUIET_SETTINGS: dict[str, Any] = {"console": "off", "x_disable_stats": True,
                                  "x_disable_meta": True, "x_save_requirements": False,
                                  "save_code": False, "disable_git": True, "silent": True}

# -- reading wandb's transaction log (a LevelDB-style log of Record protos) ------------------
_BLOCK = 32768
_RECORD_HEADER = 7
_FILE_HEADER = struct.Struct("<4sHB")  # ":W&B", magic 0xBEE1, version
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _chunks(path: Path, start: int = 0) -> Iterator[tuple[int, bytes]]:
    """(type, payload) of each physical record from the block at ``start`` (a multiple of
    the block size) on; stops at a torn or corrupt tail."""
    with open(path, "rb") as handle:
        head = handle.read(_FILE_HEADER.size)
        if len(head) < _FILE_HEADER.size or not head.startswith(b":W&B"):
            raise ValueError(f"{path} is not a wandb transaction log")
        if start:
            handle.seek(start)
            block = handle.read(_BLOCK)
        else:  # the first block holds the file header
            block = handle.read(_BLOCK - _FILE_HEADER.size)
        while block:
            pos = 0
            while len(block) - pos >= _RECORD_HEADER:
                crc, length, kind = struct.unpack_from("<IHB", block, pos)
                payload = block[pos + _RECORD_HEADER: pos + _RECORD_HEADER + length]
                if kind == 0 and length == 0:
                    break  # zero padding at the end of a block
                expected = zlib.crc32(payload, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF
                if len(payload) < length or crc != expected:
                    return
                yield kind, payload
                pos += _RECORD_HEADER + length
            block = handle.read(_BLOCK)


def read_records(path: Path, start: int = 0) -> Iterator[Any]:
    """Each ``wandb_internal_pb2.Record`` in a ``run-<id>.wandb`` file, in order; from the
    block at ``start`` on, the first record beginning there (a record's tail, continued
    from the block before, is skipped)."""
    from wandb.proto import wandb_internal_pb2

    parts: list[bytes] | None = None  # None: not inside a record that began in the range
    for kind, payload in _chunks(path, start):
        if kind in (_FULL, _FIRST):
            parts = [payload]
        elif parts is None:
            continue
        else:
            parts.append(payload)
        if kind in (_FIRST, _MIDDLE):
            continue
        record = wandb_internal_pb2.Record()  # type: ignore[attr-defined, unused-ignore]
        record.ParseFromString(b"".join(parts))
        parts = None
        yield record


def log_is_complete(path: Path) -> bool:
    """Whether wandb has written the run's exit record to its transaction log: it does so
    at ``finish``, after every row, so every row of the run is in the file then. Only the
    last two blocks are read (the exit record is small and comes last)."""
    from google.protobuf.message import DecodeError

    try:
        size = path.stat().st_size
        start = max(0, size // _BLOCK - 1) * _BLOCK
        return any(record.WhichOneof("record_type") == "exit"
                   for record in read_records(path, start))
    except (OSError, ValueError, DecodeError):
        return False  # not there yet, not even the header written, or a format we misread


def wait_for_log(path: Path, timeout: float) -> bool:
    """Wait until ``path`` holds the run's exit record (``log_is_complete``); False if it
    does not within ``timeout`` seconds.

    ``run.finish()`` returns once wandb-core has answered the exit record, but wandb-core
    writes the transaction log through a buffer it flushes when it closes the run's
    stream, which ``finish`` only asks for (without waiting) as its last step. Right after
    ``finish`` the log can still lack the last rows, or every row."""
    deadline = time.monotonic() + timeout
    pause = 0.002
    while not log_is_complete(path):
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    return True


def nest(items: Any) -> dict[str, Any]:
    """History/summary/config items as a nested dict. wandb stores a logged dict (an image,
    a table) flattened, one item per leaf with its path in ``nested_key``."""
    out: dict[str, Any] = {}
    for item in items:
        path = list(item.nested_key) or [item.key]
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = json.loads(item.value_json)
    return out


def history_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The history rows of a transaction log, each as ``{key: value}``."""
    for record in read_records(path):
        if record.WhichOneof("record_type") == "history":
            yield nest(record.history.item)


_TIMESPEC = re.compile(r"-(\d{8}_\d{6})-")
_SUFFIX = re.compile(r"-tm(\d+)$")


def _age(path: Path) -> tuple[str, int]:
    name = path.parent.name
    timespec, suffix = _TIMESPEC.search(name), _SUFFIX.search(name)
    return (timespec.group(1) if timespec else "", int(suffix.group(1)) if suffix else 0)


def run_files(wandb_dir: Path, run_id: str) -> list[Path]:
    """Transaction logs of ``run_id`` under ``wandb_dir`` (one per wandb.init), oldest first.

    wandb names a run folder by the second it started, so two deliveries in one second
    would share (and truncate) one log; each delivery's folder gets a ``-tm<ns>`` suffix.
    """
    found = [p for p in wandb_dir.glob(f"*/run-{run_id}.wandb")
             if not p.parent.is_symlink() and p.parent.name != "latest-run"]
    return sorted(found, key=_age)


@dataclass
class Written:
    """What earlier deliveries left in wandb's files for one run id."""

    seq: int = 0
    step: int = -1
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)


def scan_written(wandb_dir: Path, run_id: str) -> Written:
    """Read the earlier logs of ``run_id``, decoding only the values a resume needs."""
    found = Written()
    for path in run_files(wandb_dir, run_id):
        for record in read_records(path):
            if record.WhichOneof("record_type") != "history":
                continue
            media: dict[str, list[Any]] = {}
            for item in record.history.item:
                parts = list(item.nested_key) or [item.key]
                if len(parts) > 1:
                    media.setdefault(parts[0], []).append(item)
                elif parts[0] == "_step":
                    found.step = max(found.step, int(json.loads(item.value_json)))
                elif parts[0] == SEQ_KEY:
                    found.seq = max(found.seq, int(json.loads(item.value_json)))
            for name, items in media.items():
                value = nest(items)[name]
                if value.get("_type") == "incremental-table-file":
                    found.tables[name] = value
    return found


def new_run_id() -> str:
    """A wandb-style run id (8 lowercase letters and digits)."""
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))


# -- the backend -------------------------------------------------------------------------------
def _check_options(options: Mapping[str, Any]) -> None:
    unknown = sorted(set(options) - OPTIONS)
    if unknown:
        raise ValueError(f"unknown wandb option(s) {unknown}; known: {sorted(OPTIONS)}")
    if options.get("mode") not in (None, *MODES):
        raise ValueError(f"wandb option mode must be one of {MODES}, got {options['mode']!r}")
    if options.get("tables", "incremental") not in TABLE_MODES:
        raise ValueError(f"wandb option tables must be one of {TABLE_MODES}, "
                         f"got {options['tables']!r}")
    if not isinstance(options.get("settings", {}), Mapping):
        raise ValueError("wandb option settings must be a dict of wandb.Settings fields")
    wait = options.get("provenance_wait", 0.0)
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0:
        raise ValueError(f"wandb option provenance_wait must be a number of seconds >= 0, "
                         f"got {wait!r}")
    tags = options.get("tags", ())
    if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
        raise ValueError("wandb option tags must be a list of strings")


# wandb refuses these in a project name, and names over 128 characters; the project is
# mapped (and the mapping logged) rather than retried forever.
_WANDB_PROJECT_UNSAFE = re.compile(r"[/\\#?%:\x00-\x1f\x7f]+")
WANDB_PROJECT_MAX = 128


def wandb_project(project: str) -> str:
    """``project`` as a name wandb accepts: refused characters become ``-``; a name over
    ``WANDB_PROJECT_MAX`` characters is cut and given a hash of the whole name."""
    mapped = _WANDB_PROJECT_UNSAFE.sub("-", project).strip("-") or "trackmux"
    if len(mapped) > WANDB_PROJECT_MAX:
        digest = hashlib.sha1(project.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        mapped = mapped[:WANDB_PROJECT_MAX - 11] + "-" + digest
    if mapped != project:
        log.warning("trackmux: wandb does not accept project %r; using %r", project, mapped)
    return mapped


#: WANDB_DATA_DIR / WANDB_CACHE_DIR values this module set (not the user's choice)
_SET_BY_US: set[str] = set()

class WandbBackend(Backend):
    name = "wandb"
    capabilities = frozenset({"metrics", "config", "table", "image", "text", "histogram",
                              "artifact", "provenance", "finding"})
    destination_options = ("dir", "entity", "project")
    max_sample_rows = 128  # samples shown per log_samples batch (docs/samples.md)

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        _check_options(self.options)
        self._run: Any = None
        self._log: Path | None = None
        self._scratch: list[Path] = []
        self._run_dir: Path | None = None  # the spool's run folder (a stop's reason)
        self._seq = 0
        self._next_step = 0
        self._alerts = AlertGate()  # a finding's updates alert when its severity rises
        self._tables: dict[str, tuple[tuple[str, ...], Any]] = {}
        self._resumed_tables: dict[str, dict[str, Any]] = {}
        self._last: dict[str, tuple[int, float]] = {}
        self._top: dict[str, tuple[int, float]] = {}

    def _staging_under_run(self) -> list[Path]:
        """wandb's staging copies (``WANDB_DATA_DIR``) and cache (``WANDB_CACHE_DIR``, also
        wandb-core's debug log) under the run's wandb folder unless set; returns what
        ``close`` removes (the staging copies and cached artifact files)."""
        removable: list[Path] = []
        for variable, name, remove in (("WANDB_DATA_DIR", "staging", "."),
                                       ("WANDB_CACHE_DIR", "cache", "artifacts")):
            current = os.environ.get(variable)
            if current and current not in _SET_BY_US:
                continue  # the user's choice
            folder = self.wandb_dir / name
            folder.mkdir(parents=True, exist_ok=True)
            os.environ[variable] = str(folder)
            _SET_BY_US.add(str(folder))
            removable.append((folder / remove).resolve())
        return removable

    @property
    def wandb_dir(self) -> Path:
        """Where wandb keeps its run folders (``offline-run-*-<id>``, ``run-*-<id>``)."""
        return self._root / "wandb"

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        import wandb

        opts = self.options
        self._run_dir = run.run_dir
        self._root = Path(opts.get("dir") or os.environ.get("WANDB_DIR") or run.run_dir)
        self._root = self._root.expanduser().absolute()
        self._root.mkdir(parents=True, exist_ok=True)
        self._scratch = self._staging_under_run()
        run_id = (resume.remote_id or opts.get("id") or os.environ.get("WANDB_RUN_ID")
                  or new_run_id())
        written = Written()
        if resume.remote_id:
            written = scan_written(self.wandb_dir, run_id)
        self._seq = max(written.seq, int(resume.state.get("seq", 0)))
        self._resumed_tables = written.tables
        # issue 25: wandb's own git/program fields from the provenance (wandb_provenance.py)
        provenance, meta = wandb_provenance.wait(
            run.run_dir, float(opts.get("provenance_wait", wandb_provenance.DEFAULT_WAIT)))
        in_trainer = meta.get("pid") == os.getpid()
        from_provenance = ({} if provenance is None
                           else wandb_provenance.settings(provenance, in_trainer))
        settings = {**QUIET_SETTINGS, "reinit": "create_new",
                    "x_sync_dir_suffix": f"tm{time.time_ns()}", **from_provenance,
                    **opts.get("settings", {})}
        if opts.get("proxy"):
            settings.setdefault("http_proxy", opts["proxy"])
            settings.setdefault("https_proxy", opts["proxy"])
        argv = None if provenance is None or in_trainer or settings.get("x_disable_meta") \
            else list(provenance.data.get("command", {}).get("argv") or [])
        with wandb_provenance.argv_as(argv):
            self._run = self._init(wandb, run, opts, run_id, settings)
        # the transaction log this run writes (none when wandb is disabled)
        self._log = None if getattr(self._run, "disabled", False) else Path(
            self._run.settings.sync_file)
        self._next_step = max(written.step + 1, int(resume.state.get("step", 0)),
                              int(getattr(self._run, "step", 0) or 0))
        self._run.define_metric(STEP_KEY)
        self._run.define_metric("*", step_metric=STEP_KEY)

    def _init(self, wandb: Any, run: RunInfo, opts: Mapping[str, Any], run_id: str,
              settings: dict[str, Any]) -> Any:
        return wandb.init(
            dir=str(self._root), mode=opts.get("mode"), id=run_id, resume="allow",
            entity=opts.get("entity") or os.environ.get("WANDB_ENTITY") or None,
            project=wandb_project(opts.get("project") or run.project),
            name=opts.get("name") or run.name,
            group=opts.get("group"), job_type=opts.get("job_type"), notes=opts.get("notes"),
            tags=list(opts.get("tags", ())) or list(run.tags) or None,
            settings=wandb.Settings(**settings))

    @property
    def remote_id(self) -> str | None:
        return None if self._run is None else str(self._run.id)

    def state(self) -> dict[str, Any]:
        return {"seq": self._seq, "step": self._next_step}

    def write(self, events: Sequence[Event]) -> None:
        for event in events:
            if event.seq and event.seq <= self._seq:
                continue  # already in wandb's files: a redelivered batch
            if isinstance(event, ConfigEvent):
                self._run.config.update(event.config, allow_val_change=True)
            elif isinstance(event, ProvenanceEvent):
                self._provenance(event)
            elif isinstance(event, ArtifactEvent):
                self._artifact(event)
            elif isinstance(event, FindingEvent):
                self._finding(event)
            else:
                row = self._checked_row(event)
                row[STEP_KEY] = event.step
                row[SEQ_KEY] = event.seq
                self._run.log(row, step=self._next_step, commit=True)
                self._next_step += 1
            self._seq = max(self._seq, event.seq)

    def _finding(self, event: FindingEvent) -> None:
        """A finding of the doctor: ``run.alert`` (an email or Slack message where the
        user set alerts up; offline it is kept in the run files), a line in the summary
        under ``doctor/<rule>``, and a row of the incremental table ``doctor/findings``.
        An update of a finding that grows is a new row and the summary's latest line; it
        alerts only when its severity rose (core/backends/alerts.py)."""
        level = {"critical": "ERROR", "warning": "WARN"}.get(event.severity, "INFO")
        if self._alerts.due(event):  # an update alerts only when its severity rose
            try:
                self._run.alert(title=slack_escape(f"trackmux doctor: {event.rule} at step "
                                                   f"{event.step}"),
                                text=slack_escape(event.message), level=level,
                                wait_duration=0)
            except Exception as exc:  # an alert is a courtesy; the record below is the data
                log.info("trackmux: wandb alert for %s not sent: %s", event.rule, exc)
        self._run.summary[f"doctor/{event.rule}"] = event.line()
        table = self._table("doctor/findings", ("step", "rule", "severity", "keys", "message"))
        table.add_data(event.step, event.rule, event.severity, ", ".join(event.keys),
                       event.message)
        self._run.log({"doctor/findings": table, STEP_KEY: event.step, SEQ_KEY: event.seq},
                      step=self._next_step, commit=True)
        self._next_step += 1

    def _artifact(self, event: ArtifactEvent) -> None:
        import wandb

        artifact = wandb.Artifact(event.name, type=event.type, metadata={
            "trackmux_step": event.step, "trackmux_seq": event.seq, "source": event.source})
        for file, local in zip(event.files, event.local, strict=True):
            if file.copied:
                artifact.add_file(local, name=file.path)
            else:
                artifact.add_reference(Path(local).as_uri(), name=file.path)
        self._run.log_artifact(artifact, aliases=[f"step{event.step}"])

    def _provenance(self, event: ProvenanceEvent) -> None:
        """Config section ``_provenance`` plus the ``code`` artifact (module docstring)."""
        from trackmux.core.values.redact import redact_text
        from trackmux.provenance.record import script_copy

        self._run.config.update({"_provenance": event.data}, allow_val_change=True)
        # kept beside wandb's folders: wandb may read the files after log_code returns
        folder = self.wandb_dir / f"trackmux-code-{self._run.id}-{event.seq}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "provenance.json").write_text(json.dumps(event.data, indent=2))
        if event.diff:  # redacted at the source; here too for spools written before that
            (folder / "diff.patch").write_text(
                event.diff if event.data.get("git", {}).get("diff_redacted")
                else redact_text(event.diff))
        # the entry script only with save_code=True (wandb's own default is off), redacted
        entry = event.data.get("command", {}).get("entry")
        script = script_copy(entry) if event.data.get("save_code") is True else None
        if script is not None:
            with contextlib.suppress(OSError):
                (folder / Path(str(entry)).name).write_text(script, encoding="utf-8")
        # wandb's own code record (artifact type "code", which only log_code may create)
        self._run.log_code(str(folder), name=f"source-{self._run.id}",
                           include_fn=lambda path, root=None: True)

    def _checked_row(self, event: Event) -> dict[str, Any]:
        """The history row of ``event``; an event wandb can never take is rejected (core
        then reports and skips it) instead of being retried forever."""
        from PIL import UnidentifiedImageError

        try:
            return self._row(event)
        except (TypeError, ValueError, UnidentifiedImageError) as exc:
            if isinstance(event, (TableEvent, TextEvent)):
                self._tables.pop(event.key, None)  # may hold some of the bad event's rows
            raise EventRejected(f"wandb cannot take {event.kind} {getattr(event, 'key', '')!r}"
                                f" at step {event.step}: {exc}") from exc

    def _row(self, event: Event) -> dict[str, Any]:
        import wandb

        if isinstance(event, MetricsEvent):
            for key, value in event.data.items():
                self._last[key] = (event.step, value)
                if key not in self._top or event.step >= self._top[key][0]:
                    self._top[key] = (event.step, value)
            return dict(event.data)
        if isinstance(event, ImageEvent):
            from PIL import Image

            with Image.open(BytesIO(event.png)) as image:
                image.load()
                return {event.key: wandb.Image(image, caption=event.caption)}
        if isinstance(event, TableEvent):
            table = self._table(event.key, event.columns)
            for cells in event.rows:
                table.add_data(*cells)
            return {event.key: table}
        if isinstance(event, HistogramEvent):
            row: dict[str, Any] = {f"{event.key}/{name}": n
                                   for name, n in event.nonfinite.items() if n}
            if event.count:
                binned: Any = (list(event.counts), list(event.edges))  # wandb takes lists too
                row[event.key] = wandb.Histogram(np_histogram=binned)
            return row
        if isinstance(event, TextEvent):
            table = self._table(event.key, ("step", "text"))
            table.add_data(event.step, event.text)
            return {event.key: table}
        raise TypeError(f"unknown event kind {event.kind!r}")

    def _table(self, key: str, columns: tuple[str, ...]) -> Any:
        """The incremental table of ``key``, continuing one an earlier delivery logged."""
        import wandb

        if self.options.get("tables", "incremental") == "per_step":
            return wandb.Table(columns=list(columns), allow_mixed_types=True)
        known = self._tables.get(key)
        if known is not None and known[0] == columns:
            return known[1]
        table = wandb.Table(columns=list(columns), allow_mixed_types=True,
                            log_mode="INCREMENTAL")
        earlier = self._resumed_tables.pop(key, None)
        if earlier is not None and known is None and hasattr(table, "_increment_num"):
            # offline wandb cannot read the resumed run's summary: continue its numbering
            table._increment_num = int(earlier.get("increment_num", 0)) + 1
            paths = list(earlier.get("previous_increments_paths") or [])
            if earlier.get("artifact_path"):
                paths.append(earlier["artifact_path"])
            table._previous_increments_paths = paths
        self._tables[key] = (columns, table)
        return table

    def close(self, status: str) -> None:
        if self._run is None:
            return
        # late (backwards) data came last: the summary shows the value at the highest step
        fixes = {key: top[1] for key, top in self._top.items()
                 if self._last.get(key) != top and not _same(self._last.get(key), top)}
        if fixes:
            self._run.summary.update(fixes)
        if status == "stopped":  # issue 45: wandb has no such state; the summary and a tag
            self._mark_stopped()
        self._run.finish(exit_code=0 if status in ("finished", "stopped") else 1)
        self._run = None
        # The next open of this run id (the retry after a failed write, a later sync in this
        # process) reads this log to skip what is already written: it must be whole by then.
        if self._log is not None and not wait_for_log(self._log, LOG_WRITE_TIMEOUT):
            log.warning("trackmux: wandb had not finished writing %s after %.0f s; a retry "
                        "may write its last rows again", self._log, LOG_WRITE_TIMEOUT)
        if status != "retrying":  # finish() returned: written (offline) or uploaded
            import shutil

            for folder in self._scratch:
                shutil.rmtree(folder, ignore_errors=True)

    def _mark_stopped(self) -> None:
        """The doctor stopped the run: ``trackmux/state`` and ``trackmux/stop_reason`` in
        the summary, and the tag ``stopped`` (wandb's states are only finished/failed)."""
        from trackmux.core.spool.runs import stop_reason_line

        why = stop_reason_line(self._run_dir) if self._run_dir is not None else ""
        self._run.summary.update({"trackmux/state": "stopped", "trackmux/stop_reason": why})
        tags = tuple(self._run.tags or ())
        if "stopped" not in tags:
            self._run.tags = (*tags, "stopped")


def _same(a: tuple[int, float] | None, b: tuple[int, float]) -> bool:
    """Equal, treating NaN as equal to NaN."""
    if a is None:
        return False
    return a[0] == b[0] and (a[1] == b[1] or (isinstance(a[1], float) and math.isnan(a[1])
                                              and isinstance(b[1], float) and math.isnan(b[1])))


@hookimpl
def trackmux_register_backends(register: RegisterBackend) -> None:
    register("wandb", WandbBackend, requires=("wandb",), extra="wandb",
             description="Weights & Biases: metrics on a trackmux/step axis, incremental "
                         "tables, images, config")
