"""TRL's GRPO completions as one batch of samples per logging step.

TRL 1.x's ``GRPOTrainer`` (and the trainers built on it, e.g. ``RLOOTrainer``) keeps the
latest generation batch in ``trainer._logs``: ``prompt``, ``completion``, ``rewards``
(one column per reward function, by name), ``advantages`` and ``extra`` (columns a reward
function added with ``log_extra``). Its own ``log()`` calls ``Trainer.log`` (and so every
callback's ``on_log``) first and only then writes its wandb/trackio table from these, so
when :class:`~trackmux.integrations.transformers.TrackmuxCallback` sees ``on_log`` they
hold exactly what TRL's own table shows at that step.

``_logs`` is TRL's internal state, not an API: :func:`grpo_samples` reads it defensively
(shape checked, every column the same length) and returns None for anything else, which
the callback reports once. The columns are what ``Run.log_samples`` (docs/samples.md)
gives a role by name: ``prompt``, ``response``, ``reward`` (weighted sum, as TRL computes
its ``reward`` metric), ``reward/<function>`` (reward components), ``advantage``,
``group`` (GRPO group: ``num_generations`` consecutive completions of one prompt; one of
the ledger's group columns, so backends show whole groups) and the ``extra`` columns.
When the completions are conversations (GRPO with ``tools`` or an environment: assistant
turns, tool calls, tool results), ``messages`` holds each sample's whole conversation
(:func:`conversations`) for the conversation view and the doctor's trajectory rules.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any


def as_text(value: Any) -> str:
    """A prompt or completion as text: strings as they are, a conversation (TRL's
    conversational format, a list of ``{"role", "content"}`` messages) as ``role: content``
    lines, image parts as ``<image>``."""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and all(isinstance(m, Mapping) for m in value):
        lines = []
        for message in value:
            content = message.get("content", "")
            if isinstance(content, Sequence) and not isinstance(content, str):
                parts = []
                for part in content:
                    if isinstance(part, Mapping):
                        kind = part.get("type")
                        parts.append(str(part.get("text", "")) if kind == "text"
                                     else f"<{kind}>")
                    else:
                        parts.append(str(part))
                content = "".join(parts)
            lines.append(f"{message.get('role', '?')}: {content}")
        return "\n".join(lines)
    return str(value)


def _is_conversation(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str) and bool(value) and \
        all(isinstance(m, Mapping) and isinstance(m.get("role"), str) for m in value)


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    """One TRL message as the ledger keeps it: content parts other than text named by
    their type (images stay out), tool calls flat with their arguments as JSON text (TRL
    and transformers' chat templates hold them as dicts)."""
    out: dict[str, Any] = {"role": message["role"]}
    content = message.get("content")
    if content is None or isinstance(content, str):
        out["content"] = content
    elif isinstance(content, Sequence):
        out["content"] = [{"type": "text", "text": str(p.get("text", ""))}
                          if isinstance(p, Mapping) and p.get("type") == "text"
                          else {"type": str(p.get("type") if isinstance(p, Mapping)
                                            else type(p).__name__)} for p in content]
    else:
        out["content"] = str(content)
    calls = message.get("tool_calls")
    if isinstance(calls, Sequence) and not isinstance(calls, str):
        flat = []
        for k, call in enumerate(calls):
            body = call.get("function", call) if isinstance(call, Mapping) else {}
            args = body.get("arguments", "") if isinstance(body, Mapping) else ""
            flat.append({"id": str(call.get("id") or f"call_{k}") if isinstance(call, Mapping)
                         else f"call_{k}",
                         "name": str(body.get("name", "?")) if isinstance(body, Mapping)
                         else "?",
                         "arguments": args if isinstance(args, str) else json.dumps(
                             args, ensure_ascii=False, default=str)})
        out["tool_calls"] = flat
    for key in ("tool_call_id", "name"):
        if isinstance(message.get(key), str):
            out[key] = message[key]
    return out


def conversations(prompts: Sequence[Any], completions: Sequence[Any]
                  ) -> list[list[dict[str, Any]] | None] | None:
    """Each sample's whole conversation (its prompt's messages, then the completion's:
    assistant turns, tool calls, tool results) when TRL's completions are conversational
    (multi-turn or tool-using GRPO); None for plain text completions."""
    if not any(_is_conversation(c) for c in completions):
        return None
    out: list[list[dict[str, Any]] | None] = []
    for prompt, completion in zip(prompts, completions, strict=True):
        if not _is_conversation(completion):
            out.append(None)
            continue
        head = [_message(m) for m in prompt] if _is_conversation(prompt) else \
            [{"role": "user", "content": as_text(prompt)}]
        out.append(head + [_message(m) for m in completion])
    return out


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number


def _weights(trainer: Any, names: Sequence[str]) -> list[float]:
    weights: Any = getattr(trainer, "reward_weights", None)
    if hasattr(weights, "tolist"):
        weights = weights.tolist()
    try:
        listed = [float(w) for w in weights]
    except (TypeError, ValueError):
        listed = []
    return listed if len(listed) == len(names) else [1.0] * len(names)


def grpo_samples(trainer: Any) -> dict[str, list[Any]] | None:
    """The samples of ``trainer``'s latest generation batch as columns, or None when the
    trainer keeps no such batch (not a GRPO-like trainer, nothing generated yet, or a TRL
    whose ``_logs`` has another shape)."""
    logs = getattr(trainer, "_logs", None)
    if not isinstance(logs, Mapping) or "prompt" not in logs or "completion" not in logs:
        return None
    prompts = list(logs["prompt"])
    completions = list(logs["completion"])
    n = len(prompts)
    if n == 0 or len(completions) != n:
        return None
    out: dict[str, list[Any]] = {"prompt": [as_text(p) for p in prompts],
                                 "response": [as_text(c) for c in completions]}
    talks = conversations(prompts, completions)
    if talks is not None:  # tool-using / multi-turn GRPO: the conversation view's column
        out["messages"] = talks
    rewards = logs.get("rewards")
    components: dict[str, list[float | None]] = {}
    if isinstance(rewards, Mapping):
        for name, values in rewards.items():
            column = [_number(v) for v in values]
            if len(column) == n:
                components[str(name)] = column
    if components:
        names = list(components)
        weights = _weights(trainer, names)
        totals: list[float | None] = []
        for i in range(n):
            cells = [(w, components[name][i]) for w, name in zip(weights, names, strict=True)]
            kept = [w * v for w, v in cells if v is not None and not math.isnan(v)]
            totals.append(sum(kept) if kept else None)
        out["reward"] = totals
        for name in names:
            out[f"reward/{name}"] = components[name]
    advantages = [_number(v) for v in logs.get("advantages", ())]
    if len(advantages) == n:
        out["advantage"] = advantages
    group_size = getattr(trainer, "num_generations", None)
    if isinstance(group_size, int) and group_size > 0 and n % group_size == 0:
        out["group"] = [i // group_size for i in range(n)]
    extra = logs.get("extra")
    if isinstance(extra, Mapping):
        for name, values in extra.items():
            column = list(values)
            if len(column) == n and str(name) not in out:
                out[str(name)] = [v if isinstance(v, (str, int, float, bool)) or v is None
                                  else str(v) for v in column]
    return out
