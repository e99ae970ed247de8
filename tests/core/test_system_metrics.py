"""System metrics: psutil readings under system/..., GPUs through a fake NVML, the sampler
thread appending to a real run, and bad settings named."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import trackmux
from trackmux.core.events import MetricsEvent
from trackmux.core.lifecycle.system_metrics import GpuReader, SystemSampler, from_env, interval_of
from trackmux.core.spool.reader import SpoolReader

psutil = pytest.importorskip("psutil")


class FakeNvml:
    """The slice of pynvml the sampler uses; GPU 1 cannot report power (as some boards)."""

    NVML_TEMPERATURE_GPU = 0

    def __init__(self, gpus: int = 2) -> None:
        self.gpus = gpus

    def nvmlDeviceGetCount(self) -> int:
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        return SimpleNamespace(gpu=40 + h, memory=10)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return SimpleNamespace(used=(h + 1) * 2**30, total=80 * 2**30, free=0)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        return 60 + h

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        if h == 1:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return 250_500  # milliwatts


def test_gpu_keys_and_units_from_nvml() -> None:
    values = GpuReader(FakeNvml()).read("system")
    assert values == {
        "system/gpu0/util_percent": 40.0, "system/gpu0/memory_used_gb": 1.0,
        "system/gpu0/memory_total_gb": 80.0, "system/gpu0/temperature_c": 60.0,
        "system/gpu0/power_w": 250.5,
        "system/gpu1/util_percent": 41.0, "system/gpu1/memory_used_gb": 2.0,
        "system/gpu1/memory_total_gb": 80.0, "system/gpu1/temperature_c": 61.0,
    }


def test_sample_has_documented_keys_and_rates(tmp_path: Path) -> None:
    got: list[dict[str, float]] = []
    sampler = SystemSampler(got.append, 1.0, tmp_path, node="node-a", nvml=FakeNvml(1))
    first = sampler.sample()
    second = sampler.sample()
    for key in ("cpu/percent", "memory/percent", "memory/used_gb", "process/rss_gb",
                "disk/percent", "gpu0/util_percent", "gpu0/power_w"):
        assert f"system/node-a/{key}" in first
    assert "system/node-a/net/sent_mb_s" in second  # rates need two samples
    if psutil.disk_io_counters() is not None:  # None in some containers
        assert "system/node-a/disk/read_mb_s" in second
    assert 0 <= second["system/node-a/memory/percent"] <= 100
    assert second["system/node-a/process/rss_gb"] > 0


def test_run_samples_beside_the_loop(tmp_path: Path) -> None:
    run = trackmux.init(project="s", backends=[], dir=tmp_path, system_metrics=0.1)
    assert isinstance(run, trackmux.Run)
    sampler = run._sampler
    sampled = threading.Semaphore(0)
    emit = sampler.emit

    def counted(data: dict[str, float]) -> None:
        emit(data)
        sampled.release()

    sampler.emit = counted  # read by the sampler's thread at each sample
    for step in range(5):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
        # a sample beside each step (not a sleep: a loaded machine may sample later)
        assert sampled.acquire(timeout=60), "the sampler took no sample in 60 s"
    run.finish()
    assert not sampler.thread.is_alive()  # stopped by finish
    reader = SpoolReader(run.dir)
    events = [e for e in reader.iter_events() if isinstance(e, MetricsEvent)
              and "system/cpu/percent" in e.data]
    reader.close()
    assert len(events) >= 2
    assert all(0 <= e.step <= 4 for e in events)


@pytest.mark.parametrize(("value", "error"), [(0.0, ValueError), (-1, ValueError),
                                              (float("nan"), ValueError), ("10", TypeError)])
def test_bad_settings_name_system_metrics(tmp_path: Path, value: Any,
                                          error: type[Exception]) -> None:
    with pytest.raises(error, match="system_metrics"):
        trackmux.init(project="s", backends=[], dir=tmp_path, system_metrics=value)


def test_env_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert interval_of(True) == 10.0 and interval_of(False) is None
    monkeypatch.setenv("TRACKMUX_SYSTEM_METRICS", "2.5")
    assert from_env() == 2.5
    monkeypatch.setenv("TRACKMUX_SYSTEM_METRICS", "false")
    assert from_env() is None
    monkeypatch.setenv("TRACKMUX_SYSTEM_METRICS", "often")
    with pytest.raises(ValueError, match="TRACKMUX_SYSTEM_METRICS"):
        from_env()
