"""verl stops when the doctor asks (issue 45): its own checkpoint, then out of ``fit()``.

verl's trainers end their loop on ``is_last_step`` (``global_step >= total_training_steps``),
and on that step they validate, save a checkpoint with their own saver (so ``resume_mode``
works from it) and return. The drop-in moves the end: when ``run.should_stop`` is seen at a
``log()`` call, the trainer's ``total_training_steps`` becomes

- the step being logged, for the SFT trainers (``sft_trainer``, ``sft_trainer_ray``): they
  test ``is_last_step`` after logging, so this step is the last;
- the next step, for the PPO/GRPO trainers (``RayPPOTrainer`` and its subclasses, v1's
  ``PPOTrainer``): they test it before the step and log at its end, so the step after the
  one logged is the last. Where ``trainer.save_freq`` is 0 or less verl saves nothing on
  its last step; then the drop-in calls the trainer's own ``_save_checkpoint()`` at that
  step's ``log()`` (where verl would have saved: the step's update is done).

The trainer is the object whose ``fit()`` created the ``Tracking`` (found once, on the
caller's frames: a private reach into verl's call shape, checked by the verl tests).

The SFT trainer of several ranks (torchrun) runs in lockstep and only one rank logs: ending
the loop there alone would leave the others waiting forever. Every rank therefore decides
together, at the start of each step: ``TrainingWorker.train_batch`` (imported by every rank)
is wrapped when its module loads (:func:`install_rank_hook`, from the drop-in's install at
``import verl``); when the trainer calling it has a stop policy, one all-reduce of one number
shares the logging rank's flag, and on every rank the step just begun becomes the last.
Nothing here raises into verl's loop.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import logging
import sys
import weakref
from collections.abc import Callable
from typing import Any

log = logging.getLogger("trackmux.verl")

#: how many frames up from ``Tracking.__init__`` the trainer's ``fit`` may be
FRAMES = 4


def find_trainer(depth: int = FRAMES) -> Any:
    """The verl trainer whose ``fit()`` is creating the Tracking, or None: the ``self`` of
    a caller frame that has ``total_training_steps`` and a ``fit`` method."""
    frame: Any = sys._getframe(2)
    for _ in range(depth):
        if frame is None:
            return None
        candidate = frame.f_locals.get("self")
        if candidate is not None and hasattr(candidate, "total_training_steps") \
                and callable(getattr(candidate, "fit", None)):
            return candidate
        frame = frame.f_back
    return None


class Stopper:
    """Ends one verl trainer's loop at a step boundary once its run asks to stop."""

    def __init__(self, run: Any, trainer: Any) -> None:
        self.run = run
        self._trainer = weakref.ref(trainer)
        self.last_step: int | None = None
        self._saved_last = False
        self._refused = False

    def at_log(self, step: int) -> None:
        """After each ``Tracking.log(step=...)``: decide, or finish the stop. Never raises."""
        try:
            self._at_log(step)
        except Exception as exc:
            if not self._refused:
                self._refused = True
                log.warning("trackmux: the doctor asked the run to stop, but verl's loop could "
                            "not be ended (%s: %s); it goes on", type(exc).__name__, exc)

    def _at_log(self, step: int) -> None:
        trainer = self._trainer()
        if trainer is None:
            return
        # PPO-style trainers keep the step on the object (set in fit(), after the Tracking
        # is created); the SFT trainers keep it in fit()'s locals
        ppo_style = hasattr(trainer, "global_steps")
        if self.last_step is not None:
            if ppo_style and step >= self.last_step and not self._saved_last:
                self._saved_last = True
                if _save_freq(trainer) <= 0:  # verl saves nothing on its last step then
                    trainer._save_checkpoint()
            return
        if self._refused or not self.run.should_stop:
            return
        if not ppo_style and _world_size() > 1 and _rank_hook_installed():
            return  # every rank decides at the next step's start (train_batch)
        if not ppo_style and _world_size() > 1:
            self._refused = True
            log.warning("trackmux: the doctor asks this run to stop, but verl's SFT trainer "
                        "runs %d ranks in lockstep and only this one logs: stopping it alone "
                        "would leave the others waiting. Stop the job by hand (its latest "
                        "checkpoint resumes it); the run will end 'stopped'.", _world_size())
            return
        last = int(trainer.global_steps) + 1 if ppo_style else int(step)
        trainer.total_training_steps = min(int(trainer.total_training_steps), last)
        self.last_step = last
        from trackmux.integrations.stopping import say_stopping

        say_stopping(self.run, f"verl's {type(trainer).__name__}", last)


