"""What the integrations share to stop a run the doctor asked to stop (issue 45).

The flag lives on the run (``run.should_stop``), which only the rank that logs holds. A
trainer of several ranks must stop on every rank at the same step, or the others wait for
it forever in their next collective: :func:`agree` shares the decision (one tiny all-reduce
per step, and only when a stop policy is set: :func:`configured`).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("trackmux")


def configured(doctor: Any = None) -> bool:
    """Whether a run started with ``init(doctor=doctor)`` has a stop policy (its key
    ``stop_on``, else ``TRACKMUX_DOCTOR_STOP_ON``). The same answer on every rank, without
    opening a run; a value init() would refuse counts as set (init() says what is wrong)."""
    from trackmux.core import settings

    setting = settings.doctor(doctor)
    if setting is False or setting == "off":
        return False
    try:
        from trackmux.doctor import stop

        _, stop_on = stop.split(setting)
    except Exception:
        return True
    if stop_on is None:
        stop_on = settings.doctor_stop_on()
    return stop_on not in (None, False)


def wanted(run: Any) -> bool:
    """``run.should_stop`` of a run or None; False for anything else."""
    return run is not None and getattr(run, "should_stop", False) is True


def agree(flag: bool, device: Any = None) -> bool:
    """``flag`` of any rank, on every rank (torch.distributed's all-reduce of a max) when a
    process group of more than one rank is up; ``flag`` otherwise. ``device``: where the
    backend's tensors live (the Trainer's ``args.device``; NCCL needs the GPU)."""
    try:
        import torch.distributed as dist
    except ImportError:
        return flag
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return flag
    import torch

    value = torch.tensor([1 if flag else 0], dtype=torch.int32, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def say_stopping(run: Any, where: str, step: int) -> None:
    """One line: the run stops at ``step`` and why."""
    reason = getattr(run, "stop_reason", None) or {}
    log.warning("trackmux: %s stops at step %s (the doctor's stop_on: %s %s @ step %s); "
                "saving a checkpoint, then ending the run as stopped", where, step,
                reason.get("severity", "?"), reason.get("rule", "?"), reason.get("step", "?"))
