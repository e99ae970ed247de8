"""The part of provenance read in the trainer's thread at ``init()``: copies of what the
trainer may change later (argv, working directory, ``__main__``, the environment's
variable names). Imported with trackmux (standard library only, all of it already loaded)
so that ``init()`` pays no import; everything else happens on the provenance thread
(collect.py, record.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

#: prefixes of the environment variables trainers read (names only are recorded)
ENV_PREFIXES = (
    "CUDA_", "NCCL_", "WANDB_", "MLFLOW_", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "VERL_",
    "RAY_", "TRACKMUX_", "TORCH_", "PYTORCH_", "OMP_", "MKL_", "VLLM_", "SGLANG_",
    "SWANLAB_", "TENSORBOARD_", "TRACKIO_", "CLEARML_", "ACCELERATE_", "DEEPSPEED_",
    "NVIDIA_", "TOKENIZERS_", "XLA_",
)
ENV_NAMES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
             "LOCAL_WORLD_SIZE", "PYTHONHASHSEED", "TOKENIZERS_PARALLELISM")

def entry_script(argv: list[str] | None = None) -> str | None:
    """The absolute path of the script this process runs, ``-m NAME`` for a module, None
    for an interactive session."""
    argv = sys.argv if argv is None else argv
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and getattr(spec, "name", None) and argv and argv[0] != "-c":
        origin = getattr(spec, "origin", None)
        return origin if origin else f"-m {spec.name}"
    if argv and argv[0] not in ("", "-c"):
        return str(Path(argv[0]).absolute())
    return None


def env_names(environ: dict[str, str] | None = None) -> list[str]:
    environ = dict(os.environ) if environ is None else environ
    return sorted(n for n in environ if n.startswith(ENV_PREFIXES) or n in ENV_NAMES)


def snapshot() -> dict[str, Any]:
    """What must be read at ``init()`` itself, in the trainer's thread, because the trainer
    may change it later (argv, working directory, environment, ``__main__``): copies only,
    a few microseconds. Everything else is derived on the provenance thread."""
    return {"argv": list(sys.argv), "cwd": os.getcwd(), "entry": entry_script(),
            "env": env_names()}
