"""The delivery process's CPU priority: below the trainer from its first instruction.

``TRACKMUX_DELIVERY_NICE``: ``idle`` (the default) is Linux's idle scheduling class
(``SCHED_IDLE``; nice 19 where there is none): the kernel treats a core that runs only
delivery as free, places the trainer's threads there, and never lets a waking delivery
thread preempt them, so a CPU-bound loop keeps its core (benchmark B7: +19% at nice 10,
+4% idle). An int 0-19 is a nice increment in the normal class instead (0: the trainer's
priority), for a machine kept busy for hours, where idle-class delivery would wait for the
end. Anything else: nice 19, with a warning in ``delivery.log``.

Two things kept it from being below the trainer, each taking the CPU from the trainer's
spool writer while that thread held the GIL, so that a ``log()`` waited (issue 43 item 17):

- its interpreter start and ``import trackmux`` (0.2-0.4 s of CPU) ran at the trainer's
  priority before it could lower itself, right when the trainer's loop starts. The trainer
  now starts it through ``nice -n N`` (:func:`launch_prefix`; raising one's own nice value
  is always allowed, so the command cannot fail), and it then enters the idle class itself
  (:func:`lower`);
- it ran in a session of its own, and Linux's autogroup scheduler shares the CPU between
  sessions equally, whatever the priorities inside them. It now gets a process group of its
  own in the trainer's session (:func:`own_process_group`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from trackmux.core.procs import nice_command

ENV = "TRACKMUX_DELIVERY_NICE"
IDLE = "idle"
IDLE_FALLBACK_NICE = 19
#: set by the trainer in the process's environment: the nice increment it was started with
LAUNCHED_ENV = "TRACKMUX_DELIVERY_LAUNCHED_NICE"


@dataclass(frozen=True)
class Priority:
    """What ``TRACKMUX_DELIVERY_NICE`` asks for."""

    idle: bool  # the idle scheduling class (its nice value is only the fallback)
    increment: int  # the nice increment in the normal class, 0-19
    problem: str = ""  # a value that is neither: said once in delivery.log


def wanted(raw: str | None = None) -> Priority:
    """Parse ``TRACKMUX_DELIVERY_NICE`` (``raw``, default: the environment's)."""
    text = (os.environ.get(ENV) if raw is None else raw) or IDLE
    text = text.strip().lower()
    if text == IDLE:
        return Priority(idle=True, increment=IDLE_FALLBACK_NICE)
    try:
        return Priority(idle=False, increment=max(0, min(19, int(text))))
    except ValueError:
        return Priority(idle=False, increment=IDLE_FALLBACK_NICE,
                        problem=f"{ENV}={text!r} is neither {IDLE!r} nor an int 0-19; "
                                f"using nice {IDLE_FALLBACK_NICE}")


def launch_prefix(priority: Priority) -> list[str]:
    """``["/usr/bin/nice", "-n", "19"]``: the command that starts the process already below
    the trainer (nothing for increment 0 or without the command: the process then lowers
    itself when it starts)."""
    return nice_command(priority.increment)


def own_process_group() -> dict[str, Any]:
    """``Popen`` arguments for a process group of its own, in the trainer's session.

    Not a session of its own: with Linux's autogroup scheduler (``sched_autogroup_enabled``,
    on in most distributions) a nice value or the idle class ranks a thread only against
    the others of its session (sched(7), "The nice value and group scheduling"), and
    sessions share the CPU equally. In a new session the delivery process competed as the
    trainer's equal: a scheduler trace of a 15 ms ``log()`` showed it on a core for 14.9 ms
    while the trainer's spool writer, holding the GIL, waited for one (issue 43 item 17).
    Python 3.10 has no ``process_group``: a new session there, whose group :func:`lower`
    lowers too."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"start_new_session": True}


def lower(priority: Priority, launched_increment: int) -> str | None:
    """In the delivery process, first thing: enter the idle class, or apply the increment
    ``nice`` did not already apply (``launched_increment``); when the process leads its own
    session (Python 3.10), lower the session's autogroup as well. Returns a problem to log."""
    problem = priority.problem or None
    if os.getsid(0) == os.getpid():
        _lower_autogroup(priority.increment)
    if priority.idle and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            return problem
        except OSError as exc:
            problem = (f"cannot use the idle scheduling class ({exc}); using nice "
                       f"{IDLE_FALLBACK_NICE}")
    increment = priority.increment - launched_increment
    if increment > 0 and hasattr(os, "nice"):
        try:
            os.nice(increment)
        except OSError as exc:
            problem = f"cannot lower priority: {exc}"
    return problem


def _lower_autogroup(nice: int) -> None:
    """Give this process's session (its autogroup) the nice value ``nice``: the kernel
    weighs sessions against each other by it, not by their processes' priorities."""
    try:
        with open("/proc/self/autogroup", "w") as group:
            group.write(str(nice))
    except OSError:  # no autogroup (nothing to lower), or not allowed
        pass


def describe() -> str:
    """This process's priority as the log says it: ``idle class`` or ``nice N``."""
    if hasattr(os, "sched_getscheduler") and os.sched_getscheduler(0) == getattr(
            os, "SCHED_IDLE", None):
        return "idle class"
    return f"nice {os.getpriority(os.PRIO_PROCESS, 0)}" if hasattr(os, "getpriority") else "?"
