"""Trajectories in the samples ledger: a ``messages`` column whose cells are conversations.

A cell is a list of OpenAI-style messages, one per turn::

    {"role": "assistant", "content": "...",                # text, or a list of parts
     "tool_calls": [{"id": "c1", "name": "search", "arguments": "{\\"q\\": \\"x\\"}"}],
     "reward": 0.5, "latency_ms": 812, "tokens": 41, "logprobs": [-0.1, ...]}
    {"role": "tool", "tool_call_id": "c1", "name": "search", "status": "error",
     "content": "timeout"}

A tool call is flat (``id``, ``name``, ``arguments``) or OpenAI's nested form
(``{"id", "type": "function", "function": {"name", "arguments"}}``); ``arguments`` is the
JSON *string* the model wrote (kept as written, valid JSON or not: a model's broken
arguments are data). Per-turn fields beside a message: ``reward`` and ``latency_ms``
(finite numbers), ``tokens`` (a count, or the turn's token ids), ``logprobs`` (the turn's
per-token numbers; numpy/torch 1-D arrays are taken). Other keys are kept if JSON can hold
them.

The column is recognised by its name (``messages``) or by its first cell (a list of dicts
with a ``role``). Each cell is checked in the caller's thread and stored as canonical JSON
text (orjson, keys in the order given), so a reader gets it back exactly; the event names
the column in ``SamplesEvent.trajectories`` and the spool compresses it with the other
text. A cell of the wrong shape drops its sample (the message names the column, row and
turn); strict mode raises instead. The helpers below (summary, transcript) are what the
doctor, ``--where``, the table fallback and every backend read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain, repeat
from operator import is_not
from typing import Any

import orjson

#: the column name that is always a trajectory column
COLUMN = "messages"
STATUSES = ("ok", "error")
_NUMPY_OPTS = orjson.OPT_SERIALIZE_NUMPY


class TrajectoryProblem(ValueError):
    """A trajectory cell of the wrong shape (the message names column, row and turn)."""


def _module(value: object) -> str:
    return type(value).__module__.split(".")[0]


def is_trajectory_column(name: str, values: Sequence[Any]) -> bool:
    """Whether the column ``name`` holds conversations (by name, else by its first cell)."""
    if name == COLUMN:
        return True
    first = next((v for v in values if v is not None), None)
    if not isinstance(first, (list, tuple)) or not first:
        return False
    head = first[0]
    return isinstance(head, Mapping) and "role" in head


def _finite(value: Any, where: str) -> Any:
    if value is None or type(value) is int:
        return value
    if type(value) is float:
        if not math.isfinite(value):
            raise TrajectoryProblem(f"{where} must be a finite number or None, got {value}")
        return value
    if isinstance(value, bool) or not hasattr(value, "__float__") or (
            _module(value) in ("numpy", "torch") and getattr(value, "ndim", 0) != 0):
        raise TrajectoryProblem(f"{where} must be a number or None, got "
                                f"{type(value).__name__}")
    number = value.item() if hasattr(value, "item") else float(value)
    return _finite(number, where)


def _number_list(value: Any, where: str, ints: bool = False) -> list[Any]:
    if _module(value) in ("numpy", "torch"):
        if _module(value) == "torch":
            value = value.detach().float().cpu() if not ints else value.detach().cpu()
        if getattr(value, "ndim", 1) != 1:
            raise TrajectoryProblem(f"{where} must be 1-D, got shape {tuple(value.shape)}")
        value = value.tolist()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TrajectoryProblem(f"{where} must be a list of numbers, got "
                                f"{type(value).__name__}")
    out = list(value)
    kinds = set(map(type, out))
    if ints:
        if kinds - {int}:
            bad = next(v for v in out if type(v) is not int)
            raise TrajectoryProblem(f"{where} must hold ints, got {type(bad).__name__}")
        return out
    if kinds <= {int, float} and math.isfinite(sum(out)):  # the common case, at C speed
        return out
    return [v if type(v) is int else _finite(v, f"{where}[{i}]") for i, v in enumerate(out)]


def _text(value: Any, where: str) -> None:
    if type(value) is not str:
        raise TrajectoryProblem(f"{where} must be text, got {type(value).__name__}")


def _content(value: Any, where: str) -> None:
    if value is None or type(value) is str:
        return
    if not isinstance(value, (list, tuple)):
        raise TrajectoryProblem(f"{where} must be text, a list of parts or None, got "
                                f"{type(value).__name__}")
    for i, part in enumerate(value):
        if not isinstance(part, Mapping) or type(part.get("type")) is not str:
            raise TrajectoryProblem(f"{where}[{i}] must be a dict with a 'type'")
        if part["type"] == "text":
            _text(part.get("text"), f"{where}[{i}].text")


def _tool_calls(value: Any, where: str) -> None:
    if value is None:
        return
    if not isinstance(value, (list, tuple)):
        raise TrajectoryProblem(f"{where} must be a list, got {type(value).__name__}")
    for i, call in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(call, Mapping):
            raise TrajectoryProblem(f"{at} must be a dict, got {type(call).__name__}")
        body = call.get("function", call)
        if not isinstance(body, Mapping):
            raise TrajectoryProblem(f"{at}.function must be a dict")
        _text(body.get("name"), f"{at}.name")
        arguments = body.get("arguments", "")
        if type(arguments) is not str:
            raise TrajectoryProblem(f"{at}.arguments must be a JSON string (as the model wrote "
                                    f"it), got {type(arguments).__name__}")
        if call.get("id") is not None:
            _text(call["id"], f"{at}.id")


def _optional_text(value: Any, where: str) -> None:
    if value is not None:
        _text(value, where)


def _status(value: Any, where: str) -> None:
    if value is not None and value not in STATUSES:
        raise TrajectoryProblem(f"{where} must be 'ok', 'error' or None, got {value!r}")


_CHECKS: dict[str, Callable[[Any, str], None]] = {
    "content": _content, "tool_calls": _tool_calls, "tool_call_id": _optional_text,
    "name": _optional_text, "status": _status,
}
#: per-turn numbers: converted (numpy/torch unwrapped), so the message is copied
_CONVERT: dict[str, Callable[[Any, str], Any]] = {
    "reward": _finite, "latency_ms": _finite,
    "logprobs": lambda v, w: None if v is None else _number_list(v, w),
}


def _tokens(value: Any, where: str) -> Any:
    if value is None or (type(value) is int and value >= 0):
        return value
    if isinstance(value, (bool, int, float)) or (
            _module(value) in ("numpy", "torch") and getattr(value, "ndim", 1) == 0):
        count = _finite(value, where)
        if count != int(count) or count < 0:
            raise TrajectoryProblem(f"{where} must be a count or a list of token ids")
        return int(count)
    return _number_list(value, where, ints=True)


_CONVERT["tokens"] = _tokens


def _plain(key: str, item: Any) -> bool:
    """Whether a per-turn field is stored as given (no conversion, no copy)."""
    kind = type(item)
    if item is None or (kind is int and key != "logprobs"):
        return key != "tokens" or item is None or item >= 0
    if kind is float and key in ("reward", "latency_ms"):
        return math.isfinite(item)
    if kind is list and key == "logprobs":
        kinds = set(map(type, item))
        return kinds <= {int, float} and math.isfinite(sum(item))
    return False


def check_cell(value: Any, where: str) -> list[Any]:
    """The messages of one cell, checked (numpy/torch numbers unwrapped); raises
    :class:`TrajectoryProblem` naming ``where`` and the turn."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        raise TrajectoryProblem(f"{where} must be a list of messages, got "
                                f"{type(value).__name__}")
    out = list(value)
    for turn, message in enumerate(out):
        at = f"{where} turn {turn}"
        if not isinstance(message, Mapping):
            raise TrajectoryProblem(f"{at} must be a dict, got {type(message).__name__}")
        role = message.get("role")
        if type(role) is not str or not role:
            raise TrajectoryProblem(f"{at}: 'role' must be non-empty text, got {role!r}")
        copied: dict[str, Any] | None = None
        for key, item in message.items():
            check = _CHECKS.get(key)
            if check is not None:
                check(item, f"{at}: {key}")
                continue
            convert = _CONVERT.get(key)
            if convert is not None and not _plain(key, item):
                if copied is None:
                    copied = dict(message)
                copied[key] = convert(item, f"{at}: {key}")
        if copied is not None or type(message) is not dict:
            out[turn] = copied if copied is not None else dict(message)
    return out


