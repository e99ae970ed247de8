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
caller's frames: a private reach into verl's call shape, checked by the verl tests). An SFT
trainer of several ranks (torchrun) cannot be stopped from the one rank that logs: the other
ranks would wait for it forever. Then the stop is recorded (the run still ends ``stopped``)
and a warning says to stop it by hand. Nothing here raises into verl's loop.
"""

from __future__ import annotations

import logging
import sys
import weakref
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
