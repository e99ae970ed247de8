"""The command line as provenance records it: secrets out, including those nested in values.

A flag's value may be a structure: ``--config={"api_key": "X"}`` (JSON) or a Hydra
override ``+trainer.logger.wandb={project:x,api_key:X}``. Such a value is parsed (JSON
first, then Hydra's dict and list grammar) and redacted as a config is (every key that
names a credential, at any depth, loses its value), then written back in its own syntax.
A value that parses as neither is redacted as text (core/values/redact.py), which also
catches ``key: value`` and ``key=value`` pairs inside it.
"""

from __future__ import annotations

import json
from typing import Any

from trackmux.core.values import redact

#: command-line flags whose next argument is a value (``--api_key VALUE``)
_FLAG = "-"
_MAX_DEPTH = 50


class _NotHydra(ValueError):
    pass


class _Quoted(str):
    """A Hydra string that was quoted, and is quoted again when written back."""


def _parse_hydra(text: str) -> Any:
    """Hydra's dict/list value grammar (``{a:1,b:[x,'y z']}``): dicts, lists, quoted and
    bare strings. Raises _NotHydra for anything else."""
    pos = 0

    def skip() -> None:
        nonlocal pos
        while pos < len(text) and text[pos] in " \t":
            pos += 1

    def value(depth: int) -> Any:
        nonlocal pos
        if depth > _MAX_DEPTH:
            raise _NotHydra("too deep")
        skip()
        if pos >= len(text):
            raise _NotHydra("value expected")
        char = text[pos]
        if char in "{[":
            closing = "}" if char == "{" else "]"
            pos += 1
            items: dict[str, Any] | list[Any] = {} if char == "{" else []
            skip()
            if pos < len(text) and text[pos] == closing:
                pos += 1
                return items
            while True:
                if isinstance(items, dict):
                    key = value(depth + 1)
                    skip()
                    if not isinstance(key, str) or pos >= len(text) or text[pos] != ":":
                        raise _NotHydra("key: value expected")
                    pos += 1
                    items[str(key)] = value(depth + 1)
                else:
                    items.append(value(depth + 1))
                skip()
                if pos < len(text) and text[pos] == ",":
                    pos += 1
                    continue
                if pos < len(text) and text[pos] == closing:
                    pos += 1
                    return items
                raise _NotHydra(f"{closing!r} expected")
        if char in "'\"":
            end = text.find(char, pos + 1)
            if end < 0:
                raise _NotHydra("unterminated quote")
            found = _Quoted(text[pos + 1:end])
            pos = end + 1
            return found
        start = pos
        while pos < len(text) and text[pos] not in ",:]}{[":
            pos += 1
        return text[start:pos].strip()

    parsed = value(0)
    skip()
    if pos != len(text):
        raise _NotHydra("trailing text")
    return parsed


def _hydra_text(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_hydra_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_hydra_text(v) for v in value) + "]"
    if isinstance(value, _Quoted):
        quote = "'" if "'" not in value else '"'
        return f"{quote}{value}{quote}"
    return str(value)


def _restore_quotes(before: Any, after: Any) -> Any:
    """redact() returns plain types: put back which strings were quoted."""
    if isinstance(before, dict) and isinstance(after, dict):
        return {k: _restore_quotes(before.get(k), v) for k, v in after.items()}
    if isinstance(before, list) and isinstance(after, list):
        return [_restore_quotes(b, a) for b, a in zip(before, after, strict=False)]
    if isinstance(before, _Quoted) and isinstance(after, str):
        return _Quoted(after)
    return after


def redact_value(text: str) -> str:
    """One argument or flag value, redacted: a JSON or Hydra structure by its keys (and
    its strings as text), anything else as text."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            parsed = json.loads(stripped)
        except ValueError:
            pass
        else:
            if isinstance(parsed, (dict, list)):
                clean = redact.redact({"": parsed})[""]
                return text if clean == parsed else json.dumps(clean, ensure_ascii=False)
        try:
            hydra = _parse_hydra(stripped)
        except _NotHydra:
            pass
        else:
            if isinstance(hydra, (dict, list)):
                clean = _restore_quotes(hydra, redact.redact({"": hydra})[""])
                return text if clean == hydra else _hydra_text(clean)
    return redact.redact_text(text)


def redact_argv(argv: list[str]) -> list[str]:
    """argv with secrets removed: ``--api_key=x`` and ``--api_key x`` lose the value,
    structured values lose their credential-named keys' values (module docstring),
    credentials in URLs and secret-shaped values go as config's do."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(redact.REDACTED)
            hide_next = False
            continue
        name, eq, rest = arg.partition("=")
        bare = name.lstrip("-+~")
        if eq and redact.is_secret_key(bare.rsplit(".", 1)[-1]):
            out.append(f"{name}={redact.REDACTED}")
            continue
        if arg.startswith(_FLAG) and not eq and redact.is_secret_key(bare):
            out.append(arg)
            hide_next = True
            continue
        if eq and rest.strip()[:1] in ("{", "[") and " " not in name:
            out.append(f"{redact.redact_text(name)}={redact_value(rest)}")
            continue
        out.append(redact_value(arg))
    return out


def redacted_again(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a provenance record) with its argv redacted by today's rules: readers
    (show, diff, the reports) apply it to spools recorded before a rule existed."""
    command = data.get("command")
    if not isinstance(command, dict) or not isinstance(command.get("argv"), list):
        return data
    argv = [str(a) for a in command["argv"]]
    return {**data, "command": {**command, "argv": redact_argv(argv)}}