def encode(messages: list[Any], where: str) -> str:
    """Canonical JSON text of checked messages (keys as given); raises
    :class:`TrajectoryProblem` for what JSON cannot hold (lone surrogates, odd types)."""
    try:
        return orjson.dumps(messages, option=_NUMPY_OPTS).decode()
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise TrajectoryProblem(f"{where}: {exc}") from None


_PLAIN_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name", "status",
                         "reward", "latency_ms", "tokens", "logprobs"})
_CALL_KEYS = frozenset({"id", "name", "arguments", "type"})
_NONE = type(None)
_is_value = partial(is_not, None)


def _values(dicts: list[dict[str, Any]], key: str) -> list[Any]:
    """``key``'s value in each dict (None where missing), at C speed."""
    return list(map(dict.get, dicts, repeat(key)))


def _types(values: list[Any]) -> set[type]:
    return set(map(type, values))


def _finite_sum(values: Iterable[Any]) -> bool:
    try:  # numbers, all finite: one C-level sum (text raises)
        return math.isfinite(sum(values))
    except TypeError:
        return False


def plain_column(cells: Sequence[Any]) -> bool:
    """Whether every cell is already a list of plain messages (flat tool calls, text
    content, plain numbers): judged over the whole column with C-level passes (types,
    sums; no Python code per message). False sends the column through
    :func:`check_cell`, cell by cell, which converts what it can and names what it can't."""
    lists = [c for c in cells if c is not None]
    if _types(lists) - {list}:
        return False
    messages = list(chain.from_iterable(lists))
    if _types(messages) - {dict}:
        return False
    keys = set().union(*messages)
    if keys - _PLAIN_KEYS:
        return False
    roles = _values(messages, "role")
    if _types(roles) - {str} or not all(roles):
        return False
    for key in keys & {"content", "tool_call_id", "name"}:
        if _types(_values(messages, key)) - {str, _NONE}:
            return False
    if "status" in keys and set(_values(messages, "status")) - {"ok", "error", None}:
        return False
    for key in keys & {"reward", "latency_ms", "tokens", "logprobs"}:
        values = _values(messages, key)
        types = _types(values)
        if _NONE in types:
            values = list(filter(_is_value, values))
            types.discard(_NONE)
        if key == "logprobs":
            if types - {list} or not _finite_sum(map(sum, values)):
                return False
        elif key == "tokens":
            if types - {int} or min(values, default=0) < 0:
                return False
        elif types - {int, float} or not _finite_sum(values):
            return False
    if "tool_calls" not in keys:
        return True
    call_lists = list(filter(_is_value, _values(messages, "tool_calls")))
    if _types(call_lists) - {list}:
        return False
    calls = list(chain.from_iterable(call_lists))
    if _types(calls) - {dict} or set().union(*calls) - _CALL_KEYS:
        return False
    return not (_types(_values(calls, "name")) - {str}
                or _types(list(map(dict.get, calls, repeat("arguments"), repeat("")))) - {str}
                or _types(_values(calls, "id")) - {str, _NONE})


