"""mlflow backend: metrics, params, tables, images and text through ``MlflowClient``.

Behaves like verl's built-in mlflow logger where users depend on it, so existing launch
scripts and dashboards keep working:

- tracking URI: option ``tracking_uri``, else ``MLFLOW_TRACKING_URI``, else a local store
  in the trackmux dir, ``sqlite:///<trackmux dir>/mlflow/mlflow.db`` with artifacts in
  ``<trackmux dir>/mlflow/artifacts`` (one store for every run there; the verl drop-in sets
  verl's default ``sqlite:////tmp/mlruns.db`` as the option instead); ``MLFLOW_RUN_ID``
  (or option ``run_id``) attaches to an existing run; otherwise the experiment is the
  run's project and the run name its name;
- metric keys are renamed exactly as verl does (``@`` -> ``_at_``, repeated ``/``
  collapsed, other invalid characters -> ``_``; see :func:`mlflow_key`), except that two
  keys of one run never share a name: a key whose renamed form another key of the run
  already has gets a suffix from its own hash (core/backends/keynames.py; the names are
  kept in ``state()``, so resume and sync name every key the same way again);
- the config becomes params named as verl names them (``/``-flattened, lists as
  ``list_len`` plus ``0``, ``1``, ...), values cut to the server's limit; the whole config
  is also stored as the artifact ``trackmux/config.json``.

Histograms arrive as core's summary scalars (``<key>/count``, ``/mean``, ``/std``, ``/min``,
``/max``, ``/p05``, ``/p25``, ``/p50``, ``/p75``, ``/p95``, and ``/nan``, ``/inf``,
``/neginf`` when values were not finite), renamed like every metric. Artifacts go through
``client.log_artifacts`` under ``artifacts/<name>/step_<N>/`` keeping their folder layout.

Tables go through ``client.log_table`` (``tables/<key>/step_<N>.json``), which appends to
a file that exists: after a resume's ``rewind(N)`` the first table of each superseded step
(N < step <= the highest table step delivered before) replaces the file instead, so a
re-done step's table holds the live rows only (:meth:`MlflowBackend.rewind`). Images through
``client.log_image(key=, step=)`` (mlflow's stepped image charts), text through
``client.log_text`` (``text/<key>/step_<N>.md``). Requests respect mlflow's batch limits
(1000 metrics, 100 params, 1000 entities per ``log_batch``).

Provenance (issue 25) uses mlflow's own source tags, which its UI shows on the run page:
``mlflow.source.git.commit``, ``mlflow.source.git.branch``, ``mlflow.source.git.repoURL``
(credentials removed), ``mlflow.source.name`` (the entry script), ``mlflow.source.type``;
every other field is a ``trackmux.provenance.<section>.<field>`` tag, and the whole record
and the uncommitted diff are the artifacts ``provenance/provenance.json`` and
``provenance/uncommitted.diff``.

Exactly-once: every ``log_batch`` also sets the run tag ``trackmux.seq.<trackmux run id>``
to the highest event seq it completes, in the same request as the metrics. ``open`` reads
that tag back from the remote run and skips what it covers, so a redelivered batch is
harmless for every kind. Metrics keep their original step and time (ms), so even a
split event re-sent in part is an exact duplicate, which mlflow stores once.

Bounded waits: mlflow retries HTTP requests 7 times with a 120 s timeout by default (a dead
server held one call for 246 s). Core retries with its own backoff, so this backend sets
``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` / ``_BACKOFF_FACTOR`` / ``_TIMEOUT`` for the process
from the options ``http_max_retries`` (1), ``http_backoff_factor`` (1) and ``http_timeout``
(10 s); a value already in the environment wins over the default, an option over both.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trackmux.core.backends.contract import Backend, ResumeState, RunInfo
from trackmux.core.backends.keynames import KeyNames
from trackmux.core.errors import EventRejected
from trackmux.core.events import (
    ArtifactEvent,
    ConfigEvent,
    Event,
    FindingEvent,
    ImageEvent,
    MetricsEvent,
    ProvenanceEvent,
    TableEvent,
    TextEvent,
)
from trackmux.hookspecs import RegisterBackend, hookimpl

if TYPE_CHECKING:
    from mlflow import MlflowClient

log = logging.getLogger(__name__)

LOCAL_STORE = "mlflow"  # the default store's folder in the trackmux dir
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
PROVENANCE_TAG_LIMIT = 5000  # mlflow 2's tag value limit (mlflow 3 takes 8000)
MAX_KEY_LENGTH = 250
DEFAULT_PARAM_VALUE_LIMIT = 6000  # mlflow >= 2.x; read from mlflow at open() when present
SEQ_TAG_PREFIX = "trackmux.seq."
RUN_ID_TAG = "trackmux.run_id"
CONFIG_ARTIFACT = "trackmux/config.json"
NOTE_TAG = "mlflow.note.content"  # the run's description in mlflow's UI
DOCTOR_HEADING = "**trackmux doctor**"
STATUS = {"finished": "FINISHED", "crashed": "FAILED", "stopped": "KILLED"}
STATE_TAG = "trackmux.state"
STOP_REASON_TAG = "trackmux.stop_reason"

HTTP_OPTIONS = {  # option -> (environment variable, default)
    "http_max_retries": ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", 1),
    "http_backoff_factor": ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", 1),
    "http_timeout": ("MLFLOW_HTTP_REQUEST_TIMEOUT", 10),
}
OPTIONS = {"tracking_uri", "experiment_name", "run_name", "run_id", "artifact_location",
           *HTTP_OPTIONS}

# verl 0.9.1, verl/utils/tracking.py, _MlflowLoggingAdapter._sanitize_key: mlflow accepts
# slashes, word characters (Unicode), periods, dashes, colons and spaces.
_INVALID = re.compile(r"[^/\w.\- :]")
_SLASHES = re.compile(r"/+")
# log_image's key and artifact paths are stricter (ASCII, no colon).
_INVALID_ARTIFACT = re.compile(r"[^A-Za-z0-9_\-./ ]")


def verl_key(key: str) -> str:
    """The name verl's own mlflow logger gives ``key``, character for character."""
    return _INVALID.sub("_", _SLASHES.sub("/", key.replace("@", "_at_")))


