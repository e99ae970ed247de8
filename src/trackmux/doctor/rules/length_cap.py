"""Where a run's config says its response-length cap, for ``length_blowup``'s "pinned at
its cap" (docs/doctor.md). Each name is the one its framework's config uses; the first of
this order that a config holds (anywhere in its nesting) is the cap."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: config key -> where it comes from
CAP_KEYS: dict[str, str] = {
    "max_response_length": "verl: data.max_response_length",
    "max_completion_length": "TRL GRPOConfig",
    "rollout_max_response_len": "slime --rollout-max-response-len",
    "generate_max_len": "OpenRLHF --generate_max_len",
    "max_new_tokens": "NeMo-RL policy.generation.max_new_tokens, transformers generate",
    "response_length": "TRL PPOConfig",
}
MAX_NODES = 10_000


def find_cap(config: Mapping[str, Any]) -> tuple[str, int] | None:
    """(dotted path, value) of the response-length cap in a run's config, or None."""
    found: dict[str, tuple[str, int]] = {}
    stack: list[tuple[str, Any]] = [("", config)]
    seen = 0
    while stack and seen < MAX_NODES:
        path, node = stack.pop()
        seen += 1
        if not isinstance(node, Mapping):
            continue
        for name, value in node.items():
            where = f"{path}.{name}" if path else str(name)
            if isinstance(value, Mapping):
                stack.append((where, value))
            elif name in CAP_KEYS and isinstance(value, int) and not isinstance(value, bool) \
                    and value > 0 and name not in found:
                found[name] = (where, value)
    for name in CAP_KEYS:
        if name in found:
            return found[name]
    return None