def _save_freq(trainer: Any) -> int:
    try:
        return int(trainer.config.trainer.save_freq)
    except (AttributeError, KeyError, TypeError, ValueError):
        return 0


def _world_size() -> int:
    try:
        import torch.distributed as dist
    except ImportError:
        return 1
    if dist.is_available() and dist.is_initialized():
        return int(dist.get_world_size())
    return 1


# -- the SFT trainer of several ranks: every rank decides at the start of each step --------
RANK_MODULE = "verl.workers.engine_workers"
_MARK = "__trackmux_stop__"
#: each SPMD SFT trainer seen: whether it has a stop policy (asked once per trainer)
_policies: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
#: what the drop-in (integrations/verl.py) tells the hook: its live runs, and whether a
#: trainer's config asks for a stop policy; handed over, not imported (no import loop)
_live_runs: Callable[[], list[Any]] = list
_has_policy: Callable[[Any], bool] = bool


def install_rank_hook(live_runs: Callable[[], list[Any]],
                      has_policy: Callable[[Any], bool]) -> None:
    """Wrap ``TrainingWorker.train_batch`` now if its module is imported, else when it is
    (a one-shot import hook). Idempotent; costs nothing until the module loads.
    ``live_runs()``: the drop-in's unfinished runs; ``has_policy(trainer)``: whether that
    trainer's config sets ``trainer.trackmux.doctor.stop_on``."""
    global _live_runs, _has_policy
    _live_runs, _has_policy = live_runs, has_policy
    module = sys.modules.get(RANK_MODULE)
    if module is not None:
        _wrap_train_batch(module)
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())


def _rank_hook_installed() -> bool:
    cls = getattr(sys.modules.get(RANK_MODULE), "TrainingWorker", None)
    return bool(getattr(getattr(cls, "train_batch", None), _MARK, False))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds :data:`RANK_MODULE` with the other finders and wraps its loader, once."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != RANK_MODULE:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _WrappingLoader(spec.loader)
        return spec


class _WrappingLoader(importlib.abc.Loader):
    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        try:
            _wrap_train_batch(module)
        except Exception as exc:  # the stop is optional; verl's import is not
            log.warning("trackmux: cannot prepare verl's SFT ranks to stop together (%s)", exc)

    def __getattr__(self, name: str) -> Any:  # get_source, get_code ... of the real one
        return getattr(self._loader, name)


def _wrap_train_batch(module: Any) -> None:
    cls = getattr(module, "TrainingWorker", None)
    method = getattr(cls, "train_batch", None)
    if cls is None or method is None or getattr(method, _MARK, False):
        return
    cls.train_batch = _before_each_step(method)


def _before_each_step(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)  # keeps verl's dispatch attributes (register())
    def train_batch(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            _agree_at_step_start()
        except Exception as exc:
            log.warning("trackmux: the ranks could not agree on the doctor's stop (%s); "
                        "training goes on", exc)
        return method(self, *args, **kwargs)

    setattr(train_batch, _MARK, True)
    return train_batch


def _agree_at_step_start() -> None:
    """In an SPMD SFT trainer's step, on every rank: share the logging rank's flag; if it
    is set, the step just begun is the last (verl validates, saves and returns after it)."""
    frame: Any = sys._getframe(2)  # this <- the train_batch wrapper <- the trainer's fit
    trainer = frame.f_locals.get("self") if frame is not None else None
    if trainer is None or not hasattr(trainer, "total_training_steps") \
            or hasattr(trainer, "global_steps") or _world_size() < 2:
        return
    if trainer not in _policies:
        _policies[trainer] = _has_policy(trainer)
    if not _policies[trainer]:
        return
    from trackmux.integrations import stopping

    runs = _live_runs()
    flag = stopping.agree(any(stopping.wanted(run) for run in runs), _device())
    step = frame.f_locals.get("global_step")
    if flag and isinstance(step, int) and step < int(trainer.total_training_steps):
        trainer.total_training_steps = step
        for run in runs:
            stopping.say_stopping(run, f"verl's {type(trainer).__name__} (every rank)", step)


def _device() -> Any:
    import torch
    import torch.distributed as dist

    if dist.get_backend() == "nccl" and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return None
