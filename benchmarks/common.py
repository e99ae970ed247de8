"""Shared pieces: statistics, the offline environment, the 100-float payload, the floor.

Every benchmark session is a separate process started by ``benchmarks.run`` with the
environment from :func:`offline_env`, so nothing can reach the network and every backend
writes under one temporary directory.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

N_METRICS = 100
KEYS = [f"train/metric_{i:03d}" for i in range(N_METRICS)]


def payload(step: int) -> dict[str, float]:
    """One step's metrics: 100 floats under verl-like keys, different every step."""
    rnd = random.Random(step)
    return {k: rnd.random() for k in KEYS}


def stats(samples_ns: Sequence[int]) -> dict[str, Any]:
    """Median, p90, p99, p99.9 (nearest rank), mean and max of timings in ns, in us."""
    if not samples_ns:
        return {"n": 0}
    ordered = sorted(samples_ns)
    n = len(ordered)

    def rank(q: float) -> float:
        return ordered[min(n - 1, max(0, math.ceil(q * n) - 1))] / 1000.0

    return {"n": n, "median_us": rank(0.5), "p90_us": rank(0.9), "p99_us": rank(0.99),
            "p999_us": rank(0.999),
            "mean_us": sum(ordered) / n / 1000.0, "max_us": ordered[-1] / 1000.0}


def offline_env(root: Path) -> dict[str, str]:
    """Environment for every session: all backends local/offline, all their files in ``root``."""
    dirs = {name: root / name for name in ("wandb", "wandb-data", "wandb-cache",
                                           "wandb-config", "swanlog", "tensorboard", "home")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    for var in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "WANDB_API_KEY", "SWANLAB_API_KEY",
                "TRACKMUX_BACKENDS", "TRACKMUX_PLUGINS", "TRACKMUX_DISABLE_PLUGIN_AUTOLOAD"):
        env.pop(var, None)
    env.update({
        "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONSOLE": "off",
        "WANDB_DIR": str(dirs["wandb"]), "WANDB_DATA_DIR": str(dirs["wandb-data"]),
        "WANDB_CACHE_DIR": str(dirs["wandb-cache"]),
        "WANDB_CONFIG_DIR": str(dirs["wandb-config"]),
        "SWANLAB_MODE": "offline", "SWANLAB_LOG_DIR": str(dirs["swanlog"]),
        "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1",
        "TENSORBOARD_DIR": str(dirs["tensorboard"]),
        "VERL_USE_EXTERNAL_PLUGINS": "none",  # verl's own Tracking, not trackmux's drop-in
        "TRACKMUX_DIR": str(root / "spool"),
        "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1",
    })
    return env


class Floor:
    """The floor for a local spool: orjson dumps of the same dict plus an append to a file."""

    def __init__(self, path: Path) -> None:
        self._f = open(path, "ab", buffering=0)  # noqa: SIM115 - kept open for the session

    def log(self, data: dict[str, float], step: int) -> None:
        self._f.write(orjson.dumps({"step": step, "data": data}) + b"\n")

    def close(self) -> None:
        self._f.close()


def trackmux_options(root: Path, mlflow_uri: str) -> dict[str, dict[str, Any]]:
    """backend_options for trackmux's four real backends, all under ``root``."""
    return {
        "wandb": {"mode": "offline", "dir": str(root / "wandb")},
        "mlflow": {"tracking_uri": mlflow_uri},
        "tensorboard": {"root": str(root / "tensorboard" / "trackmux")},
        "swanlab": {"mode": "offline", "log_dir": str(root / "swanlog")},
    }


FOUR = ["wandb", "mlflow", "tensorboard", "swanlab"]


def wait_delivered(run: Any, timeout: float) -> bool:
    """Wait until every backend of ``run`` acknowledged everything committed so far."""
    run._spool.flush(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = run.delivery()
        if all(acked >= last for acked, last in state.values()):
            return True
        time.sleep(0.05)
    return False


def rss_kb() -> tuple[int, int]:
    """(current RSS, peak RSS) of this process in KiB, from /proc."""
    cur = peak = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                cur = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1])
    return cur, peak


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    with contextlib.suppress(OSError, IndexError):
        mem = Path("/proc/meminfo").read_text().splitlines()[0].split(":", 1)[1].strip()
    return {"cpus": os.cpu_count(), "cpu": cpu, "memory": mem,
            "python": platform.python_version(), "platform": platform.platform(),
            "load_before": os.getloadavg()}


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("trackmux", "verl", "torch", "wandb", "mlflow", "swanlab", "tensorboard",
                 "orjson"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "-"
    return out


def report(result: dict[str, Any], out: Path | None) -> None:
    """Print a benchmark's result as indented JSON, and write the same text to ``out``
    (``--out``) when given, so the printed and the saved numbers are one."""
    text = orjson.dumps(result, option=orjson.OPT_INDENT_2).decode()
    print(text)
    if out:
        out.write_text(text)