def encode_column(name: str, values: Sequence[Any], n: int, keep: list[bool],
                  problems: list[str], strict: bool) -> list[str | None]:
    """Each cell of a trajectory column as canonical JSON (None stays None); a bad cell
    clears its ``keep`` entry and adds a problem (strict: raises)."""
    cells = values[:n] if len(values) != n else values
    if plain_column(cells):  # the common case: only JSON encoding left (in C)
        try:
            return [None if c is None else orjson.dumps(c).decode() for c in cells]
        except orjson.JSONEncodeError:  # lone surrogates: found and named cell by cell
            pass
    out: list[str | None] = []
    for i in range(n):
        cell = values[i]
        if cell is None:
            out.append(None)
            continue
        where = f"column {name!r} row {i}"
        try:
            out.append(encode(check_cell(cell, where), where))
        except TrajectoryProblem as exc:
            if strict:
                raise
            keep[i] = False
            out.append(None)
            problems.append(f"{exc}; that sample is left out")
    return out


def decode(cell: object) -> list[dict[str, Any]] | None:
    """The messages of a stored cell (None for a missing or unreadable one)."""
    if not isinstance(cell, str):
        return None
    try:
        value = orjson.loads(cell)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, list) else None


def _call_name(call: Mapping[str, Any]) -> str:
    body = call.get("function", call)
    name = body.get("name") if isinstance(body, Mapping) else None
    return name if isinstance(name, str) else "?"


