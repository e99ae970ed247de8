"""MLflow runs, read through ``MlflowClient`` (a file store, SQLite, or a server).

Sources: ``mlflow:RUN_ID`` (one run) or ``mlflow:EXPERIMENT_NAME`` (every run of the
experiment), at ``--tracking-uri`` or ``MLFLOW_TRACKING_URI``. Carried over: the full
history of every metric (``get_metric_history``: value, step, timestamp), params (as the
run's config, strings as MLflow keeps them) and tags (under ``_mlflow.tags``); the run's
start time; its experiment's name as the project. A file store (``./mlruns``) is read
with ``MLFLOW_ALLOW_FILE_STORE=true`` set for this process (MLflow 3 refuses one
otherwise). Not carried over: artifacts, datasets,
traces, model registry entries.

The cursor of each metric is the number of its points imported (its history sorted by
timestamp, then step) and its latest point: a run that logged more adds only the new
points, and a ``--follow`` poll reads the history only of metrics whose latest point
moved (one ``get_run`` per poll otherwise). ``--follow`` stops when the run is no longer
RUNNING.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

from trackmux.core.events import MetricsEvent
from trackmux.importers.base import Chunk, SourceError, SourceRun

PAGE = 1000


class MlflowRun(SourceRun):
    format = "mlflow"

    def __init__(self, client: Any, uri: str, run: Any, experiment: str) -> None:
        run_id = run.info.run_id
        super().__init__(f"{uri}\0{run_id}", run.info.run_name or run_id, f"mlflow:{run_id}",
                         experiment)
        self.client = client
        self.mlflow_id = run_id
        self.uri = uri
        self._run = run

    def config(self) -> dict[str, Any]:
        data = self._run.data
        return {**dict(data.params),
                "_mlflow": {"run_id": self.mlflow_id, "tracking_uri": self.uri,
                            "tags": dict(data.tags)}}

    def started_at(self) -> float | None:
        start = self._run.info.start_time
        return start / 1000.0 if start else None

    def finished(self) -> bool:
        return str(self._run.info.status) != "RUNNING"

    def read(self, cursors: Mapping[str, Any], live: bool) -> Iterator[Chunk]:
        self._run = self.client.get_run(self.mlflow_id)  # its latest metrics, params, status
        latest = {m.key: [int(m.timestamp), int(m.step)]
                  for m in self._run.data.to_proto().metrics}
        points: list[tuple[int, int, str, float]] = []
        moved: dict[str, Any] = {}
        for key in sorted(self._run.data.metrics):
            cursor = cursors.get(f"metric:{key}") or {}
            done = int(cursor.get("n", 0))
            if live and done and cursor.get("latest") == latest.get(key):
                continue  # a poll of a live run: its latest point is the one seen last
            history = sorted(self.client.get_metric_history(self.mlflow_id, key),
                             key=lambda m: (m.timestamp, m.step))
            if len(history) <= done:
                continue
            moved[f"metric:{key}"] = {"n": len(history), "latest": latest.get(key)}
            points += [(int(m.step), int(m.timestamp), key, float(m.value))
                       for m in history[done:]]
        points.sort(key=lambda p: (p[0], p[1]))
        chunk = Chunk(cursors=moved)
        group: dict[str, float] = {}
        step, when = 0, 0
        for point_step, stamp, key, value in points:
            if group and (point_step != step or key in group):
                chunk.events.append(MetricsEvent(group, step, when / 1000.0))
                group = {}
            if not group:
                step, when = point_step, stamp
            group[key] = value
        if group:
            chunk.events.append(MetricsEvent(group, step, when / 1000.0))
        yield chunk


def find(source: str, options: Mapping[str, Any]) -> list[SourceRun]:
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    name = source.removeprefix("mlflow:")
    uri = options.get("tracking_uri")
    if not uri:
        raise SourceError(f"{source}: which MLflow? pass --tracking-uri or set "
                          "MLFLOW_TRACKING_URI")
    if "://" not in uri or uri.startswith("file:"):
        # an old ./mlruns folder: MLflow 3 reads one only when asked to (reading it is
        # what a migration away from it needs)
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=uri)
    try:
        run = client.get_run(name)
    except MlflowException:
        run = None
    except Exception as exc:  # a server that does not answer
        raise SourceError(f"{source}: cannot reach MLflow at {uri}: "
                          f"{type(exc).__name__}: {exc}") from None
    if run is not None:
        owner = client.get_experiment(run.info.experiment_id)
        return [MlflowRun(client, uri, run, owner.name)]
    try:
        experiment = client.get_experiment_by_name(name)
    except MlflowException as exc:
        raise SourceError(f"{source}: {exc.message}") from None
    if experiment is None:
        raise SourceError(f"{source}: no MLflow run id or experiment named {name!r} at {uri}")
    runs: list[SourceRun] = []
    token = None
    while True:
        page = client.search_runs([experiment.experiment_id], max_results=PAGE,
                                  page_token=token)
        runs += [MlflowRun(client, uri, run, experiment.name) for run in page]
        token = page.token
        if not token:
            return runs
