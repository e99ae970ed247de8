"""The slow part of provenance, run as a child process of the trainer (by file path, so
it imports neither trackmux nor anything beyond the standard library and ``pynvml``).

Why a process: reading package metadata and starting git take tens of milliseconds of
Python work; on a thread of the trainer they would hold its GIL while ``init()`` and the
first steps run (B10 measured +110 ms on ``init()`` that way). The child prints one JSON
object: ``git`` (with the diff's facts), ``diff``, ``packages``, ``cpu``, ``gpu``.

    python -S -E probe.py DIRECTORY < sys.path as JSON

It runs at nice 10, below the trainer, from its first instruction: it is forked by a
helper thread (record.py) that lowered its own nice value first (Linux keeps one per
thread); it lowers itself when started otherwise. Not in the idle class: on a busy machine it would
wait past the run's end.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import platform
import sys
from pathlib import Path
from typing import Any

#: packages whose versions decide what a training run does (plus the backends' libraries)
KEY_PACKAGES = (
    "trackmux", "torch", "verl", "vllm", "sglang", "transformers", "trl", "accelerate",
    "ray", "deepspeed", "peft", "flash-attn", "megatron-core", "tensordict", "numpy",
    "triton", "nvidia-nccl-cu12", "datasets", "tokenizers", "safetensors",
    "wandb", "mlflow", "mlflow-skinny", "swanlab", "tensorboard", "trackio", "clearml",
    "nvidia-ml-py", "psutil",
)
def packages() -> dict[str, str]:
    """Versions of the installed ``KEY_PACKAGES`` (metadata only, nothing imported)."""
    from importlib import metadata

    found: dict[str, str] = {}
    for name in KEY_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        except Exception:  # a broken dist-info must not stop the record
            continue
    return found


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def gpus() -> dict[str, Any]:
    """GPU models, memory, driver and CUDA driver version via NVML (``pynvml``, from the
    ``nvidia-ml-py`` package of ``trackmux[gpu]``); ``source: none`` without it or a GPU."""
    try:
        import pynvml
    except ImportError:
        return {"source": "none", "reason": "pynvml not installed (in the trackmux checkout: "
                "pip install -e '.[gpu]')"}
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return {"source": "none", "reason": f"NVML: {exc}"}
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = int(getattr(pynvml, "nvmlSystemGetCudaDriverVersion_v2",
                           pynvml.nvmlSystemGetCudaDriverVersion)())
        devices = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total
            devices.append({"name": name.decode() if isinstance(name, bytes) else name,
                            "memory_mb": int(memory) // 2**20})
        return {"source": "nvml",
                "driver": driver.decode() if isinstance(driver, bytes) else driver,
                "cuda": f"{cuda // 1000}.{cuda % 1000 // 10}", "devices": devices}
    except Exception as exc:
        return {"source": "none", "reason": f"NVML: {exc}"}
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()



def _git_module() -> Any:
    """provenance/git.py, loaded by path when run as a script (trackmux is not imported)."""
    if __package__:
        from trackmux.provenance import git

        return git
    spec = importlib.util.spec_from_file_location("_trackmux_git",
                                                  Path(__file__).with_name("git.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _redact_module() -> Any:
    """core/values/redact.py (standard library only), loaded by path as git.py is."""
    if __package__:
        from trackmux.core.values import redact

        return redact
    spec = importlib.util.spec_from_file_location(
        "_trackmux_redact", Path(__file__).parents[1] / "core" / "values" / "redact.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def probe(directory: str) -> dict[str, Any]:
    """Everything slow, for the tree holding ``directory``. The diff is redacted here (a
    second of regular expressions for a 1 MB diff, which would hold the trainer's GIL),
    with this process's environment, inherited from the trainer's."""
    git = _git_module()
    state = git.state(Path(directory))
    diff = ""
    if state.get("available") and state.get("root"):
        diff, facts = git.diff(state["root"])
        state.update(facts)
        if diff:
            diff = _redact_module().redact_text(diff)
            state["diff_redacted"] = True
    return {"git": state, "diff": diff, "packages": packages(), "cpu": cpu_model(),
            "gpu": gpus()}


if __name__ == "__main__":
    with contextlib.suppress(OSError):
        import os

        current = os.nice(0)  # 10 when started through `nice -n 10` (record.py)
        if current < 10:  # started some other way: below the trainer all the same
            os.nice(10 - current)
    sys.path[:0] = [p for p in json.loads(sys.stdin.read() or "[]") if p not in sys.path]
    sys.stdout.write(json.dumps(probe(sys.argv[1])))
