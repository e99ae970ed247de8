"""Fixtures for the Hugging Face integration tests: tracker locations under tmp, readers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


@pytest.fixture
def tracker_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Every tracker location inside ``tmp_path``; nothing reaches a hub or a server."""
    paths = {"spool": tmp_path / "spool", "tensorboard": tmp_path / "tb",
             "mlflow_db": tmp_path / "mlruns.db", "file_root": tmp_path / "filelog",
             "wandb": tmp_path / "wandb"}
    monkeypatch.setenv("TRACKMUX_DIR", str(paths["spool"]))
    monkeypatch.setenv("TENSORBOARD_DIR", str(paths["tensorboard"]))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{paths['mlflow_db']}")
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(paths["file_root"]))
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    for name in ("WANDB_DIR", "WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR"):
        monkeypatch.setenv(name, str(paths["wandb"] / name.lower()))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("TRACKMUX_FINISH_TIMEOUT", "60")
    monkeypatch.delenv("TRACKMUX_PROJECT", raising=False)
    monkeypatch.delenv("TRACKMUX_BACKENDS", raising=False)
    monkeypatch.chdir(tmp_path)
    return paths


def spool_runs(root: Path, project: str) -> list[Path]:
    if not (root / project).exists():
        return []
    return sorted(p for p in (root / project).iterdir() if (p / "spool.db").exists())


def spool_events(run_dir: Path) -> list[Any]:
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run_dir)
    try:
        return list(reader.iter_events())
    finally:
        reader.close()


def tensorboard_scalars(log_dir: Path) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}


def tensorboard_text_steps(log_dir: Path, tag_part: str) -> dict[str, list[int]]:
    """Steps of each text tag containing ``tag_part`` (tables arrive as markdown text)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"tensors": 0})
    acc.Reload()
    return {tag: [e.step for e in acc.Tensors(tag)] for tag in acc.Tags()["tensors"]
            if tag_part in tag}


def mlflow_run(db: Path, experiment: str) -> tuple[Any, Any]:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no mlflow experiment {experiment!r}"
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1, [r.info.run_id for r in runs]
    return client, runs[0]


def mlflow_history(client: Any, run: Any, key: str) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for point in sorted(client.get_metric_history(run.info.run_id, key),
                        key=lambda p: p.timestamp):
        out.setdefault(point.step, []).append(point.value)
    return out


def tensorboard_texts(log_dir: Path, tag_part: str) -> dict[str, dict[int, str]]:
    """The text of each step of each text tag containing ``tag_part`` (samples and tables
    arrive as markdown text); a step written twice keeps what TensorBoard's reader shows."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"tensors": 0})
    acc.Reload()
    out: dict[str, dict[int, str]] = {}
    for tag in acc.Tags()["tensors"]:
        if tag_part in tag:
            for event in acc.Tensors(tag):
                text = b"".join(event.tensor_proto.string_val).decode()
                out.setdefault(tag, {})[event.step] = text
    return out


def mlflow_table(client: Any, run: Any, path: str, dst: Path) -> list[dict[str, Any]]:
    """The rows of a table artifact (``client.log_table``'s JSON, orient "split")."""
    import orjson

    local = client.download_artifacts(run.info.run_id, path, str(dst))
    table = orjson.loads(Path(local).read_bytes())
    return [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
