"""The mlflow backend against a SQLite store and a real ``mlflow server`` on 127.0.0.1.

Everything is read back with mlflow's own client (metric history, params, artifacts).
Runs under mlflow 2.x and 3.x (tox envs mlflow2 and mlflow3).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mlflow")

from mlflow import MlflowClient
from PIL import Image

from trackmux.core.backends.contract import ResumeState, RunInfo
from trackmux.core.events import ConfigEvent, ImageEvent, MetricsEvent
from trackmux.plugins.mlflow import (
    MlflowBackend,
    artifact_key,
    mlflow_key,
    verl_key,
)
from trackmux.testing import BackendConformance, Readback, sample_run
from trackmux.testing.mlflow_server import MlflowServer

# Dead-server writes must give up within this bound (the issue: "a dead server cannot
# hold a worker for minutes"); mlflow's defaults held one call 246 s. The backend's own
# settings give up in ~2 s: 60 s (30x that, 4x under mlflow's defaults) is a bound only
# unbounded retries or timeouts reach on a loaded machine, not a speed claim.
DEAD_SERVER_BOUND_S = 60.0
_IMAGE_NAME = re.compile(r"^(?P<key>.+?)[+%]step[+%](?P<step>\d+)[+%]timestamp[+%]\d+[+%]"
                         r"[^+%/]+\.png$")


HTTP_VARIABLES = ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
                  "MLFLOW_HTTP_REQUEST_TIMEOUT")


@pytest.fixture(autouse=True)
def _no_ambient_mlflow(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    # the backend sets these for the whole process; keep one test's values out of the next
    saved = {name: os.environ.get(name) for name in HTTP_VARIABLES}
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _walk(client: MlflowClient, run_id: str, path: str | None = None) -> list[str]:
    out: list[str] = []
    for info in client.list_artifacts(run_id, path):
        out.extend(_walk(client, run_id, info.path) if info.is_dir else [info.path])
    return out


def _local_artifacts(artifact_uri: str, server_root: Path | None) -> Path:
    """Where a run's artifacts are on this machine. Images are read from there: mlflow 2
    names them ``...%step%50...`` and its own download URL-decodes ``%50`` (mlflow#21085)."""
    if artifact_uri.startswith("mlflow-artifacts:"):
        assert server_root is not None
        return server_root / artifact_uri.split(":", 1)[1].lstrip("/")
    return Path(artifact_uri.removeprefix("file://"))


def read_mlflow(uri: str, experiment: str, tmp_path: Path,
                server_root: Path | None = None) -> Readback:
    """What the store holds for the (single) run of ``experiment``, via MlflowClient."""
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"experiment {experiment!r} missing"
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1, f"expected one run, found {len(runs)}"
    run_id = runs[0].info.run_id
    out = Readback()
    for key in runs[0].data.metrics:
        history = client.get_metric_history(run_id, key)
        out.metrics[key] = sorted((m.step, m.value) for m in history)
        out.times[key] = sorted((m.step, m.timestamp / 1000) for m in history)
    out.config = dict(runs[0].data.params) or None
    download = tmp_path / "download"
    download.mkdir(exist_ok=True)  # mlflow 2 refuses a missing destination
    for path in _walk(client, run_id):
        match = re.fullmatch(r"tables/(.+)/step_(\d+)\.json", path)
        if match:
            local = client.download_artifacts(run_id, path, str(download))
            table = json.loads(Path(local).read_text())
            out.tables.setdefault(match[1], []).append((int(match[2]), table["data"]))
        text = re.fullmatch(r"text/(.+)/step_(\d+)\.md", path)
        if text:
            local = client.download_artifacts(run_id, path, str(download))
            out.texts.setdefault(text[1], []).append((int(text[2]), Path(local).read_text()))
        artifact = re.fullmatch(r"artifacts/([^/]+)/step_(\d+)/(.+)", path)
        if artifact:
            local = _local_artifacts(runs[0].info.artifact_uri, server_root) / path
            files = out.artifacts.setdefault(artifact[1], [])
            if not files or files[-1][0] != int(artifact[2]):
                files.append((int(artifact[2]), {}))
            files[-1][1][artifact[3]] = local.stat().st_size
        name = path.rpartition("/")[2]
        stepped = _IMAGE_NAME.match(name) if path.startswith("images/") else None
        plain = re.fullmatch(r"images/(.+)/step_(\d+)\.png", path)  # mlflow 2.x
        if stepped or plain:
            local = _local_artifacts(runs[0].info.artifact_uri, server_root) / path
            key, step = ((stepped["key"].replace("~", "/"), stepped["step"]) if stepped
                         else (plain[1], plain[2]))  # type: ignore[index]
            with Image.open(local) as png:
                out.images.setdefault(key, []).append((int(step), png.width, png.height))
    for values in out.tables.values():
        values.sort()
    for images in out.images.values():
        images.sort()
    return out


def _experiment(tmp_path: Path) -> str:
    """One experiment per test: the conformance run always has the same trackmux id."""
    return f"conformance-{abs(hash(str(tmp_path))) % 10**10}"


class TestMlflowSqlite(BackendConformance):
    kinds = frozenset({"metrics", "config", "table", "image", "text", "time", "artifact"})
    invalid_options = {"no_such_option": 1}
    nonfinite = "kept"  # NaN kept; inf comes back as 1.797e308 (accepted by the suite)

    def uri(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'mlflow.db'}"

    def make_backend(self, tmp_path: Path) -> MlflowBackend:
        return MlflowBackend({"tracking_uri": self.uri(tmp_path),
                              "experiment_name": _experiment(tmp_path),
                              "artifact_location": str(tmp_path / "artifacts")})

    def read_back(self, tmp_path: Path) -> Readback:
        return read_mlflow(self.uri(tmp_path), _experiment(tmp_path), tmp_path)

    def expected_key(self, key: str) -> str:
        return mlflow_key(key)

    def test_params_named_as_verl_and_config_artifact(self, tmp_path: Path) -> None:
        run = sample_run(tmp_path, steps=2)
        self.deliver(tmp_path, run)
        client = MlflowClient(tracking_uri=self.uri(tmp_path))
        exp = client.get_experiment_by_name(_experiment(tmp_path))
        assert exp is not None
        (remote,) = client.search_runs([exp.experiment_id])
        params = remote.data.params
        # verl: "/"-joined, lists as list_len + one key per index, values str()
        assert params["actor/optim/lr"] == "1e-06"
        assert params["actor/optim/betas/list_len"] == "2"
        assert params["actor/optim/betas/1"] == "0.999"
        assert params["trainer/logger/0"] == "console"
        assert remote.info.run_name == "conformance-run"
        assert remote.info.status == "FINISHED"
        (tmp_path / "dl").mkdir()
        local = client.download_artifacts(remote.info.run_id, "trackmux/config.json",
                                          str(tmp_path / "dl"))
        assert json.loads(Path(local).read_text())["actor"]["ppo_mini_batch_size"] == 64


class TestMlflowServer(TestMlflowSqlite):
    """The same suite over HTTP; artifacts are uploaded through the server."""

    @pytest.fixture(autouse=True)
    def _server(self, mlflow_server: MlflowServer) -> None:
        self.server = mlflow_server

    def uri(self, tmp_path: Path) -> str:
        return self.server.url

    def read_back(self, tmp_path: Path) -> Readback:
        return read_mlflow(self.uri(tmp_path), _experiment(tmp_path), tmp_path,
                           self.server.artifacts_dir)

    def make_backend(self, tmp_path: Path) -> MlflowBackend:
        return MlflowBackend({"tracking_uri": self.server.url,
                              "experiment_name": _experiment(tmp_path)})


def test_key_names_are_the_ones_verl_gives() -> None:
    """The mlflow key names for {'val-core/acc/mean@5', 'timing_s/gen', 'a//b', 'bad key#'}
    are the same as verl's built-in mlflow logger produces.

    Expected values derived by hand from verl 0.9.1, verl/utils/tracking.py,
    ``_MlflowLoggingAdapter._sanitize_key``: replace "@" by "_at_", then collapse runs of
    "/" (``re.sub("/+", "/")``), then replace every character outside ``[/\\w.\\- :]`` by
    "_" (so the space in 'bad key#' stays and '#' becomes '_').
    """
    expected = {
        "val-core/acc/mean@5": "val-core/acc/mean_at_5",
        "timing_s/gen": "timing_s/gen",
        "a//b": "a/b",
        "bad key#": "bad key_",
    }
    for key, name in expected.items():
        assert verl_key(key) == name
        assert mlflow_key(key) == name  # no further change for keys mlflow accepts


def test_keys_verl_would_lose_are_made_valid(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    backend = MlflowBackend({"tracking_uri": uri, "artifact_location": str(tmp_path / "a")})
    backend.open(RunInfo("p", "n", "r1", tmp_path, 1.7e9), ResumeState())
    keys = ["/lead", "trail/", "a/./b", "x" * 300, "ünï/códe"]
    backend.write([MetricsEvent({k: 1.0 for k in keys}, 0, 1.7e9, seq=1)])
    backend.close("finished")
    client = MlflowClient(tracking_uri=uri)
    metrics = client.get_run(backend.remote_id).data.metrics  # type: ignore[arg-type]
    assert set(metrics) == {mlflow_key(k) for k in keys}
    assert "ünï/códe" in metrics and "lead" in metrics and "a/_/b" in metrics
    assert all(len(k) <= 250 for k in metrics)


class _Recorder:
    """Wraps MlflowClient.log_batch to record the size of every request."""

    def __init__(self, client: MlflowClient) -> None:
        self.sizes: list[tuple[int, int, int]] = []
        original = client.log_batch

        def log_batch(run_id: str, metrics: Any = (), params: Any = (), tags: Any = (),
                      **kwargs: Any) -> Any:
            self.sizes.append((len(metrics), len(params), len(tags)))
            return original(run_id, metrics=metrics, params=params, tags=tags, **kwargs)

        client.log_batch = log_batch  # type: ignore[method-assign]


def test_batches_stay_within_server_limits(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    backend = MlflowBackend({"tracking_uri": uri, "artifact_location": str(tmp_path / "a")})
    backend.open(RunInfo("p", "n", "r1", tmp_path, 1.7e9), ResumeState())
    assert backend._client is not None
    recorder = _Recorder(backend._client)
    big = {f"m/{i}": float(i) for i in range(2500)}
    config = {"section": {f"p{i}": i for i in range(250)}}
    backend.write([ConfigEvent(config, 0, 1.7e9, seq=1),
                   MetricsEvent(big, 0, 1.7e9, seq=2),
                   MetricsEvent({"small": 1.0}, 1, 1.7e9 + 1, seq=3)])
    run = MlflowClient(tracking_uri=uri).get_run(backend.remote_id)  # type: ignore[arg-type]
    assert len(run.data.metrics) == 2501
    assert run.data.metrics["m/2499"] == 2499.0
    assert len(run.data.params) == 250
    assert recorder.sizes, "log_batch was not used"
    for metrics, params, tags in recorder.sizes:
        assert metrics <= 1000 and params <= 100 and tags <= 100
        assert metrics + params + tags <= 1000
    assert sum(m for m, _, _ in recorder.sizes) == 2501
    assert backend.state()["seq"] == 3


def test_redelivery_is_skipped_by_the_seq_tag(tmp_path: Path) -> None:
    """A new backend instance (a restarted process) continuing the run skips what the run's
    seq tag covers, including artifacts that mlflow itself would duplicate."""
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    options = {"tracking_uri": uri, "artifact_location": str(tmp_path / "a")}
    info = RunInfo("p", "n", "r1", tmp_path, 1.7e9)
    first = MlflowBackend(options)
    first.open(info, ResumeState())
    events = [MetricsEvent({"x": float(i)}, i, 1.7e9 + i, seq=i + 1) for i in range(5)]
    first.write(events)
    second = MlflowBackend(options)
    second.open(info, ResumeState(remote_id=first.remote_id, acked_seq=2))
    assert second.remote_id == first.remote_id
    second.write(events[2:])
    third = MlflowBackend(options)  # remote id lost too: found again by its trackmux tag
    third.open(info, ResumeState())
    assert third.remote_id == first.remote_id
    third.write(events)
    history = MlflowClient(tracking_uri=uri).get_metric_history(first.remote_id, "x")  # type: ignore[arg-type]
    assert sorted(m.step for m in history) == [0, 1, 2, 3, 4]


def test_mlflow_run_id_attaches_to_an_existing_run(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp_id = client.create_experiment("platform", artifact_location=str(tmp_path / "a"))
    existing = client.create_run(exp_id, run_name="made-by-the-platform").info.run_id
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_RUN_ID", existing)
    run = sample_run(tmp_path, steps=5)
    from trackmux.core.delivery.sync import deliver

    result = deliver(run.run_dir, {"mlflow": lambda: MlflowBackend({})}, timeout=60)
    assert result.complete, result.problems
    assert [r.info.run_id for r in client.search_runs([exp_id])] == [existing]
    assert client.get_experiment_by_name("conformance") is None  # no run made elsewhere
    history = client.get_metric_history(existing, "val-core/acc/mean_at_5")
    assert sorted(m.step for m in history) == [0, 1, 2, 3, 4]
    assert client.get_run(existing).data.params["trainer/total_epochs"] == "3"


def test_tracking_uri_defaults_to_a_store_in_the_trackmux_dir(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert MlflowBackend({}).tracking_uri is None  # chosen at open, from the run's folder
    backend = MlflowBackend({})
    backend.open(RunInfo("p", "n", "r1", tmp_path / "trackmux" / "p" / "r1", 1.7e9),
                 ResumeState())
    backend.close("finished")
    assert backend.tracking_uri == f"sqlite:///{tmp_path / 'trackmux' / 'mlflow' / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=backend.tracking_uri)
    experiment = client.get_experiment_by_name("p")
    assert experiment.artifact_location.endswith(str(tmp_path / "trackmux/mlflow/artifacts"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:1")
    assert MlflowBackend({}).tracking_uri == "http://127.0.0.1:1"
    assert MlflowBackend({"tracking_uri": "sqlite:///x.db"}).tracking_uri == "sqlite:///x.db"


def test_bad_options_name_the_option() -> None:
    with pytest.raises(ValueError, match="trackng_uri"):
        MlflowBackend({"trackng_uri": "x"})
    with pytest.raises(ValueError, match="http_timeout"):
        MlflowBackend({"http_timeout": "ten"})
    with pytest.raises(ValueError, match="run_id"):
        MlflowBackend({"run_id": 5})


def test_a_dead_server_does_not_hold_a_write(mlflow_server: MlflowServer, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Kill the server mid-run: write() raises within the bound (core retries later); after
    a restart on the same port the same run continues with its earlier data."""
    for name in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)  # the backend's own defaults apply
    info = RunInfo("dead-server", "n", "r-dead", tmp_path, 1.7e9)
    backend = MlflowBackend({"tracking_uri": mlflow_server.url})
    backend.open(info, ResumeState())
    backend.write([MetricsEvent({"x": 1.0}, 0, 1.7e9, seq=1)])
    try:
        mlflow_server.kill()
        started = time.monotonic()
        with pytest.raises(Exception):  # noqa: B017 - whatever mlflow raises, it must raise
            backend.write([MetricsEvent({"x": 2.0}, 1, 1.7e9 + 1, seq=2)])
        elapsed = time.monotonic() - started
        assert elapsed < DEAD_SERVER_BOUND_S, f"a write to a dead server took {elapsed:.1f} s"
    finally:
        mlflow_server.restart()
    backend.write([MetricsEvent({"x": 2.0}, 1, 1.7e9 + 1, seq=2)])
    history = MlflowClient(mlflow_server.url).get_metric_history(backend.remote_id, "x")  # type: ignore[arg-type]
    assert sorted((m.step, m.value) for m in history) == [(0, 1.0), (1, 2.0)]


def test_a_hung_server_does_not_hold_a_write(mlflow_server: MlflowServer,
                                             tmp_path: Path) -> None:
    """SIGSTOP: connections are accepted but never answered; the timeout option bounds it."""
    backend = MlflowBackend({"tracking_uri": mlflow_server.url, "http_timeout": 2,
                             "http_max_retries": 0})
    backend.open(RunInfo("hung-server", "n", "r-hung", tmp_path, 1.7e9), ResumeState())
    mlflow_server.pause()
    try:
        started = time.monotonic()
        with pytest.raises(Exception):  # noqa: B017
            backend.write([MetricsEvent({"x": 1.0}, 0, 1.7e9, seq=1)])
        assert time.monotonic() - started < DEAD_SERVER_BOUND_S
    finally:
        mlflow_server.resume()
    assert mlflow_server.is_healthy(timeout=10)


@pytest.mark.slow
def test_server_fixture_leaves_no_process_behind(tmp_path: Path) -> None:
    """With the job runner on (uvicorn/gunicorn + job runner + huey consumers), kill() and
    stop() leave nothing; a restart after kill() serves the same data on the same port."""
    # the job runner's start took 52 s on a loaded 2-core machine: allow more than 60 s
    server = MlflowServer(tmp_path / "srv", jobs=True, start_timeout=180)
    with server:
        port = server.port
        client = MlflowClient(server.url)
        run_id = client.create_run(client.create_experiment("e")).info.run_id
        client.log_metric(run_id, "m", 1.5, step=3)
        pids = server.processes()
        assert len(pids) >= 2, "expected the server's process tree"
        server.kill()
        assert not [p for p in pids if _running(p)], "processes left after kill()"
        server.jobs = False  # the job runner's huey consumers only slow the second start
        server.start()
        assert server.port == port
        assert [(m.step, m.value) for m in client.get_metric_history(run_id, "m")] == [(3, 1.5)]
        pids = server.processes()
    assert not [p for p in pids if _running(p)], "processes left after stop()"
    assert not server.is_healthy(timeout=1)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2:].split()[0] != "Z"


def test_nan_survives_and_inf_is_clamped(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    backend = MlflowBackend({"tracking_uri": uri, "artifact_location": str(tmp_path / "a")})
    backend.open(RunInfo("p", "n", "r1", tmp_path, 1.7e9), ResumeState())
    backend.write([MetricsEvent({"a": math.nan, "b": math.inf, "c": -math.inf}, 0, 1.7e9,
                                seq=1)])
    metrics = MlflowClient(tracking_uri=uri).get_run(backend.remote_id).data.metrics  # type: ignore[arg-type]
    assert math.isnan(metrics["a"])
    assert metrics["b"] > 1e300 and metrics["c"] < -1e300


def test_crashed_run_is_marked_failed(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    backend = MlflowBackend({"tracking_uri": uri, "artifact_location": str(tmp_path / "a")})
    backend.open(RunInfo("p", "n", "r1", tmp_path, 1.7e9), ResumeState())
    backend.write([MetricsEvent({"a": 1.0}, 0, 1.7e9 + 5, seq=1)])
    backend.close("crashed")
    info = MlflowClient(tracking_uri=uri).get_run(backend.remote_id).info  # type: ignore[arg-type]
    assert info.status == "FAILED"
    assert info.end_time == int((1.7e9 + 5) * 1000)  # the last event's time, not "now"


# -- head-of-line: one event or key mlflow refuses must not wedge the rest -----------------
class _OneBadKey(MlflowBackend):
    """Maps one trackmux key to a name mlflow's own validation refuses ('..' segment), the
    way an unforeseen refusal would arrive; everything else is the real backend."""

    def _key(self, key: str) -> str:
        return "bad/../key" if key == "refused" else super()._key(key)


def test_a_refused_metric_key_is_quarantined_and_the_events_other_keys_land(
        tmp_path: Path) -> None:
    from trackmux.core.delivery.sync import deliver
    from trackmux.core.spool.reader import SpoolReader
    from trackmux.core.spool.writer import SpoolWriter

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    run_dir = tmp_path / "spool" / "p" / "r1"
    writer = SpoolWriter(run_dir)
    writer.set_meta(run_id="r1", project="hol", name="n", state="finished", started_at=1.0)
    for step in range(6):
        data = {"kept/a": float(step), "kept/b": step * 2.0}
        if step == 3:
            data["refused"] = 1.0
        writer.append(MetricsEvent(data, step, 1_700_000_000.0 + step))
    writer.close()
    options = {"tracking_uri": uri, "artifact_location": str(tmp_path / "art")}
    result = deliver(run_dir, {"mlflow": lambda: _OneBadKey(options)}, timeout=120)
    assert result.complete, result.problems
    assert result.quarantined == {"mlflow": 1}
    back = read_mlflow(uri, "hol", tmp_path)
    assert back.metrics["kept/a"] == [(s, float(s)) for s in range(6)]
    assert back.metrics["kept/b"] == [(s, s * 2.0) for s in range(6)]
    reader = SpoolReader(run_dir)
    entries = reader.quarantined("mlflow")
    reader.close()
    assert [(q.seq, q.keys) for q in entries] == [(4, ("refused",))]
    assert "INVALID_PARAMETER_VALUE" in entries[0].reason or "Invalid" in entries[0].reason
    again = deliver(run_dir, {"mlflow": lambda: _OneBadKey(options)}, timeout=120)
    assert again.complete and not again.quarantined  # a later sync is not wedged either


def test_an_image_key_making_a_long_file_name_does_not_wedge(tmp_path: Path) -> None:
    """A key of 250 characters (and one of multi-byte letters) would give mlflow a stepped
    image file name over 255 bytes; the key is shortened with a hash instead."""
    from trackmux.core.delivery.sync import deliver

    long_ascii = "eval/" + "k" * 245
    long_unicode = "eval/" + "ключ" * 60
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    run_dir = tmp_path / "spool" / "p" / "r2"
    from trackmux.core.spool.writer import SpoolWriter
    from trackmux.core.values.media import encode_image

    writer = SpoolWriter(run_dir)
    writer.set_meta(run_id="r2", project="img", name="n", state="finished", started_at=1.0)
    image = encode_image(np.zeros((6, 5, 3), dtype=np.uint8))
    for i, key in enumerate((long_ascii, long_unicode)):
        writer.append(ImageEvent(key, image.png, image.width, image.height, image.mode, i,
                                 1_700_000_000.0 + i))
    writer.append(MetricsEvent({"after": 1.0}, 2, 1_700_000_002.0))
    writer.close()
    options = {"tracking_uri": uri, "artifact_location": str(tmp_path / "art")}
    result = deliver(run_dir, {"mlflow": lambda: MlflowBackend(options)}, timeout=120)
    assert result.complete and not result.quarantined, result.problems
    back = read_mlflow(uri, "img", tmp_path)
    assert sorted(back.images) == sorted({artifact_key(long_ascii), artifact_key(long_unicode)})
    assert all(len(artifact_key(k).encode()) <= 120 for k in (long_ascii, long_unicode))
    assert back.metrics["after"] == [(2, 1.0)]
def test_resume_continues_the_run_and_the_latest_value_per_step_is_the_resumed_one(
        tmp_path: Path) -> None:
    """Resume rule (docs/backends/mlflow.md): the same mlflow run continues (its id is in
    the spool); values re-done after a rewind carry later timestamps, so the latest value
    of each step is the resumed one. mlflow keeps the superseded points delivered before
    the crash (it has no call to delete them); a fresh ``sync`` sends only live ones."""
    import trackmux
    from trackmux.core.delivery.sync import deliver_by_name

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    options = {"mlflow": {"tracking_uri": uri, "artifact_location": str(tmp_path / "a")}}
    run = trackmux.init(project="resume", backends=["mlflow"], dir=tmp_path, run_id="r",
                        backend_options=options, config={"lr": 0.1})
    for step in range(1, 8):
        run.log({"loss": float(step)}, step=step)
    assert run.finish(timeout=120).complete
    again = trackmux.init(project="resume", backends=["mlflow"], dir=tmp_path, run_id="r",
                          resume="must", rewind_to=4, backend_options=options,
                          config={"lr": 0.1})
    for step in range(5, 10):
        again.log({"loss": step + 0.5}, step=step)
    assert again.finish(timeout=120).complete
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("resume")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1  # one mlflow run for both attempts
    history = client.get_metric_history(runs[0].info.run_id, "loss")
    latest: dict[int, Any] = {}
    for point in history:
        if point.step not in latest or point.timestamp >= latest[point.step].timestamp:
            latest[point.step] = point
    assert {s: p.value for s, p in latest.items()} == {
        1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0, 5: 5.5, 6: 6.5, 7: 7.5, 8: 8.5, 9: 9.5}
    assert sorted(p.value for p in history if p.step == 6) == [6.0, 6.5]
    assert runs[0].data.metrics["loss"] == 9.5
    # a fresh destination (a copy of the spool, mlflow never delivered) gets only the live
    # series, one value per step
    import shutil

    from spool_support import forget_cursors

    copy = tmp_path / "copy"
    shutil.copytree(again.dir, copy)
    forget_cursors(copy)
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    result = deliver_by_name(copy, ["mlflow"], {"mlflow": {
        "tracking_uri": fresh, "artifact_location": str(tmp_path / "b")}}, timeout=120)
    assert result.complete, result
    client = MlflowClient(tracking_uri=fresh)
    (only,) = client.search_runs([client.get_experiment_by_name("resume").experiment_id])
    assert sorted((p.step, p.value) for p in client.get_metric_history(
        only.info.run_id, "loss")) == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0), (5, 5.5),
                                       (6, 6.5), (7, 7.5), (8, 8.5), (9, 9.5)]


def test_a_rewind_replaces_the_superseded_steps_tables(tmp_path: Path) -> None:
    """``client.log_table`` appends to an existing file; after ``rewind_to=4`` the re-done
    steps' tables hold the resumed attempt's rows only, and two tables of one key at one
    step of one attempt are still concatenated (docs/backends/mlflow.md, Resume)."""
    import orjson

    import trackmux

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    options = {"mlflow": {"tracking_uri": uri, "artifact_location": str(tmp_path / "a")}}

    def attempt(steps: range, tag: str, **resume: Any) -> None:
        run = trackmux.init(project="tables", backends=["mlflow"], dir=tmp_path,
                            run_id="t", backend_options=options, **resume)
        for step in steps:
            run.log_table("t", ["who"], [[f"{tag}{step}"]], step=step)
            if step == 6:
                run.log_table("t", ["who"], [[f"{tag}6b"]], step=6)
        assert run.finish(timeout=120).complete

    attempt(range(1, 8), "a")
    attempt(range(5, 9), "b", resume="must", rewind_to=4)
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("tables").experiment_id])

    def rows(step: int) -> list[str]:
        target = tmp_path / f"dl{step}"
        target.mkdir()  # mlflow 2 refuses a destination that does not exist yet
        local = client.download_artifacts(run.info.run_id, f"tables/t/step_{step}.json",
                                          str(target))
        return [row[0] for row in orjson.loads(Path(local).read_bytes())["data"]]

    assert [rows(s) for s in (1, 4, 5, 6, 7, 8)] == [
        ["a1"], ["a4"], ["b5"], ["b6", "b6b"], ["b7"], ["b8"]]


def test_provenance_in_mlflows_source_tags_and_artifacts(tmp_path: Path) -> None:
    """Issue 25: mlflow's own source tags, the rest as tags, record and diff as files."""
    from trackmux.core.delivery.sync import deliver
    from trackmux.testing.provenance import COMMIT, DIFF, REMOTE, provenance_spool

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_dir = provenance_spool(tmp_path)
    result = deliver(run_dir, {"mlflow": lambda: MlflowBackend(
        {"tracking_uri": uri, "artifact_location": str(tmp_path / "artifacts")})}, timeout=120)
    assert result.complete, result.problems
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("proj")
    assert exp is not None
    (run,) = client.search_runs([exp.experiment_id])
    tags = run.data.tags
    assert tags["mlflow.source.git.commit"] == COMMIT
    assert tags["mlflow.source.git.branch"] == "main"
    assert tags["mlflow.source.git.repoURL"] == REMOTE
    assert tags["mlflow.source.name"] == "/work/train.py"
    assert tags["trackmux.provenance.packages.torch"] == "2.13.0"
    assert tags["trackmux.provenance.git.dirty"] == "True"
    download = tmp_path / "download"
    download.mkdir()
    record = json.loads(Path(client.download_artifacts(
        run.info.run_id, "provenance/provenance.json", str(download))).read_text())
    assert record["git"]["commit"] == COMMIT
    diff = Path(client.download_artifacts(run.info.run_id, "provenance/uncommitted.diff",
                                          str(download))).read_text()
    assert diff == DIFF


# -- distinct keys stay distinct (issue 27 item 2) -----------------------------------------
DISTINCT_KEYS = ["a@b", "a_at_b", "loss#1", "loss_1", "x//y", "x/y", "loss/", "loss",
                 "val-core/acc/mean@5"]


def _series_by_key(client: MlflowClient, run_id: str) -> dict[str, str]:
    """Which series each logged key landed in, read from mlflow's metric histories;
    asserts that no series mixes two keys and no key is spread over two series."""
    owners: dict[str, str] = {}
    for name in client.get_run(run_id).data.metrics:
        values = {p.value for p in client.get_metric_history(run_id, name)}
        keys = {DISTINCT_KEYS[int(v) // 1000] for v in values}
        assert len(keys) == 1, f"series {name!r} mixes {keys}"
        (key,) = keys
        assert key not in owners, f"{key!r} is in {owners.get(key)!r} and {name!r}"
        owners[key] = name
        steps = sorted(p.step for p in client.get_metric_history(run_id, name))
        assert steps == (list(range(1, 6)) if mlflow_key(key) != key else list(range(2, 6)))
    assert set(owners) == set(DISTINCT_KEYS)
    return owners


def _log_distinct_keys(uri: str, project: str, tmp_path: Path) -> Path:
    """Attempt 1 logs the renamed keys first (they take the plain names), then all; a
    resumed attempt logs them all in the reverse order. Returns the run folder."""
    import trackmux

    options = {"mlflow": {"tracking_uri": uri}}
    if uri.startswith("sqlite"):
        options["mlflow"]["artifact_location"] = str(tmp_path / "artifacts")
    run = trackmux.init(project=project, backends=["mlflow"], dir=tmp_path / "spool",
                        run_id="keys", backend_options=options)
    value = {key: 1000.0 * i for i, key in enumerate(DISTINCT_KEYS)}
    run.log({k: value[k] + 1 for k in DISTINCT_KEYS if mlflow_key(k) != k}, step=1)
    for step in (2, 3):
        run.log({k: value[k] + step for k in DISTINCT_KEYS}, step=step)
    assert run.finish(timeout=120).complete
    again = trackmux.init(project=project, backends=["mlflow"], dir=tmp_path / "spool",
                          run_id="keys", resume="must", backend_options=options)
    for step in (4, 5):
        again.log({k: value[k] + step for k in reversed(DISTINCT_KEYS)}, step=step)
    assert again.finish(timeout=120).complete
    return again.dir


@pytest.mark.parametrize("store", ["sqlite", "server"])
def test_distinct_keys_stay_distinct_across_resume_and_sync(
        store: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """``a@b``/``a_at_b``, ``loss#1``/``loss_1``, ``x//y``/``x/y``, ``loss/``/``loss``
    land in distinct mlflow series; a resumed attempt sending them in another order and a
    fresh ``trackmux sync`` of the spool to another store use the same series names."""
    import shutil

    from spool_support import forget_cursors
    from trackmux.core.delivery.sync import deliver_by_name

    if store == "server":
        uri = request.getfixturevalue("mlflow_server").url
    else:
        uri = f"sqlite:///{tmp_path / 'm.db'}"
    project = f"distinct-{store}-{abs(hash(str(tmp_path))) % 10**8}"
    run_dir = _log_distinct_keys(uri, project, tmp_path)
    client = MlflowClient(tracking_uri=uri)
    (remote,) = client.search_runs([client.get_experiment_by_name(project).experiment_id])
    live = _series_by_key(client, remote.info.run_id)
    assert live["val-core/acc/mean@5"] == "val-core/acc/mean_at_5"  # verl's name kept
    assert live["a@b"] == "a_at_b" and live["a_at_b"].startswith("a_at_b_")
    assert len(set(live.values())) == len(DISTINCT_KEYS)

    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    forget_cursors(copy)
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    result = deliver_by_name(copy, ["mlflow"], {"mlflow": {
        "tracking_uri": fresh, "artifact_location": str(tmp_path / "b")}}, timeout=120)
    assert result.complete, result
    client = MlflowClient(tracking_uri=fresh)
    (only,) = client.search_runs([client.get_experiment_by_name(project).experiment_id])
    assert _series_by_key(client, only.info.run_id) == live


def test_distinct_config_keys_stay_distinct_params(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    backend = MlflowBackend({"tracking_uri": uri, "artifact_location": str(tmp_path / "a")})
    backend.open(RunInfo("p", "n", "r1", tmp_path, 1.7e9), ResumeState())
    backend.write([ConfigEvent({"opt": {"lr@1": 1, "lr_at_1": 2}}, 0, 1.7e9, seq=1)])
    backend.close("finished")
    params = MlflowClient(tracking_uri=uri).get_run(backend.remote_id).data.params  # type: ignore[arg-type]
    assert params["opt/lr_at_1"] == "2"
    (other,) = [k for k in params if k.startswith("opt/lr_at_1_")]
    assert params[other] == "1"


def test_a_finding_of_the_doctor_is_a_tag_and_a_line_of_the_note(tmp_path: Path) -> None:
    """issue 22: the rule's tag holds the latest finding; the run's note lists each once,
    after the user's own note, also when a batch is delivered again."""
    from trackmux.core.events import FindingEvent

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    backend = MlflowBackend({"tracking_uri": uri, "artifact_location": str(tmp_path / "a")})
    backend.open(RunInfo("p", "n", "r1", tmp_path, 1.7e9), ResumeState())
    client = MlflowClient(tracking_uri=uri)
    client.set_tag(backend.remote_id, "mlflow.note.content", "my own notes")  # type: ignore[arg-type]
    finding = FindingEvent("kl_blowup", "warning", ("actor/ppo_kl",),
                           "actor/ppo_kl rose 3.4x above its level", 50, 1.7e9, seq=1)
    backend.write([finding])
    backend.write([finding])  # redelivered: not a second line
    backend.close("finished")
    tags = client.get_run(backend.remote_id).data.tags  # type: ignore[arg-type]
    assert tags["trackmux.doctor.kl_blowup"] == finding.line()
    assert tags["mlflow.note.content"] == ("my own notes\n\n**trackmux doctor**\n- "
                                           + finding.line())


def test_samples_are_a_table_artifact_per_step(tmp_path: Path) -> None:
    """log_samples on mlflow: tables/<key>/step_<N>.json per step, the best groups."""
    from samples_support import OPTIONS, STEPS, check_rows, sample_events

    from trackmux.core.delivery.sync import deliver
    from trackmux.core.spool.writer import SpoolWriter

    run_dir = tmp_path / "spool" / "p" / "r1"
    writer = SpoolWriter(run_dir)
    writer.set_meta(run_id="r1", project="p", name="samples", state="finished",
                    started_at=1.7e9)
    for event in sample_events(1.7e9):
        writer.append(event)
    writer.close()
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    options = {"tracking_uri": uri, "artifact_location": str(tmp_path / "a"),
               "experiment_name": "samples", **OPTIONS}
    result = deliver(run_dir, {"mlflow": lambda: MlflowBackend(dict(options))}, timeout=120)
    assert result.complete, result.problems
    readback = read_mlflow(uri, "samples", tmp_path)
    tables = readback.tables["rollout_samples"] if "rollout_samples" in readback.tables \
        else readback.tables["rollout/samples"]
    assert [step for step, _ in tables] == list(STEPS)
    for step, rows in tables:
        check_rows(step, rows)


def test_trajectories_are_a_json_artifact_per_step(tmp_path: Path) -> None:
    """Conversations on mlflow (issue 37): tables/<key>/step_<N>.json per step holds the
    chosen samples' transcripts and their tool summaries, read from mlflow's store."""
    from trajectory_support import OPTIONS, STEPS, check_table, trajectory_spool

    from trackmux.core.delivery.sync import deliver

    run_dir = trajectory_spool(tmp_path)
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    options = {"tracking_uri": uri, "artifact_location": str(tmp_path / "a"),
               "experiment_name": "agent", **OPTIONS}
    result = deliver(run_dir, {"mlflow": lambda: MlflowBackend(dict(options))}, timeout=120)
    assert result.complete, result.problems
    readback = read_mlflow(uri, "agent", tmp_path)
    tables = readback.tables.get("agent_rollouts") or readback.tables["agent/rollouts"]
    assert [step for step, _ in tables] == list(STEPS)
    for step, rows in tables:
        check_table(step, rows)
