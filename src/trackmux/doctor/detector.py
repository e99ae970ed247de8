"""The detector contract, key patterns, and the parameter checks every rule shares.

A detector is a pure, incremental object: ``update(event)`` is called with every event of
the run in spool order and returns the findings that event completes; ``tick(now, alive)``
is called about once a second on a live run (``alive``: the trainer is running and has not
finished) for rules that need wall time. Neither may block or do I/O; the engine catches
what one raises, reports it once and switches that detector off for the run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trackmux.core.events import SEVERITIES, Event
from trackmux.doctor.findings import Finding
from trackmux.doctor.patterns import compile_pattern as compile_pattern


class Detector:
    """Base class of every rule. ``rule`` is the stable name; ``params`` the checked
    parameters (defaults merged with the user's overrides)."""

    rule = ""
    #: the event kinds ``update`` reads (None: every kind). The engine hands a detector
    #: only these, and the live runner does not even decode kinds no detector reads.
    kinds: frozenset[str] | None = None

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.params = dict(params)
        self.severity: str = str(self.params.get("severity", "warning"))
        self._signals: Any = None
        #: the keys this rule read (for ``trackmux doctor --explain``), at most 32
        self.read: dict[str, None] = {}

    @property
    def signals(self) -> Any:
        """The run's key -> signal map (dialects.Signals), shared by the engine's rules."""
        if self._signals is None:
            from trackmux.doctor.dialects import Signals

            self._signals = Signals()
        return self._signals

    def note_read(self, key: str) -> None:
        """Record a key this rule judged (``--explain``), for rules that do not select
        keys through :meth:`keys_for`."""
        if key not in self.read and len(self.read) < 32:
            self.read[key] = None

    def bind(self, signals: Any) -> None:
        self._signals = signals

    def keys_for(self, matcher: KeyMatcher, data: Mapping[str, Any], *,
                 counts: bool = True) -> list[str]:
        """The keys of a metrics event ``matcher`` selects: those of its ``@signal``
        patterns (the run's dialect, dialects.py) and those its other patterns match,
        less its ``!`` exclusions; worked out once per key set. ``counts``: whether they
        are keys the rule read (coverage); not a key it only asks about, such as the
        reward beside a KL rule's own curve."""
        signals = self._signals if self._signals is not None else self.signals
        keyset = signals.resolve(data)
        hit: list[str] | None = keyset.memo.get(id(matcher))
        if hit is None:
            chosen: dict[str, None] = {}
            for signal in matcher.wanted:
                for key in keyset.by_signal.get(signal, ()):
                    if not matcher.excluded(key):
                        chosen[key] = None
            if matcher.include:
                for key in keyset.keys:
                    if isinstance(key, str) and key not in chosen and matcher(key):
                        chosen[key] = None
            hit = keyset.memo[id(matcher)] = list(chosen)
            for key in hit if counts else ():
                if len(self.read) < 32:
                    self.read[key] = None
        return hit

    def update(self, event: Event) -> Sequence[Finding]:
        return ()

    def tick(self, now: float, alive: bool) -> Sequence[Finding]:
        return ()

    def finding(self, step: int, keys: Sequence[str], message: str, *, time: float = 0.0,
                severity: str | None = None,
                evidence: Sequence[tuple[str, int, float | str] | None] = ()) -> Finding:
        return Finding(self.rule, severity or self.severity, step, tuple(keys), message, time,
                       evidence=[e for e in evidence if e is not None])


class KeyMatcher:
    """Glob patterns (``actor/*kl*``), ``re:`` regular expressions, ``!`` to exclude, and
    ``@signal`` for the keys that carry a canonical signal in the run's dialect
    (dialects.py; ``Detector.keys_for`` resolves those). A key matches if an including
    pattern matches and no excluding one does; the answer is cached per key (a run has a
    few hundred keys, logged millions of times; the cache is bounded)."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.include: list[Callable[[str], bool]] = []
        self.exclude: list[Callable[[str], bool]] = []
        self.wanted: list[str] = []
        for pattern in patterns:
            if pattern.startswith("@"):
                self.wanted.append(pattern[1:])
                continue
            target = self.exclude if pattern.startswith("!") else self.include
            target.append(compile_pattern(pattern.removeprefix("!")))
        self._cache: dict[str, bool] = {}

    def excluded(self, key: str) -> bool:
        return any(p(key) for p in self.exclude)

    def __call__(self, key: str) -> bool:
        hit = self._cache.get(key)
        if hit is None:
            hit = any(p(key) for p in self.include) and not any(p(key) for p in self.exclude)
            if len(self._cache) < 100_000:
                self._cache[key] = hit
        return hit


# -- parameter checks -------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    """One parameter of a rule: its default and how a user's value is checked."""

    default: Any
    kind: str  # patterns | positive | fraction | count | severity | bound | bool
    help: str = ""


def check_param(rule: str, name: str, param: Param, value: Any) -> Any:
    """``value`` checked for ``param``; raises ValueError naming the rule and parameter."""
    where = f"doctor rule {rule!r} parameter {name!r}"
    kind = param.kind
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{where} must be true or false, got {value!r}")
        return value
    if kind == "severity":
        if value not in SEVERITIES:
            raise ValueError(f"{where} must be one of {list(SEVERITIES)}, got {value!r}")
        return value
    if kind == "patterns":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not value or \
                not all(isinstance(p, str) for p in value):
            raise ValueError(f"{where} must be a non-empty list of key patterns, got {value!r}")
        for pattern in value:
            if pattern.startswith("@"):
                from trackmux.doctor.dialects import SIGNALS

                if pattern[1:] not in SIGNALS:
                    raise ValueError(f"{where}: no signal {pattern!r}; known: "
                                     f"{sorted('@' + s for s in SIGNALS)}")
                continue
            try:
                compile_pattern(pattern.removeprefix("!"))
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
        return list(value)
    if kind == "bound" and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        raise ValueError(f"{where} must be a finite number, got {value!r}")
    if kind == "count":
        if int(value) != value or value < 1:
            raise ValueError(f"{where} must be an integer >= 1, got {value!r}")
        return int(value)
    if kind == "fraction":
        if not 0 < value <= 1:
            raise ValueError(f"{where} must be in (0, 1], got {value!r}")
        return float(value)
    if value <= 0:  # positive, bound
        raise ValueError(f"{where} must be > 0, got {value!r}")
    return float(value)


COMMON = {
    "enabled": Param(True, "bool", "false switches the rule off"),
}
