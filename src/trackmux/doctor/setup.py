"""How ``init(doctor=...)`` becomes the run's watcher: registered with core at import."""

from __future__ import annotations

from typing import Any

from trackmux.core import settings
from trackmux.core.delivery.watch import WatcherSpec
from trackmux.core.lifecycle.run import register_watch_option


def watchers_for(value: Any, signals: Any = None) -> list[WatcherSpec]:
    """``init(doctor=value)`` (None: ``TRACKMUX_DOCTOR``, default on), checked now. The key
    ``stop_on`` (else ``TRACKMUX_DOCTOR_STOP_ON``) becomes the watcher's stop policy
    (trackmux/doctor/stop.py), which the run applies to each finding in the trainer's
    process. ``init(signals=...)`` declares keys of signals; per signal it wins over the
    rules file's ``[signals]`` (checked even with the doctor off)."""
    declared = None
    if signals is not None:
        from trackmux.doctor.dialects import check_mappings

        declared = check_mappings(signals, "init(signals=...)")
    setting = settings.doctor(value)
    if setting is False or setting == "off":
        return []
    from trackmux.doctor import stop
    from trackmux.doctor.config import resolve
    from trackmux.doctor.live import TARGET
    from trackmux.doctor.registry import rules as known_rules

    setting, stop_on = stop.split(setting)
    source = "doctor stop_on"
    if stop_on is None:
        stop_on, source = settings.doctor_stop_on(), "TRACKMUX_DOCTOR_STOP_ON"
    rules = resolve(setting)
    if declared and rules:
        rules["signals"] = {**rules.get("signals", {}), **declared}
    enabled = [name for name in rules if name != "signals"]
    policy = stop.check(stop_on, known_rules(), enabled, source)
    return [WatcherSpec(TARGET, {"rules": rules}, stop=policy)] if rules else []


register_watch_option("doctor", watchers_for, takes=("signals",))
