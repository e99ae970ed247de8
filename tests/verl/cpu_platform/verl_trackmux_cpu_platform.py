"""A CPU platform for verl, for tests only: verl 0.9.1 ships none and falls back to CUDA.

Loaded through verl's own ``verl.plugins`` entry point group (see the ``.dist-info`` beside
this file); a test puts this directory on ``PYTHONPATH`` of the training subprocess, so
nothing is installed into the environment. Distributed work uses gloo: verl asks for
``cpu:gloo,<device>:<backend>``, which torch rejects when the device is ``cpu`` too, so
duplicate pairs are collapsed before ``torch.distributed.init_process_group`` sees them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import torch
import torch.distributed
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry


def _zero(*args: Any, **kwargs: Any) -> int:
    return 0


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def _device_module() -> ModuleType:
    """``torch.cpu`` plus the memory and RNG calls verl makes on its device module."""
    module = ModuleType("verl_trackmux_cpu_device")
    module.__dict__.update({k: v for k, v in vars(torch.cpu).items() if not k.startswith("__")})
    for name in ("memory_reserved", "memory_allocated", "max_memory_reserved",
                 "max_memory_allocated"):
        setattr(module, name, _zero)
    for name in ("empty_cache", "ipc_collect", "set_per_process_memory_fraction", "set_device"):
        setattr(module, name, _nothing)
    module.mem_get_info = lambda *a, **k: (0, 0)  # type: ignore[attr-defined]
    module.get_rng_state = lambda *a, **k: torch.get_rng_state()  # type: ignore[attr-defined]
    module.set_rng_state = lambda state, *a, **k: torch.set_rng_state(state)  # type: ignore[attr-defined]
    module.get_device_name = lambda *a, **k: "cpu"  # type: ignore[attr-defined]
    return module


_DEVICE_MODULE = _device_module()


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """Only what verl's SFT trainer touches on a machine without accelerators."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Probed after the built-in platforms, so only chosen when none of them is present.
        return os.environ.get("VERL_PLATFORM", "cpu").strip().lower() == "cpu"

    def current_device(self) -> Any:
        # verl passes this to ``.to(device=...)``; an int would mean an accelerator index.
        return torch.device("cpu")

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        pass

    def synchronize(self, device_index: int | None = None) -> None:
        pass

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CPU_VISIBLE_DEVICES"

    @contextlib.contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def profiler_start(self) -> None:
        pass

    def profiler_stop(self) -> None:
        pass

    def ray_resource_name(self) -> str:
        return "CPU"

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        # Ray refuses resources={"CPU": n}: a worker's share of its bundle is num_cpus
        # (verl's Ray trainers; the bundles are {"CPU": 1} with this platform)
        return {"num_cpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


_init_process_group = torch.distributed.init_process_group


def _init_without_duplicates(*args: Any, **kwargs: Any) -> Any:
    backend = kwargs.get("backend")
    if isinstance(backend, str) and "," in backend:
        pairs = list(dict.fromkeys(part.strip() for part in backend.split(",")))
        kwargs["backend"] = ",".join(pairs)
    return _init_process_group(*args, **kwargs)


torch.distributed.init_process_group = _init_without_duplicates


def _pause_after_step() -> None:
    """``TRACKMUX_TEST_PAUSE_AFTER_STEP=N``: every ``log()`` of step N or later returns
    ``TRACKMUX_TEST_PAUSE_S`` (default 3) seconds late. A test that kills the trainer once
    step N is in the spool then kills it mid-run, not after a fast trainer already ran to
    its last step while the test's poll waited for a CPU (the spool still commits: its
    writer is another thread)."""
    after = os.environ.get("TRACKMUX_TEST_PAUSE_AFTER_STEP")
    if not after:
        return
    import time

    from trackmux.core.lifecycle.run import Run

    pause = float(os.environ.get("TRACKMUX_TEST_PAUSE_S", "3"))
    log = Run.log

    def log_then_pause(self: Run, data: Any, step: int | None = None) -> None:
        log(self, data, step=step)
        if step is not None and step >= int(after):
            time.sleep(pause)

    Run.log = log_then_pause  # type: ignore[method-assign]


_pause_after_step()
