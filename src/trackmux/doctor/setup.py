"""How ``init(doctor=...)`` becomes the run's watcher: registered with core at import."""

from __future__ import annotations

from typing import Any

from trackmux.core import settings
from trackmux.core.delivery.watch import WatcherSpec
from trackmux.core.lifecycle.run import register_watch_option


def watchers_for(value: Any) -> list[WatcherSpec]:
    """``init(doctor=value)`` (None: ``TRACKMUX_DOCTOR``, default on), checked now."""
    setting = settings.doctor(value)
    if setting is False or setting == "off":
        return []
    from trackmux.doctor.config import resolve
    from trackmux.doctor.live import TARGET

    rules = resolve(setting)
    return [WatcherSpec(TARGET, {"rules": rules})] if rules else []


register_watch_option("doctor", watchers_for)
