"""The trainer's exit status, for the runs finished at interpreter exit.

Python hands an uncaught ``SystemExit`` to no hook: atexit handlers cannot see that a
script ended with ``sys.exit(3)``, so a run finished there looked ``finished``. The first
``init()`` in the main thread therefore wraps ``sys.exit`` (as wandb does): the wrapper notes
the status Python will exit with, then calls the function it replaced. A run finished at
exit is ``failed`` when that status is not 0, as it is after an exception.

Not seen: ``raise SystemExit(3)`` written out (no function is called; inside
``with trackmux.init(...)`` the block's ``__exit__`` sees it), an ``exit`` bound before
``init()`` (``from sys import exit``) and ``os._exit`` (no atexit at all). A
``sys.exit(3)`` that the program catches and survives still counts, unless a later
``sys.exit`` replaces it: the last call is the one Python most likely exits with.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, NoReturn

_noted: int | None = None
_original: Any = None


def status_of(code: object) -> int:
    """The process status Python gives ``SystemExit(code)``: None is 0, an int is itself,
    anything else (a message) is printed and gives 1."""
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    if isinstance(code, bool):
        return int(code)
    return 1


def install() -> None:
    """Wrap ``sys.exit`` once (main thread only: elsewhere it just ends the thread)."""
    global _original
    if _original is not None or threading.current_thread() is not threading.main_thread():
        return
    _original = sys.exit

    def exit(status: object = None) -> NoReturn:
        global _noted
        if threading.current_thread() is threading.main_thread():
            _noted = status_of(status)
        _original(status)
        raise SystemExit(status)  # only if the replaced function returned

    exit.__doc__ = getattr(_original, "__doc__", None)
    exit.__wrapped__ = _original  # type: ignore[attr-defined]
    sys.exit = exit


def noted() -> int | None:
    """The status of the last ``sys.exit`` in the main thread, or None."""
    return _noted

