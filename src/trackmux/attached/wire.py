"""Events as plain tuples for the trip from a worker to the sink.

Frozen slotted dataclasses do not unpickle on every Python we support, and a tuple of
builtins pickles faster. Every kind in :data:`trackmux.core.events.Event` is covered, so
a new kind added there travels without changes here.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable
from typing import Any

from trackmux.core.events import Event, TokenArray

_KINDS: dict[str, Any] = {cls.__name__: cls for cls in typing.get_args(Event)}
_FIELDS: dict[str, tuple[str, ...]] = {
    name: tuple(f.name for f in dataclasses.fields(cls) if f.init and f.name != "seq")
    for name, cls in _KINDS.items()
}

Wire = tuple[str, tuple[Any, ...]]


def encode(events: Iterable[Event]) -> list[Wire]:
    """Events as (class name, field values); the spool gives ``seq`` later."""
    out: list[Wire] = []
    for event in events:
        name = type(event).__name__
        out.append((name, tuple(_plain(getattr(event, f)) for f in _FIELDS[name])))
    return out


_TOKEN_FIELDS = tuple(f.name for f in dataclasses.fields(TokenArray))


def _plain(value: Any) -> Any:
    """Nested dataclasses (a samples event's token arrays) as tuples too."""
    if isinstance(value, tuple) and value and isinstance(value[0], TokenArray):
        return tuple(("TokenArray", tuple(getattr(t, f) for f in _TOKEN_FIELDS))
                     for t in value)
    return value


def _rebuilt(value: Any) -> Any:
    if (isinstance(value, tuple) and value and isinstance(value[0], tuple)
            and len(value[0]) == 2 and value[0][0] == "TokenArray"):
        return tuple(TokenArray(**dict(zip(_TOKEN_FIELDS, fields, strict=True)))
                     for _, fields in value)
    return value


def decode(wire: Iterable[Wire]) -> list[Event]:
    """The events again, step and wall time as the worker stamped them."""
    out: list[Event] = []
    for name, values in wire:
        cls = _KINDS.get(name)
        if cls is None:  # a newer worker's kind this driver does not know
            raise ValueError(f"unknown event kind {name!r} from an attached worker")
        out.append(cls(**{f: _rebuilt(v)
                          for f, v in zip(_FIELDS[name], values, strict=True)}))
    return out
