"""MLflow runs (SQLite, file store, a 127.0.0.1 server) imported with every point, params
and tags, exactly once; a missing run named; an imported run synced to MLflow arrives
whole (read back with MlflowClient)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

mlflow = pytest.importorskip("mlflow")

from importhelp import events, meta, series  # noqa: E402
from mlflow.entities import Metric, Param, RunTag  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from trackmux.core.events import ConfigEvent  # noqa: E402


@pytest.fixture(autouse=True)
def _no_ambient_mlflow(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # to write the old file store
    yield


def log_run(uri: str, experiment: str, steps: range, name: str = "grpo-1",
            run_id: str | None = None) -> str:
    client = MlflowClient(tracking_uri=uri)
    if run_id is None:
        found = client.get_experiment_by_name(experiment)
        exp_id = found.experiment_id if found else client.create_experiment(experiment)
        run_id = client.create_run(exp_id, run_name=name, start_time=1_700_000_000_000
                                   ).info.run_id
        client.log_batch(run_id, params=[Param("lr", "1e-6"), Param("algo", "grpo")],
                         tags=[RunTag("team", "rl")])
    metrics = []
    for step in steps:
        stamp = 1_700_000_000_000 + step * 1000
        metrics += [Metric("reward", 0.5 + step / 100, stamp, step),
                    Metric("loss", 1.0 / (step + 1), stamp, step)]
        if step % 10 == 0:
            metrics.append(Metric("val/acc", math.nan if step == 20 else step / 100, stamp,
                                  step))
    for i in range(0, len(metrics), 900):
        client.log_batch(run_id, metrics=metrics[i:i + 900])
    return run_id


STORES = ["sqlite", "file"]


def store_uri(kind: str, tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow.db'}" if kind == "sqlite" else (
        (tmp_path / "mlruns").as_uri())


@pytest.mark.parametrize("kind", STORES)
def test_run_with_full_histories_params_and_tags_once(kind: str, tmp_path: Path,
                                                      import_into) -> None:
    uri = store_uri(kind, tmp_path)
    run_id = log_run(uri, "rl-exp", range(50))
    first = import_into(f"mlflow:{run_id}", "--tracking-uri", uri)
    assert first.code == 0, first.stderr
    run = first.run
    assert run["format"] == "mlflow" and run["points"] == 50 * 2 + 5 and run["steps"] == 50
    got = series(run["dir"])
    assert got["reward"] == [(s, 0.5 + s / 100) for s in range(50)]
    assert math.isnan(dict(got["val/acc"])[20]) and len(got["val/acc"]) == 5
    info = meta(run["dir"])
    assert info["project"] == "rl-exp" and info["name"] == "grpo-1"
    assert info["started_at"] == 1_700_000_000.0
    (config,) = [e.config for e in events(run["dir"]) if isinstance(e, ConfigEvent)]
    assert config["lr"] == "1e-6" and config["_mlflow"]["tags"]["team"] == "rl"
    times = [e.time for e in events(run["dir"]) if e.kind == "metrics"]
    assert times[:2] == [1_700_000_000.0, 1_700_000_001.0]

    again = import_into(f"mlflow:{run_id}", "--tracking-uri", uri).run
    assert again["run"] == run["run"] and again["new_points"] == 0
    log_run(uri, "rl-exp", range(50, 60), run_id=run_id)
    grown = import_into(f"mlflow:{run_id}", "--tracking-uri", uri).run
    assert grown["new_points"] == 10 * 2 + 1
    assert [s for s, _ in series(run["dir"])["loss"]] == list(range(60))


def test_experiment_imports_each_of_its_runs(tmp_path: Path, import_into) -> None:
    uri = store_uri("sqlite", tmp_path)
    ids = {log_run(uri, "sweep", range(5), name=f"trial-{i}") for i in range(3)}
    result = import_into("mlflow:sweep", "--tracking-uri", uri)
    assert result.code == 0 and len(result.runs) == 3
    assert {meta(r["dir"])["name"] for r in result.runs} == {"trial-0", "trial-1", "trial-2"}
    assert {r["source"] for r in result.runs} == {f"mlflow:{i}" for i in ids}


def test_a_run_id_that_does_not_exist_is_named(tmp_path: Path, import_into) -> None:
    uri = store_uri("sqlite", tmp_path)
    log_run(uri, "rl-exp", range(2))
    result = import_into("mlflow:0123456789abcdef0123456789abcdef", "--tracking-uri", uri)
    assert result.code == 1 and result.runs == [] and "Traceback" not in result.stderr
    assert "no MLflow run id or experiment named '0123456789abcdef" in result.stderr
    unset = import_into("mlflow:x")
    assert unset.code == 1 and "--tracking-uri" in unset.stderr


def test_run_from_a_server(mlflow_server, import_into) -> None:
    run_id = log_run(mlflow_server.url, "served", range(20))
    result = import_into(f"mlflow:{run_id}", "--tracking-uri", mlflow_server.url)
    assert result.code == 0, result.stderr
    assert result.run["points"] == 20 * 2 + 2


def test_imported_run_synced_to_mlflow_arrives_whole(tmp_path: Path, import_into) -> None:
    from click.testing import CliRunner

    from trackmux.cli.main import cli

    log = tmp_path / "train.log"
    log.write_text("".join(f"(TaskRunner pid=7) step:{s} - critic/score/mean:{s / 10!r} - "
                           f"actor/entropy:np.float64({1 - s / 100!r}) - x:nan\n"
                           for s in range(1, 31)))
    run = import_into(str(log), "--project", "moved").run
    target = store_uri("sqlite", tmp_path / "target")
    (tmp_path / "target").mkdir()
    synced = CliRunner().invoke(cli, ["sync", run["dir"], "--to", "mlflow",
                                      "-o", f"mlflow.tracking_uri={target}",
                                      "-o", f"mlflow.artifact_location={tmp_path / 'art'}"])
    assert synced.exit_code == 0, synced.output
    client = MlflowClient(tracking_uri=target)
    (remote,) = client.search_runs([client.get_experiment_by_name("moved").experiment_id])
    for key, points in series(run["dir"]).items():
        history = sorted(client.get_metric_history(remote.info.run_id, key),
                         key=lambda m: m.step)
        assert len(history) == len(points) == 30, key
        for metric, (step, value) in zip(history, points, strict=True):
            assert metric.step == step
            assert metric.value == value or (math.isnan(metric.value) and math.isnan(value))


def test_follow_of_a_running_run_ends_when_it_is_terminated(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys
    import time

    uri = store_uri("sqlite", tmp_path)
    run_id = log_run(uri, "live", range(5))
    root = tmp_path / "spools"
    proc = subprocess.Popen([sys.executable, "-m", "trackmux", "import", "--follow", "--json",
                             "--doctor", "off", "--interval", "0.2", "--tracking-uri", uri,
                             "--dir", str(root), f"mlflow:{run_id}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))

    def steps() -> int:
        found = list(root.glob("*/*/spool.db"))
        return len(series(found[0].parent).get("loss", [])) if found else 0

    try:
        deadline = time.monotonic() + 120
        while steps() < 5:
            assert time.monotonic() < deadline, "the first points never arrived"
            time.sleep(0.05)
        log_run(uri, "live", range(5, 8), run_id=run_id)
        while steps() < 8:
            assert time.monotonic() < deadline, "the new points never arrived"
            time.sleep(0.05)
        MlflowClient(tracking_uri=uri).set_terminated(run_id)
        out, err = proc.communicate(timeout=120)  # ends by itself: the run finished
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err.decode()
    (summary,) = [json.loads(line) for line in out.splitlines()]
    assert summary["points"] == 8 * 2 + 1 and meta(summary["dir"])["state"] == "finished"
