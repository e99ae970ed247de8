"""System metrics sampled beside the run: CPU, memory, disk, network (psutil) and GPUs (NVML).

Why here: verl's tracker often lives in a CPU-only Ray actor, so a tracker's own system
metrics never see the GPUs that train. trackmux samples in the training process, and
under Ray in one attached worker per other node (``node=``, see
``trackmux/attached/nodes.py``), where the GPUs are.

Cost: one daemon thread wakes every ``interval`` seconds, makes a few short C calls
(``/proc`` reads, NVML queries; each releases the GIL or returns in microseconds) and
appends one metrics event to the spool like ``Run.log`` does. It never holds the GIL for
long and does no other I/O. ``python -m benchmarks.rl_data system`` measures what it costs
a loop.

Keys (documented in docs/values.md), ``<p>`` = ``system`` or ``system/<node>``:
``<p>/cpu/percent``, ``<p>/memory/percent``, ``<p>/memory/used_gb``,
``<p>/process/rss_gb`` (not for a node's sampler), ``<p>/disk/percent``, ``<p>/disk/read_mb_s``,
``<p>/disk/write_mb_s``, ``<p>/net/sent_mb_s``, ``<p>/net/recv_mb_s``, and per GPU ``i``:
``<p>/gpu<i>/util_percent``, ``<p>/gpu<i>/memory_used_gb``, ``<p>/gpu<i>/memory_total_gb``,
``<p>/gpu<i>/temperature_c``, ``<p>/gpu<i>/power_w``.

GPUs are read through nvidia-ml-py (``pynvml``) when it is installed and a driver answers;
the NVML code is tested against a fake NVML only and is untested on real GPUs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("trackmux")

DEFAULT_INTERVAL = 10.0
MIN_INTERVAL = 0.1
_GB = 1024**3
_MB = 1024**2


def interval_of(value: object) -> float | None:
    """``system_metrics``: False/None (off), True (every 10 s) or seconds (>= 0.1)."""
    if value is None or value is False:
        return None
    if value is True:
        return DEFAULT_INTERVAL
    if not isinstance(value, (int, float)):
        raise TypeError(f"system_metrics must be a bool or a number of seconds, got "
                        f"{type(value).__name__}")
    if not value >= MIN_INTERVAL:  # also rejects NaN
        raise ValueError(f"system_metrics must be at least {MIN_INTERVAL} seconds, got {value}")
    return float(value)


def from_env() -> float | None:
    """``TRACKMUX_SYSTEM_METRICS``: unset/0/false (off), 1/true (10 s) or seconds."""
    raw = os.environ.get("TRACKMUX_SYSTEM_METRICS", "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return None
    if raw in ("1", "true", "yes", "on"):
        return DEFAULT_INTERVAL
    try:
        return interval_of(float(raw))
    except ValueError:
        raise ValueError(f"TRACKMUX_SYSTEM_METRICS must be true/false or seconds, got "
                         f"{raw!r}") from None


def load_psutil() -> Any:
    try:
        import psutil
    except ImportError:
        raise ValueError("system_metrics needs psutil: pip install psutil (or, in the "
                         "trackmux checkout, pip install -e '.[system]')") from None
    return psutil


def load_nvml() -> Any | None:
    """pynvml (from nvidia-ml-py) initialised, or None when it or a driver is missing."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # no driver, no GPU: CPU metrics only
        log.info("trackmux: no GPU metrics (NVML: %s)", exc)
        return None
    return pynvml