def mlflow_key(key: str) -> str:
    """verl's name for ``key``, further changed only where mlflow would reject it.

    verl's mapping leaves keys mlflow refuses (a leading or trailing ``/``, ``.`` or
    ``..`` segments, more than 250 characters); verl's logger loses those, here they are
    made valid instead so one bad key cannot block delivery.
    """
    name = verl_key(key)
    parts = name.split("/")
    if name.startswith("/") or name.endswith("/") or any(p in (".", "..") for p in parts):
        name = "/".join("_" * len(p) if p in (".", "..") else p for p in parts if p) or "_"
    if len(name) > MAX_KEY_LENGTH:
        digest = hashlib.sha1(key.encode()).hexdigest()[:8]
        name = name[:MAX_KEY_LENGTH - 9] + "_" + digest
    return name


MAX_ARTIFACT_KEY = 120  # bytes; log_image adds ~70 (step, timestamp, uuid) to a file name


def artifact_key(key: str) -> str:
    """A key usable in ``log_image(key=)`` and in artifact paths: ASCII, and short enough
    that mlflow's stepped image file name (the key with ``/`` replaced, plus step,
    timestamp and a uuid) stays under the 255-byte limit of file systems; a longer key
    is cut and ends in a hash of the whole key, so distinct keys stay distinct."""
    name = _INVALID_ARTIFACT.sub("_", mlflow_key(key)).strip("/") or "_"
    if len(name) > MAX_ARTIFACT_KEY:
        digest = hashlib.sha1(key.encode()).hexdigest()[:8]
        name = name[:MAX_ARTIFACT_KEY - 9].rstrip("/") + "_" + digest
    return name


def _old_stepped_image_names() -> bool:
    """True where mlflow names stepped images the old way (``<key with / as #>%step%<N>%...``;
    mlflow 2.x and 3.x until early 2026, e.g. 3.10, mlflow#22165): such paths with ``#``
    are not served, and the server URL-decodes ``%50`` on upload (step 50 is stored as
    ``P``; mlflow#21085). Current mlflow uses ``~`` and ``+``. The version number does not
    tell (the change came within 3.x), so this reads the installed mlflow's source."""
    import inspect

    from mlflow import MlflowClient

    try:
        return '"#", key' in inspect.getsource(MlflowClient.log_image)
    except (OSError, TypeError):  # no source available: assume a current mlflow
        return False


