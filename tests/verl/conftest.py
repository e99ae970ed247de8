"""Fixtures for the verl drop-in tests: isolated tracker locations, tiny local assets."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
CPU_PLATFORM_DIR = HERE / "cpu_platform"


@pytest.fixture
def tracker_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Every tracker location verl's variables control, inside ``tmp_path``."""
    paths = {
        "spool": tmp_path / "spool",
        "file_root": tmp_path / "filelog",
        "tensorboard": tmp_path / "tb",
        "mlflow_db": tmp_path / "mlruns.db",
    }
    monkeypatch.setenv("TRACKMUX_DIR", str(paths["spool"]))
    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(paths["file_root"]))
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    monkeypatch.setenv("TENSORBOARD_DIR", str(paths["tensorboard"]))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{paths['mlflow_db']}")
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    for name in ("WANDB_DIR", "WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb" / name.lower()))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.chdir(tmp_path)
    return paths


@pytest.fixture(scope="session")
def tiny_assets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny Qwen2 model + tokenizer and chat parquet files, built here (no hub)."""
    from tiny_assets import build_all

    return build_all(tmp_path_factory.mktemp("tiny_assets"))


def sft_command(assets: dict[str, Path], work: Path, extra: Sequence[str] = ()) -> list[str]:
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
        "-m", "verl.trainer.sft_trainer",
        f"data.train_files={assets['train']}", f"data.val_files={assets['val']}",
        "data.train_batch_size=4", "data.micro_batch_size_per_gpu=2", "data.max_length=128",
        "data.num_workers=0", "data.use_dynamic_bsz=False",
        f"model.path={assets['model']}", "+model.override_config.attn_implementation=sdpa",
        "engine.strategy=fsdp2", "trainer.device=cpu",
        "trainer.total_training_steps=3", "trainer.total_epochs=1",
        "trainer.project_name=tiny-sft", "trainer.experiment_name=run1",
        "trainer.logger=[console,file,tensorboard,mlflow]",
        f"trainer.default_local_dir={work / 'ckpt'}", "trainer.resume_mode=disable",
        "checkpoint.save_contents=[model]",
        *extra,
    ]


def sft_env(paths: dict[str, Path], **extra: Any) -> dict[str, str]:
    """The subprocess environment: CPU platform on the path, trackers under tmp."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(CPU_PLATFORM_DIR), env.get("PYTHONPATH", "")) if p)
    env.update({
        # verl imports these modules on `import verl`, independent of VERL_USE_EXTERNAL_PLUGINS.
        "VERL_USE_EXTERNAL_MODULES": "verl_trackmux_cpu_platform",
        "VERL_PLATFORM": "cpu",
        "VERL_ENGINE_DEVICE": "cuda",  # verl 0.9.1 registers its FSDP engine for cuda/npu only
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
        "TRACKMUX_FINISH_TIMEOUT": "60",
    })
    env.update({k: str(v) for k, v in extra.items()})
    return env

