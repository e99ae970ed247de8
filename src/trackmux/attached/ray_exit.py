"""An actor that ends itself with ``ray.actor.exit_actor()`` sends what it buffered first.

``exit_actor()`` raises an exit inside the actor's task and Ray tears the worker down; the
``atexit`` flush of :mod:`trackmux.attached.handle` then runs when a push to the driver's
sink no longer arrives, so the events a handle still held were lost. The first handle made
in a Ray worker wraps ``ray.actor.exit_actor`` once: the wrapper closes this process's
handles (each sends what it holds, at most ``CLOSE_TIMEOUT`` seconds) while the actor is
still whole, then calls Ray's own. A name bound before that (``from ray.actor import
exit_actor`` ahead of the first ``attach()``) keeps Ray's function: such an actor calls
``handle.close()`` itself (docs/ray.md).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

CLOSE_TIMEOUT = 5.0

_lock = threading.Lock()


def install(ray: Any) -> None:
    """Wrap ``ray.actor.exit_actor`` once per process; a no-op where Ray has none."""
    actor = getattr(ray, "actor", None)
    with _lock:
        original = getattr(actor, "exit_actor", None)
        if original is None or getattr(original, "_trackmux_closes_handles", False):
            return

        @functools.wraps(original)
        def exit_actor(*args: Any, **kwargs: Any) -> Any:
            from trackmux.attached.handle import close_all

            close_all(CLOSE_TIMEOUT)
            return original(*args, **kwargs)

        exit_actor._trackmux_closes_handles = True  # type: ignore[attr-defined]
        actor.exit_actor = exit_actor  # type: ignore[union-attr]
