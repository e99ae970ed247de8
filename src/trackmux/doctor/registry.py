"""Which rules exist: the built-in ones, then those plugins register through the hook
``trackmux_register_detectors(register)`` (trackmux/hookspecs.py), in that order."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trackmux.doctor.detector import COMMON, Detector, Param

log = logging.getLogger("trackmux")


@dataclass(frozen=True)
class RuleSpec:
    """A rule: its stable name, how to build its detector and its parameters."""

    name: str
    factory: Callable[[Mapping[str, Any]], Detector]
    params: Mapping[str, Param]
    description: str = ""
    source: str = "trackmux"


def _builtin() -> list[RuleSpec]:
    from trackmux.doctor.rules.entropy import EntropyExplosion
    from trackmux.doctor.rules.idle import BUILTIN as IDLE
    from trackmux.doctor.rules.length_collapse import BUILTIN as LENGTH_COLLAPSE
    from trackmux.doctor.rules.loss import LossBlowup
    from trackmux.doctor.rules.metrics import BUILTIN
    from trackmux.doctor.rules.overoptimization import BUILTIN as OVEROPTIMIZATION
    from trackmux.doctor.rules.rewards import BUILTIN as REWARDS
    from trackmux.doctor.rules.signals import BUILTIN as SIGNALS
    from trackmux.doctor.rules.text import DegenerateText
    from trackmux.doctor.rules.time import Stall
    from trackmux.doctor.rules.trajectories import BUILTIN as TRAJECTORIES

    specs = []
    builtin: tuple[type[Detector], ...] = (*BUILTIN, *LENGTH_COLLAPSE, EntropyExplosion,
                                            LossBlowup, *SIGNALS, *IDLE,
                                            *OVEROPTIMIZATION,
                                            DegenerateText, *REWARDS, Stall, *TRAJECTORIES)
    for cls in builtin:
        params = {**COMMON, **getattr(cls, "params_spec", {})}
        specs.append(RuleSpec(cls.rule, cls, params, (cls.__doc__ or "").strip()))
    return specs


def _as_param(value: Any) -> Param:
    if isinstance(value, Param):
        return value
    if isinstance(value, bool):
        return Param(value, "bool")
    if isinstance(value, int):
        return Param(value, "count")
    if isinstance(value, float):
        return Param(value, "positive")
    if isinstance(value, (list, tuple)):
        return Param(list(value), "patterns")
    if value in ("info", "warning", "critical"):
        return Param(value, "severity")
    raise TypeError(f"a detector parameter default must be a Param, bool, int, float, "
                    f"list of patterns or severity, got {value!r}")


_cache: dict[str, RuleSpec] | None = None


def rules(reload: bool = False) -> dict[str, RuleSpec]:
    """Every rule by name (built-ins first, then plugins'). A plugin that registers a
    taken name or a bad parameter is logged and skipped; it never breaks the others."""
    global _cache
    if _cache is not None and not reload:
        return _cache
    found = {spec.name: spec for spec in _builtin()}

    def register(name: str, factory: Callable[[Mapping[str, Any]], Detector], *,
                 params: Mapping[str, Any] | None = None, description: str = "") -> None:
        if not isinstance(name, str) or not name or name in found:
            log.warning("trackmux doctor: a plugin registered the rule %r, which is empty or "
                        "taken; skipped", name)
            return
        try:
            checked = {**COMMON, "severity": Param("warning", "severity"),
                       **{k: _as_param(v) for k, v in (params or {}).items()}}
        except TypeError as exc:
            log.warning("trackmux doctor: rule %r: %s; skipped", name, exc)
            return
        found[name] = RuleSpec(name, factory, checked, description, "plugin")

    from trackmux.core.backends.registry import get_registry

    try:
        get_registry().manager.hook.trackmux_register_detectors(register=register)
    except Exception as exc:  # a broken plugin never breaks the built-in rules
        log.warning("trackmux doctor: loading plugin detectors failed: %s: %s",
                    type(exc).__name__, exc)
    _cache = found
    return found
