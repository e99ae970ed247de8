"""verl's checkpoints never get ahead of the spool (why: :mod:`trackmux.integrations.checkpoints`).

The drop-in wraps verl's checkpoint savers: before each save, every trackmux run of the
process commits what it was given (the SFT trainer logs step N, then saves it), and it
commits again after the next ``log()`` (the PPO trainers save step N's checkpoint, then log
its metrics).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

#: verl 0.9's checkpoint savers: (module, class, method). Subclasses that do not override
#: the method (the one-step-off and separation trainers) go through the wrapped one.
SAVERS = (
    ("verl.utils.checkpoint.checkpoint_handler", "CheckpointHandler", "save_checkpoint"),
    ("verl.trainer.ppo.ray_trainer", "RayPPOTrainer", "_save_checkpoint"),
    ("verl.trainer.ppo.v1.trainer_base", "PPOTrainer", "_save_checkpoint"),
    ("verl.experimental.fully_async_policy.fully_async_trainer", "FullyAsyncTrainer",
     "_save_checkpoint"),
)
_MARK = "__trackmux_checkpoint__"


def wrap_savers(before_save: Callable[[], None]) -> list[str]:
    """Wrap each saver of :data:`SAVERS` whose module is imported; returns what was
    wrapped now. Idempotent; modules imported later are wrapped on a later call."""
    wrapped = []
    for module_name, class_name, method_name in SAVERS:
        cls = getattr(sys.modules.get(module_name), class_name, None)
        method = getattr(cls, method_name, None) if cls is not None else None
        if method is None or getattr(method, _MARK, False):
            continue
        setattr(cls, method_name, _saver(method, before_save))
        wrapped.append(f"{class_name}.{method_name}")
    return wrapped


def unwrap_savers() -> None:
    """Give verl its own savers back."""
    for module_name, class_name, method_name in SAVERS:
        cls = getattr(sys.modules.get(module_name), class_name, None)
        method = cls.__dict__.get(method_name) if cls is not None else None
        if method is not None and getattr(method, _MARK, False):
            setattr(cls, method_name, method.__wrapped__)


def _saver(method: Callable[..., Any], before_save: Callable[[], None]) -> Callable[..., Any]:
    @functools.wraps(method)
    def save(*args: Any, **kwargs: Any) -> Any:
        before_save()
        return method(*args, **kwargs)

    setattr(save, _MARK, True)
    return save