class GpuReader:
    """Per-GPU readings through an NVML module (the real pynvml, or a fake in tests)."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i)
                        for i in range(nvml.nvmlDeviceGetCount())]
        self._failed: set[str] = set()

    def read(self, prefix: str) -> dict[str, float]:
        nvml = self.nvml
        out: dict[str, float] = {}
        for i, handle in enumerate(self.handles):
            key = f"{prefix}/gpu{i}"
            rates = self._query("util_percent", nvml.nvmlDeviceGetUtilizationRates, handle)
            if rates is not None:
                out[f"{key}/util_percent"] = float(rates.gpu)
            memory = self._query("memory", nvml.nvmlDeviceGetMemoryInfo, handle)
            if memory is not None:
                out[f"{key}/memory_used_gb"] = memory.used / _GB
                out[f"{key}/memory_total_gb"] = memory.total / _GB
            temperature = self._query("temperature_c", nvml.nvmlDeviceGetTemperature, handle,
                                      nvml.NVML_TEMPERATURE_GPU)
            if temperature is not None:
                out[f"{key}/temperature_c"] = float(temperature)
            power = self._query("power_w", nvml.nvmlDeviceGetPowerUsage, handle)
            if power is not None:
                out[f"{key}/power_w"] = power / 1000.0  # NVML reports milliwatts
        return out

    def _query(self, name: str, call: Callable[..., Any], *args: Any) -> Any:
        """One NVML query; one a GPU does not support is left out (noted once)."""
        try:
            return call(*args)
        except Exception as exc:
            if name not in self._failed:
                self._failed.add(name)
                log.info("trackmux: GPU metric %s unavailable: %s", name, exc)
            return None


class SystemSampler:
    """Samples every ``interval`` seconds and hands a dict of ``system/...`` values to
    ``emit`` (the run appends it as a metrics event)."""

    def __init__(self, emit: Callable[[dict[str, float]], None], interval: float,
                 disk_path: Path, *, node: str | None = None, psutil: Any = None,
                 nvml: Any = None, gpus: bool = True, process: bool = True) -> None:
        self.emit = emit
        self.interval = interval
        self.disk_path = disk_path
        self.prefix = "system" if not node else f"system/{node}"
        self.psutil = psutil if psutil is not None else load_psutil()
        if nvml is None and gpus:
            nvml = load_nvml()
        self.gpus = GpuReader(nvml) if nvml is not None else None
        self._process = self.psutil.Process() if process else None
        self._stop = threading.Event()
        self._last: tuple[float, Any, Any] | None = None
        self.psutil.cpu_percent(interval=None)  # the first call only starts the clock
        self.thread = threading.Thread(target=self._loop, name="trackmux-system-metrics",
                                       daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.emit(self.sample())
            except Exception as exc:  # never let a sampler error reach the trainer
                log.warning("trackmux: system metrics sampling stopped: %s", exc)
                return

    def sample(self) -> dict[str, float]:
        ps, p = self.psutil, self.prefix
        memory = ps.virtual_memory()
        out: dict[str, float] = {
            f"{p}/cpu/percent": float(ps.cpu_percent(interval=None)),
            f"{p}/memory/percent": float(memory.percent),
            f"{p}/memory/used_gb": (memory.total - memory.available) / _GB,
        }
        if self._process is not None:
            out[f"{p}/process/rss_gb"] = self._process.memory_info().rss / _GB
        with contextlib.suppress(OSError):
            out[f"{p}/disk/percent"] = float(ps.disk_usage(str(self.disk_path)).percent)
        now, disk, net = time.monotonic(), ps.disk_io_counters(), ps.net_io_counters()
        if self._last is not None:
            then, disk0, net0 = self._last
            span = max(now - then, 1e-6)
            if disk is not None and disk0 is not None:
                out[f"{p}/disk/read_mb_s"] = (disk.read_bytes - disk0.read_bytes) / _MB / span
                out[f"{p}/disk/write_mb_s"] = (disk.write_bytes - disk0.write_bytes) / _MB / span
            if net is not None and net0 is not None:
                out[f"{p}/net/sent_mb_s"] = (net.bytes_sent - net0.bytes_sent) / _MB / span
                out[f"{p}/net/recv_mb_s"] = (net.bytes_recv - net0.bytes_recv) / _MB / span
        self._last = (now, disk, net)
        if self.gpus is not None:
            out.update(self.gpus.read(p))
        return out
