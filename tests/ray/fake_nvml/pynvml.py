"""A fake ``pynvml`` (nvidia-ml-py) for the Ray tests: put this folder first on
PYTHONPATH and every process of the job sees two GPUs. trackmux's NVML code is tested
against fakes only; it is untested on real GPUs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

NVML_TEMPERATURE_GPU = 0


def nvmlInit() -> None:
    pass


def nvmlDeviceGetCount() -> int:
    return 2


def nvmlDeviceGetHandleByIndex(i: int) -> int:
    return i


def nvmlDeviceGetUtilizationRates(h: int) -> Any:
    return SimpleNamespace(gpu=40 + h, memory=10)


def nvmlDeviceGetMemoryInfo(h: int) -> Any:
    return SimpleNamespace(used=(h + 1) * 2**30, total=80 * 2**30, free=0)


def nvmlDeviceGetTemperature(h: int, sensor: int) -> int:
    return 60 + h


def nvmlDeviceGetPowerUsage(h: int) -> int:
    return 250_500
