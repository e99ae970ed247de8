"""verl's checkpoints never get ahead of the spool.

Under the default durability a SIGKILL may lose what ``log()`` took in its last 0.5 s
(docs/guarantees.md). When verl has written checkpoint N and is then killed, the restart
rewinds the run to N and never logs the steps up to N again: whatever the spool lost of
them is lost for good, though the checkpoint says they happened. So the drop-in wraps
verl's checkpoint savers: before each save, every trackmux run of the process commits
what it was given (the SFT trainer logs step N, then saves it), and it commits again
after the next ``log()`` (the PPO trainers save step N's checkpoint, then log its metrics).
One commit per checkpoint: milliseconds, beside a checkpoint's seconds.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger("trackmux.verl")

#: verl 0.9's checkpoint savers: (module, class, method). Subclasses that do not override
#: the method (the one-step-off and separation trainers) go through the wrapped one.
SAVERS = (
    ("verl.utils.checkpoint.checkpoint_handler", "CheckpointHandler", "save_checkpoint"),
    ("verl.trainer.ppo.ray_trainer", "RayPPOTrainer", "_save_checkpoint"),
    ("verl.trainer.ppo.v1.trainer_base", "PPOTrainer", "_save_checkpoint"),
    ("verl.experimental.fully_async_policy.fully_async_trainer", "FullyAsyncTrainer",
     "_save_checkpoint"),
)
#: How long a save waits for the spool; a stuck spool (disk full) is named, not waited on.
FLUSH_TIMEOUT = 10.0
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


def commit(runs: Iterable[Any], timeout: float = FLUSH_TIMEOUT) -> None:
    """Commit each run's spool; never raises (a checkpoint must not fail for tracking)."""
    for run in runs:
        try:
            if not run.flush(timeout):
                log.warning("trackmux: the spool of run %s did not commit within %.0f s "
                            "before verl's checkpoint; a kill now may lose its last steps",
                            getattr(run, "id", "?"), timeout)
        except Exception:
            log.exception("trackmux: committing the spool before verl's checkpoint failed")