@dataclass
class Summary:
    """What a trajectory did, for ``--where``, the doctor and the tables: ``turns`` (the
    assistant's messages), ``tool_calls``, ``tool_errors`` (tool results with status
    ``error``), ``tools`` (each tool called, in order of first use), ``tool_counts``,
    ``ends_open`` (the last message is not a final answer: a tool call or a tool result,
    so the rollout was cut), ``reward`` (the sum of per-turn rewards, None without any)."""

    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    tools: list[str] = field(default_factory=list)
    tool_counts: dict[str, int] = field(default_factory=dict)
    ends_open: bool = False
    reward: float | None = None
    messages: int = 0


def summary(messages: Sequence[Mapping[str, Any]]) -> Summary:
    """The :class:`Summary` of decoded messages."""
    out = Summary(messages=len(messages))
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            out.turns += 1
            for call in message.get("tool_calls") or ():
                name = _call_name(call)
                out.tool_calls += 1
                if name not in out.tool_counts:
                    out.tools.append(name)
                out.tool_counts[name] = out.tool_counts.get(name, 0) + 1
        elif role == "tool" and message.get("status") == "error":
            out.tool_errors += 1
        reward = message.get("reward")
        if isinstance(reward, (int, float)) and not isinstance(reward, bool):
            out.reward = (out.reward or 0.0) + reward
    if messages:
        last = messages[-1]
        out.ends_open = last.get("role") == "tool" or bool(
            last.get("role") == "assistant" and last.get("tool_calls"))
    return out


def summary_columns(messages: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The derived columns of one trajectory (``turns``, ``tool_calls``, ``tool_errors``,
    ``tools``); None values for a missing one."""
    if messages is None:
        return {"turns": None, "tool_calls": None, "tool_errors": None, "tools": []}
    s = summary(messages)
    return {"turns": s.turns, "tool_calls": s.tool_calls, "tool_errors": s.tool_errors,
            "tools": s.tools}


def _part_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, Mapping):
            parts.append(part["text"] if part.get("type") == "text" and isinstance(
                part.get("text"), str) else f"[{part.get('type')}]")
    return "\n".join(parts)


def transcript(messages: Sequence[Mapping[str, Any]], limit: int | None = None) -> str:
    """The conversation as plain text, a block per message (roles in brackets, tool calls
    as ``-> name(arguments)``, per-turn reward and latency after the role); cut to
    ``limit`` characters with a note when given. Never markup: backends show it as text."""
    blocks = []
    for message in messages:
        role = str(message.get("role"))
        head = f"[{role}"
        if role == "tool":
            head += f" {message.get('name') or message.get('tool_call_id') or ''}".rstrip()
            if message.get("status"):
                head += f" {message['status']}"
        extras = []
        if isinstance(message.get("reward"), (int, float)):
            extras.append(f"reward {message['reward']:g}")
        if isinstance(message.get("latency_ms"), (int, float)):
            extras.append(f"{message['latency_ms']:g} ms")
        head += "]" + (f" ({', '.join(extras)})" if extras else "")
        lines = [head]
        text = _part_text(message.get("content"))
        if text:
            lines.append(text)
        for call in message.get("tool_calls") or ():
            body = call.get("function", call)
            arguments = body.get("arguments", "") if isinstance(body, Mapping) else ""
            lines.append(f"-> {_call_name(call)}({arguments})")
        blocks.append("\n".join(lines))
    text = "\n\n".join(blocks)
    if limit is not None and len(text) > limit:
        text = text[:limit] + f"\n… ({len(text) - limit} more characters in the spool)"
    return text
