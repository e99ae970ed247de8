"""Every hook a trackmux plugin can implement. All names start with ``trackmux_``.

Hooks are for discovery and registration only: they run once when plugins load, never
on the training loop's hot path (one slow plugin must not become everyone's problem).
A plugin is a module (or object) exposed through the ``trackmux`` entry-point group
with functions decorated by :data:`trackmux.hookimpl`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    import click

    from trackmux.core.backends.contract import Backend

hookspec = pluggy.HookspecMarker("trackmux")
hookimpl = pluggy.HookimplMarker("trackmux")


class BackendFactory(Protocol):
    """Builds a backend from its options (from ``init(backend_options=...)`` or config)."""

    def __call__(self, options: dict[str, Any]) -> Backend: ...


class RegisterBackend(Protocol):
    """The ``register`` callback handed to :func:`trackmux_register_backends`."""

    def __call__(
        self,
        name: str,
        factory: BackendFactory,
        *,
        requires: tuple[str, ...] = (),
        extra: str | None = None,
        description: str = "",
        in_trainer: bool = False,
    ) -> None: ...


@hookspec
def trackmux_register_backends(register: RegisterBackend) -> None:
    """Called once when plugins load. Call ``register(name, factory, requires=..., extra=...)``
    for each backend the plugin provides.

    ``requires`` names the modules the backend imports (checked lazily, so a missing
    library shows as "library not installed" instead of breaking the plugin); ``extra``
    is the pip extra of the plugin's distribution that installs them (the hint names
    ``'<distribution>[extra]'`` for a third party). ``factory(options)`` must check options
    and do no I/O: core calls it once at ``init()`` only to validate them.
    ``in_trainer=True`` asks for delivery on a thread of the training process instead of
    the delivery process: for a backend whose output belongs to the trainer itself (the
    console backend writes to the trainer's terminal). Returns nothing.
    """


@hookspec
def trackmux_register_commands(cli: click.Group) -> None:
    """Called when the ``trackmux`` CLI starts; add click commands to ``cli``. Returns nothing."""


class RegisterDetector(Protocol):
    """The ``register`` callback handed to :func:`trackmux_register_detectors`;
    ``factory(params)`` returns a ``trackmux.doctor.detector.Detector``."""

    def __call__(self, name: str, factory: Callable[[Mapping[str, Any]], Any], *,
                 params: Mapping[str, Any] | None = None, description: str = "") -> None: ...


@hookspec
def trackmux_register_detectors(register: RegisterDetector) -> None:
    """Called once when the doctor first builds its rules (docs/doctor.md). Call
    ``register(name, factory, params={...}, description=...)`` for each rule the plugin
    provides: ``factory(params)`` returns a ``trackmux.doctor.detector.Detector`` whose
    ``update(event)`` and ``tick(now, alive)`` return findings; ``params`` maps each
    parameter to its default (or a ``Param``), so users can override and are checked.
    Detectors run in the delivery process on every event: no I/O, no blocking. A name
    that is taken is skipped. Returns nothing.
    """
