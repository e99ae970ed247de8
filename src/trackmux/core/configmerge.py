"""Config semantics: each ``log_config`` merges into the config so far, nested.

Like wandb's ``config.update`` on nested dicts, but recursive: a dict merges into a dict
key by key; any other value (a list, a scalar, a dict over a scalar) replaces. The spool
keeps each call's own keys; core hands backends the merged config, and ``show`` and the
report show it, so every consumer agrees on one rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def merge_config(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """A new dict: ``base`` with ``update`` merged in (neither argument is changed)."""
    out = dict(base)
    for key, value in update.items():
        old = out.get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            out[key] = merge_config(old, value)
        else:
            out[key] = value
    return out


def merged(configs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Every config in order, merged into one."""
    out: dict[str, Any] = {}
    for config in configs:
        out = merge_config(out, config)
    return out
