"""A run the doctor stopped (issue 45) ends ``stopped`` on the backends that have run
states or tags: mlflow KILLED with the tags ``trackmux.state``/``trackmux.stop_reason``,
wandb's summary and the tag ``stopped``. A sync of a stopped spool says stopped too."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trackmux.core.delivery.sync import deliver
from trackmux.core.events import FindingEvent, MetricsEvent
from trackmux.core.spool.writer import SpoolWriter

T0 = 1_700_000_000.0
REASON = {"rule": "reward_collapse", "severity": "critical", "step": 103,
          "keys": ["critic/score/mean"], "message": "the reward fell 80%", "evidence": []}
LINE = "critical reward_collapse @ step 103: the reward fell 80%"


def stopped_spool(tmp_path: Path, state: str = "stopped") -> Path:
    run_dir = tmp_path / "spool" / "proj" / "run-0001"
    writer = SpoolWriter(run_dir)
    writer.set_meta(run_id="run-0001", project="proj", name="stopped-run", state=state,
                    started_at=T0, stop_reason=REASON if state == "stopped" else None,
                    stops=[{"attempt": 1, "step": 105, "at": T0 + 5, "finding": REASON}])
    for step in range(3):
        writer.append(MetricsEvent({"reward": 0.5}, step, T0 + step))
    writer.append(FindingEvent("reward_collapse", "critical", ("critic/score/mean",),
                               "the reward fell 80%", 103, T0 + 4))
    writer.close()
    return run_dir


def test_mlflow_run_is_killed_with_the_reason_and_a_resume_moves_its_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    from trackmux.plugins.mlflow import MlflowBackend

    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    options = {"tracking_uri": uri, "artifact_location": str(tmp_path / "artifacts")}
    run_dir = stopped_spool(tmp_path)
    result = deliver(run_dir, {"mlflow": lambda: MlflowBackend(options)}, timeout=120)
    assert result.complete, result.problems
    client = MlflowClient(tracking_uri=uri)
    [run] = client.search_runs([client.get_experiment_by_name("proj").experiment_id])
    assert run.info.status == "KILLED"
    assert run.data.tags["trackmux.state"] == "stopped"
    assert run.data.tags["trackmux.stop_reason"] == LINE
    # the run resumed from its checkpoint and finished: the same mlflow run, its state
    # tag moves on, the reason stays (the spool keeps the stop in ``stops``)
    writer = SpoolWriter(run_dir)
    writer.set_meta(state="finished", stop_reason=None)
    writer.append(MetricsEvent({"reward": 0.7}, 4, T0 + 10))
    writer.close()
    assert deliver(run_dir, {"mlflow": lambda: MlflowBackend(options)}, timeout=120).complete
    again = client.get_run(run.info.run_id)
    assert again.info.status == "FINISHED"
    assert again.data.tags["trackmux.state"] == "finished"
    assert again.data.tags["trackmux.stop_reason"] == LINE


def test_mlflow_without_a_stop_has_no_state_tag(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    from trackmux.plugins.mlflow import MlflowBackend

    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    options = {"tracking_uri": uri, "artifact_location": str(tmp_path / "artifacts")}
    run_dir = stopped_spool(tmp_path, state="finished")
    assert deliver(run_dir, {"mlflow": lambda: MlflowBackend(options)}, timeout=120).complete
    client = MlflowClient(tracking_uri=uri)
    [run] = client.search_runs([client.get_experiment_by_name("proj").experiment_id])
    assert run.info.status == "FINISHED"
    assert "trackmux.state" not in run.data.tags


def test_wandb_summary_and_tag_say_stopped(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb")
    from trackmux.plugins.wandb import WandbBackend

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")
    for name in ("DIR", "DATA_DIR", "CACHE_DIR", "CONFIG_DIR", "ARTIFACT_DIR"):
        (tmp_path / f"wandb_{name.lower()}").mkdir()
        monkeypatch.setenv(f"WANDB_{name}", str(tmp_path / f"wandb_{name.lower()}"))
    for name in ("WANDB_RUN_ID", "WANDB_ENTITY", "WANDB_API_KEY", "WANDB_RESUME"):
        monkeypatch.delenv(name, raising=False)
    run_dir = stopped_spool(tmp_path)
    result = deliver(run_dir, {"wandb": lambda: WandbBackend({})}, timeout=120)
    assert result.complete, result.problems
    [log] = [p for p in tmp_path.rglob("run-*.wandb") if "latest-run" not in p.parts]
    cli = shutil.which("wandb", path=str(Path(sys.executable).parent)) or "wandb"

    def inspect(*flags: str) -> str:
        return subprocess.run([cli, "leet", "inspect", "--json", *flags, str(log)],
                              capture_output=True, text=True, timeout=120, check=True).stdout

    records = [json.loads(line) for line in inspect().splitlines() if line.strip()]
    summary = json.loads(inspect("--summary"))
    assert summary["summary"]["trackmux/state"] == "stopped"
    assert summary["summary"]["trackmux/stop_reason"] == LINE
    tags = [r["run"].get("tags") for r in records if r.get("type") == "run"]
    assert any("stopped" in (t or []) for t in tags), tags
    exits = [r for r in records if r.get("type") == "exit"]
    assert exits and exits[-1]["exit"].get("exitCode", 0) == 0, exits