def verl_params(config: Mapping[str, Any]) -> dict[str, str]:
    """Flat params named as verl's ``_compute_mlflow_params_from_objects`` names them:
    nested keys joined with ``/``, a list as ``<key>/list_len`` plus one key per index."""
    out: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(f"{prefix}/{k}" if prefix else str(k), v)
        elif isinstance(value, (list, tuple)):
            walk(prefix, {"list_len": len(value), **{str(i): v for i, v in enumerate(value)}})
        else:
            out[prefix] = str(value)

    walk("", config)
    return out


def _number(options: Mapping[str, Any], name: str, default: float) -> float:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"mlflow option {name!r} must be a number >= 0, got {value!r}")
    return float(value)


class MlflowBackend(Backend):
    """One mlflow run per trackmux run, written with ``MlflowClient.log_batch``."""

    name = "mlflow"
    capabilities = frozenset({"metrics", "config", "table", "image", "text", "artifact",
                              "provenance", "finding"})
    destination_options = ("tracking_uri", "experiment_name")
    max_sample_rows = 100  # samples shown per log_samples batch (docs/samples.md)

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        unknown = sorted(set(self.options) - OPTIONS)
        if unknown:
            raise ValueError(f"unknown mlflow option(s) {unknown}; valid: {sorted(OPTIONS)}")
        for name in ("tracking_uri", "experiment_name", "run_name", "run_id",
                     "artifact_location"):
            value = self.options.get(name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"mlflow option {name!r} must be a non-empty str, got {value!r}")
        for name, (_, default) in HTTP_OPTIONS.items():
            _number(self.options, name, default)
        self._run_id: str | None = None
        self._client: MlflowClient | None = None
        self._run_dir: Path | None = None  # the spool's run folder (a stop's reason)
        self._stopped_before = False  # a resumed run that was stopped: its state tag moves
        self._done_seq = 0
        self._last_time: float | None = None
        self._names_from({})
        self._tables_from({})

    def _names_from(self, state: Mapping[str, Any]) -> None:
        """Metric, param and artifact-path names (three namespaces in mlflow), continued
        from an earlier delivery's ``state()``."""
        names = state.get("names") if isinstance(state.get("names"), Mapping) else {}
        assert isinstance(names, Mapping)
        self._metric_names = KeyNames(mlflow_key, "mlflow metric", max_length=MAX_KEY_LENGTH,
                                      state=names.get("metrics"))
        self._param_names = KeyNames(mlflow_key, "mlflow param", max_length=MAX_KEY_LENGTH,
                                     state=names.get("params"))
        self._path_names = KeyNames(artifact_key, "mlflow artifact path",
                                    max_length=MAX_ARTIFACT_KEY, state=names.get("paths"))

    def _tables_from(self, state: Mapping[str, Any]) -> None:
        """Where tables stand (continued from ``state()``): the highest step of a table
        delivered (``top``), and after a rewind the superseded window (``lo``, ``hi``] and
        the table files of that window already replaced by the resumed attempt."""
        tables = state.get("tables") if isinstance(state.get("tables"), Mapping) else {}
        assert isinstance(tables, Mapping)
        self._table_top = int(tables.get("top", -1))
        window = tables.get("window")
        self._table_window = (int(window[0]), int(window[1])) if window else None
        self._tables_replaced = set(tables.get("replaced", ()))
        #: rows this attempt wrote to each replaced table (later tables of that step append)
        self._replaced_rows: dict[str, dict[str, list[Any]]] = {}

    # -- opening ----------------------------------------------------------------------
    def _configure_http(self) -> None:
        """Bound mlflow's HTTP retries for this process (see the module docstring)."""
        for name, (variable, default) in HTTP_OPTIONS.items():
            if name in self.options:
                value = _number(self.options, name, default)
            elif variable in os.environ:
                continue
            else:
                value = default
            os.environ[variable] = str(int(value)) if name != "http_backoff_factor" else (
                f"{value:g}")

    @property
    def tracking_uri(self) -> str | None:
        """The chosen URI; None: the local store in the trackmux dir (known at ``open``)."""
        chosen = (self.options.get("tracking_uri") or os.environ.get("MLFLOW_TRACKING_URI")
                  or getattr(self, "_local_uri", None))
        return str(chosen) if chosen else None

    def _local_store(self, run: RunInfo) -> None:
        """No URI chosen: a SQLite store (and its artifacts) in the trackmux dir that holds
        the run, so nothing lands in /tmp or beside the working directory."""
        from pathlib import Path

        root = Path(run.run_dir).absolute().parent.parent / LOCAL_STORE
        root.mkdir(parents=True, exist_ok=True)
        self._local_uri = f"sqlite:///{root / 'mlflow.db'}"
        self._local_artifacts: str | None = str(root / "artifacts")

    def where(self) -> str | None:
        from trackmux.core.values.redact import redact_text

        uri = self.tracking_uri
        return redact_text(uri) if uri else None

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        self._configure_http()
        if self.tracking_uri is None:
            self._local_store(run)
        from mlflow import MlflowClient

        try:
            from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH
            self._param_limit = int(MAX_PARAM_VAL_LENGTH)
        except ImportError:  # pragma: no cover - very old mlflow
            self._param_limit = DEFAULT_PARAM_VALUE_LIMIT
        client = MlflowClient(tracking_uri=self.tracking_uri)
        self._client = client
        self._mlflow2_artifacts_need_global_uri()
        self._seq_tag = SEQ_TAG_PREFIX + mlflow_key(run.run_id)
        run_id = (resume.remote_id or self.options.get("run_id")
                  or os.environ.get("MLFLOW_RUN_ID"))
        remote = client.get_run(run_id) if run_id else self._find_or_create(client, run)
        self._run_id = remote.info.run_id
        self._run_dir = Path(run.run_dir)
        self._stopped_before = STATE_TAG in remote.data.tags
        if remote.info.status != "RUNNING":
            client.update_run(self._run_id, status="RUNNING")
        self._done_seq = int(remote.data.tags.get(self._seq_tag, 0) or 0)
        self._params: dict[str, str] = dict(remote.data.params)
        self._stepped_images = not _old_stepped_image_names()
        self._names_from(resume.state or {})
        self._tables_from(resume.state or {})

    def _mlflow2_artifacts_need_global_uri(self) -> None:
        """mlflow 2.x resolves ``mlflow-artifacts:`` URIs (artifacts proxied by the server)
        with the process-wide tracking URI, not the client's, and fails unless that is an
        http(s) URI. There, set it as verl's own logger does; mlflow 3 needs nothing."""
        import mlflow

        uri = self.tracking_uri or ""  # set by open() before this is called
        if int(mlflow.__version__.split(".")[0]) >= 3 or not uri.startswith(("http:", "https:")):
            return
        current = mlflow.get_tracking_uri()
        if current != uri:
            if current.startswith(("http:", "https:")):
                log.warning("mlflow 2.x: the process-wide tracking URI %s is replaced by %s "
                            "so that artifacts can be uploaded", current, uri)
            mlflow.set_tracking_uri(uri)

    def _find_or_create(self, client: MlflowClient, run: RunInfo) -> Any:
        """The run created for this trackmux run earlier (its remote id may have been
        lost with an acknowledgement), else a new one."""
        from mlflow.exceptions import MlflowException

        name = self.options.get("experiment_name") or run.project
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            try:
                experiment_id = client.create_experiment(
                    name, artifact_location=self.options.get("artifact_location") or (
                        getattr(self, "_local_artifacts", None)))
            except MlflowException:  # created concurrently by another worker
                experiment = client.get_experiment_by_name(name)
                if experiment is None:
                    raise
                experiment_id = experiment.experiment_id
        else:
            experiment_id = experiment.experiment_id
        quoted = run.run_id.replace("'", "")
        found = client.search_runs([experiment_id],
                                   filter_string=f"tags.`{RUN_ID_TAG}` = '{quoted}'",
                                   max_results=1)
        if found:
            return found[0]
        start = int(run.started_at * 1000) if run.started_at else None
        return client.create_run(experiment_id, start_time=start,
                                 run_name=self.options.get("run_name") or run.name,
                                 tags={RUN_ID_TAG: run.run_id})

    # -- writing ----------------------------------------------------------------------
    def _key(self, key: str) -> str:
        return self._metric_names(key)

    def _batch(self, metrics: Sequence[Any] = (), params: Sequence[Any] = (),
               done: int | None = None) -> None:
        """One ``log_batch``; ``done``: the seq this request completes (tagged with it)."""
        from mlflow.entities import RunTag
        from mlflow.exceptions import MlflowException

        assert self._client is not None and self._run_id is not None
        tags = [RunTag(self._seq_tag, str(done))] if done is not None else []
        try:
            self._client.log_batch(self._run_id, metrics=metrics, params=params, tags=tags,
                                   synchronous=True)
        except MlflowException as exc:
            if getattr(exc, "error_code", "") == "INVALID_PARAMETER_VALUE":
                raise EventRejected(f"mlflow refused the batch: {exc.message}") from exc
            raise
        if done is not None:
            self._done_seq = done

    def write(self, events: Sequence[Event]) -> None:
        if len(events) == 1 and isinstance(events[0], MetricsEvent):
            try:
                self._write(events)
            except EventRejected:  # core retries a refused event alone: find the keys
                self._write_keys_alone(events[0])
            return
        self._write(events)

    def _write_keys_alone(self, event: MetricsEvent) -> None:
        """Per-key quarantine: send each key of a refused event on its own, so one key
        mlflow refuses does not drop the others; raise EventRejected naming the refused."""
        from mlflow.entities import Metric

        stamp = int(event.time * 1000)
        refused: list[str] = []
        reason = ""
        self._metric_names.prepare(event.data)
        for key, value in event.data.items():
            try:
                self._batch(metrics=[Metric(self._key(key), float(value), stamp, event.step)])
            except EventRejected as exc:
                refused.append(key)
                reason = str(exc)
        self._batch(done=event.seq)
        if refused:
            raise EventRejected(f"mlflow refused {len(refused)} key(s) of event {event.seq}: "
                                f"{reason}", keys=refused)

    def _write(self, events: Sequence[Event]) -> None:
        from mlflow.entities import Metric

        assert self._client is not None
        pending: list[tuple[Any, int | None]] = []  # (Metric or None, seq it completes)
        for event in events:
            if event.seq and event.seq <= self._done_seq:
                continue  # delivered before the acknowledgement was lost
            self._last_time = event.time
            if isinstance(event, MetricsEvent):
                stamp = int(event.time * 1000)
                self._metric_names.prepare(event.data)
                items: list[tuple[Any, int | None]] = [
                    (Metric(self._key(k), float(v), stamp, event.step), None)
                    for k, v in event.data.items()]
                if items:
                    items[-1] = (items[-1][0], event.seq)
                else:
                    items = [(None, event.seq)]
                pending.extend(items)
                if sum(m is not None for m, _ in pending) >= MAX_METRICS_PER_BATCH:
                    pending = self._send_metrics(pending, keep_partial=True)
                continue
            self._send_metrics(pending)
            pending = []
            try:
                self._write_other(event)
            except (ValueError, TypeError) as exc:  # mlflow's client-side validation
                raise EventRejected(f"mlflow cannot take {event.kind} event {event.seq}: "
                                    f"{exc}") from exc
        self._send_metrics(pending)

    def _send_metrics(self, pending: list[tuple[Any, int | None]],
                      keep_partial: bool = False) -> list[tuple[Any, int | None]]:
        """Send pending metrics in requests within mlflow's limits. With ``keep_partial``,
        a last request smaller than the limit is kept back (returned) to fill up later."""
        limit = MAX_METRICS_PER_BATCH - 1  # one entity is left for the seq tag
        while pending:
            chunk: list[Any] = []
            done: int | None = None
            used = 0
            for metric, seq in pending:
                if metric is not None:
                    if len(chunk) == limit:
                        break
                    chunk.append(metric)
                used += 1
                if seq is not None:
                    done = seq
            if keep_partial and len(chunk) < limit:
                return pending
            self._batch(metrics=chunk, done=done)
            pending = pending[used:]
        return []

    def _write_other(self, event: Event) -> None:
        from mlflow.entities import Param

        assert self._client is not None and self._run_id is not None
        client, run_id = self._client, self._run_id
        if isinstance(event, ConfigEvent):
            client.log_dict(run_id, event.config, CONFIG_ARTIFACT)
            params: dict[str, str] = {}
            changed = []
            flat = verl_params(event.config)
            self._param_names.prepare(flat)
            for key, value in flat.items():
                name, value = self._param_names(key), value[:self._param_limit]
                if name in params:
                    continue
                old = self._params.get(name)
                if old is None:
                    params[name] = value
                elif old != value:
                    changed.append(name)
            if changed:  # mlflow params cannot change; the JSON artifact has the new values
                log.warning("mlflow params cannot change; kept the first values of %s "
                            "(the new config is in the artifact %s)", changed[:10],
                            CONFIG_ARTIFACT)
            items = [Param(k, v) for k, v in params.items()]
            for start in range(0, max(len(items), 1), MAX_PARAMS_PER_BATCH):
                chunk = items[start:start + MAX_PARAMS_PER_BATCH]
                last = start + MAX_PARAMS_PER_BATCH >= len(items)
                self._batch(params=chunk, done=event.seq if last else None)
                self._params.update((p.key, p.value) for p in chunk)
            return
        if isinstance(event, TableEvent):
            data = {column: [row[i] for row in event.rows]
                    for i, column in enumerate(event.columns)}
            path = f"tables/{self._path_names(event.key)}/step_{event.step}.json"
            window = self._table_window
            earlier = self._replaced_rows.get(path)
            if (window is not None and window[0] < event.step <= window[1]
                    and (path not in self._tables_replaced
                         or (earlier is not None and list(earlier) == list(data)))):
                # a re-done step: its first table replaces the superseded file; later ones
                # of this attempt are appended here, from the rows this backend wrote (on
                # mlflow 2, log_table's own append lost the replaced rows)
                if earlier is not None:
                    data = {c: earlier[c] + data[c] for c in data}
                self._replace_table(path, data)
                self._replaced_rows[path] = data
            else:
                client.log_table(run_id, data=data, artifact_file=path)
            self._table_top = max(self._table_top, event.step)
        elif isinstance(event, ImageEvent):
            from PIL import Image

            with Image.open(io.BytesIO(event.png)) as image:
                image.load()
                if self._stepped_images:
                    client.log_image(run_id, image, key=self._path_names(event.key),
                                     step=event.step, timestamp=int(event.time * 1000),
                                     synchronous=True)
                else:
                    client.log_image(run_id, image, artifact_file=(
                        f"images/{self._path_names(event.key)}/step_{event.step}.png"))
        elif isinstance(event, TextEvent):
            client.log_text(run_id, event.text,
                            f"text/{self._path_names(event.key)}/step_{event.step}.md")
        elif isinstance(event, ArtifactEvent):
            self._log_artifact(event)
        elif isinstance(event, ProvenanceEvent):
            self._provenance(event)
        elif isinstance(event, FindingEvent):
            self._finding(event)
        self._batch(done=event.seq)

    def _provenance(self, event: ProvenanceEvent) -> None:
        """mlflow's own source tags (``mlflow.source.git.commit`` ...), every other small
        field as a ``trackmux.provenance.*`` tag, the whole record and the diff as files."""
        from mlflow.entities import RunTag

        from trackmux.provenance.text import flat

        assert self._client is not None and self._run_id is not None
        data = event.data
        git = data.get("git", {})
        entry = data.get("command", {}).get("entry")
        tags = {"mlflow.source.type": "LOCAL"}
        for name, value in (("mlflow.source.git.commit", git.get("commit")),
                            ("mlflow.source.git.branch", git.get("branch")),
                            ("mlflow.source.git.repoURL", git.get("remote")),
                            ("mlflow.gitRepoURL", git.get("remote")),
                            ("mlflow.source.name", entry)):
            if value:
                tags[name] = str(value)
        for key, value in flat({k: v for k, v in data.items() if k != "env"}).items():
            if not key.startswith("git.untracked."):
                tags[f"trackmux.provenance.{key}"[:250]] = value[:PROVENANCE_TAG_LIMIT]
        items = [RunTag(k, v) for k, v in tags.items()]
        for start in range(0, len(items), MAX_PARAMS_PER_BATCH):
            self._client.log_batch(self._run_id, tags=items[start:start + MAX_PARAMS_PER_BATCH],
                                   synchronous=True)
        self._client.log_dict(self._run_id, {"step": event.step, **data},
                              "provenance/provenance.json")
        if event.diff:
            self._client.log_text(self._run_id, event.diff, "provenance/uncommitted.diff")

    def _finding(self, event: FindingEvent) -> None:
        """A finding of the doctor: a tag ``trackmux.doctor.<rule>`` (the latest of that
        rule) and a line in the run's note (``mlflow.note.content``, the UI's
        description), under a heading of its own; the user's note above it is kept."""
        assert self._client is not None and self._run_id is not None
        line = event.line()
        rule = re.sub(r"[^A-Za-z0-9_.\-]", "_", event.rule)
        self._client.set_tag(self._run_id, f"trackmux.doctor.{rule}", line[:5000])
        note = self._client.get_run(self._run_id).data.tags.get(NOTE_TAG, "")
        if line in note:
            return  # redelivered
        if DOCTOR_HEADING not in note:
            note = (note + "\n\n" if note else "") + DOCTOR_HEADING
        self._client.set_tag(self._run_id, NOTE_TAG, f"{note}\n- {line}")

    def _log_artifact(self, event: ArtifactEvent) -> None:
        """Stage the files under their own names (symlinks to the copies or referenced
        files) and upload the tree in one ``log_artifacts`` call."""
        import tempfile
        from pathlib import Path

        assert self._client is not None and self._run_id is not None
        with tempfile.TemporaryDirectory(prefix="trackmux-artifact-") as tmp:
            for file, local in zip(event.files, event.local, strict=True):
                target = Path(tmp, *file.path.split("/"))
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(local)
            self._client.log_artifacts(self._run_id, tmp, artifact_path=(
                f"artifacts/{self._path_names(event.name)}/step_{event.step}"))

    def _replace_table(self, path: str, data: dict[str, list[Any]]) -> None:
        """Write the table at ``path`` over a superseded attempt's file (``log_table``
        would append to it), in ``log_table``'s format (pandas JSON, orient "split")."""
        import tempfile

        import pandas as pd

        assert self._client is not None and self._run_id is not None
        folder, name = path.rsplit("/", 1)
        existing = {a.path for a in self._client.list_artifacts(self._run_id, folder)}
        if path not in existing:  # the earlier attempt never delivered this step's table
            self._client.log_table(self._run_id, data=data, artifact_file=path)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                local = os.path.join(tmp, name)
                pd.DataFrame(data).to_json(local, orient="split", index=False,
                                           date_format="iso")
                self._client.log_artifact(self._run_id, local, folder)
        self._tables_replaced.add(path)

    def rewind(self, step: int) -> None:
        """Tables of steps after ``step`` that earlier attempts delivered are replaced by
        the resumed attempt's first table of that key and step (metric points cannot be
        deleted in mlflow; their latest timestamp per step is the live one)."""
        self._table_window = (step, self._table_top) if self._table_top > step else None
        self._tables_replaced = set()
        self._replaced_rows = {}

    # -- the rest of the contract ------------------------------------------------------
    @property
    def remote_id(self) -> str | None:
        return self._run_id

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"run_id": self._run_id, "seq": self._done_seq}
        names = {kind: value for kind, value in (
            ("metrics", self._metric_names.state()), ("params", self._param_names.state()),
            ("paths", self._path_names.state())) if value}
        if names:
            state["names"] = names
        tables: dict[str, Any] = {"top": self._table_top} if self._table_top >= 0 else {}
        if self._table_window is not None and self._table_top > self._table_window[0]:
            tables["window"] = list(self._table_window)
            tables["replaced"] = sorted(self._tables_replaced)
        if tables:
            state["tables"] = tables
        return state

    def close(self, status: str) -> None:
        """End the run: "finished" -> FINISHED, "crashed"/"failed" -> FAILED (a crash is a
        failure), "stopped" -> KILLED (mlflow's word for stopped on purpose: the doctor's
        ``stop_on``, with the tags ``trackmux.state`` and ``trackmux.stop_reason``). End
        time: the last event's time. "retrying" (core reopens after a failed write) leaves
        the run as it is."""
        if self._client is None or self._run_id is None or status == "retrying":
            return  # "retrying": core opens the same run again at once; it stays RUNNING
        if status == "stopped" and self._run_dir is not None:
            from trackmux.core.spool.runs import stop_reason_line

            self._client.set_tag(self._run_id, STOP_REASON_TAG,
                                 stop_reason_line(self._run_dir)[:5000])
        if status == "stopped" or self._stopped_before:  # the last attempt's state
            self._client.set_tag(self._run_id, STATE_TAG, status)
        end = int(self._last_time * 1000) if self._last_time else int(time.time() * 1000)
        self._client.set_terminated(self._run_id, STATUS.get(status, "FAILED"), end_time=end)


@hookimpl
def trackmux_register_backends(register: RegisterBackend) -> None:
    register("mlflow", MlflowBackend, requires=("mlflow",), extra="mlflow",
             description="mlflow tracking server or sqlite store, verl's key names")
