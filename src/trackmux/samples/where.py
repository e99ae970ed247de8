"""``--where``: a small, safe filter language over sample columns (no ``eval``).

    reward < 0.2 and length > 100
    not (response contains "sorry") or reward/format >= 1
    uid == "g3" and advantage != 0
    turns > 5 and 'search' in tools and tool_errors > 0

Grammar: ``or`` of ``and`` of ``not``-able comparisons; a comparison is ``value OP value``
with OP one of ``< <= > >= == != contains in``, or a lone value (true when truthy). A value
is a number, a quoted string ('...' or "..."), ``true``/``false``/``null``, or a column
name (letters, digits, ``_ . / @``; a name with other characters goes in backticks).
Comparing text with a number, or anything with null (other than ``==``/``!=``), is false.
``x in y`` is true when the list ``y`` (a conversation's ``tools``) holds ``x``, or the
text ``y`` contains the text ``x``.
A syntax error or an unknown column raises :class:`WhereError` naming the problem and its
position. So does an expression past the limits below (nesting, literal size, length):
the parser is recursive, and Python's ``int()`` refuses long digit strings, so both are
bounded here with a message instead of a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

Row = dict[str, Any]
Predicate = Callable[[Row], bool]

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<num>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
    | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<op><=|>=|==|!=|<|>|\(|\))
    | `(?P<quoted>[^`]+)`
    | (?P<name>[A-Za-z_][A-Za-z0-9_./@-]*)
    )""", re.VERBOSE)
#: the deepest nesting of parentheses and ``not``s, the longest number or quoted text (in
#: characters), and the longest expression a --where takes
MAX_DEPTH = 100
MAX_NUMBER_CHARS = 100
MAX_TEXT_CHARS = 10_000
MAX_EXPRESSION_CHARS = 100_000
_KEYWORDS = {"and", "or", "not", "contains", "in", "true", "false", "null"}
_COMPARE = {"<", "<=", ">", ">=", "==", "!=", "contains", "in"}


class WhereError(ValueError):
    """A --where expression that cannot be read, or that names an unknown column."""


def _tokens(text: str) -> list[tuple[str, Any, int]]:
    out: list[tuple[str, Any, int]] = []
    pos = 0
    text = text.rstrip()
    if len(text) > MAX_EXPRESSION_CHARS:
        raise WhereError(f"the expression has {len(text)} characters, more than "
                         f"{MAX_EXPRESSION_CHARS}")
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise WhereError(f"cannot read {text[pos:].strip()[:20]!r} at character {pos + 1}")
        start = match.start(match.lastgroup or 0)
        kind = match.lastgroup
        value: Any = match.group(kind or 0)
        if kind == "num":
            if len(value) > MAX_NUMBER_CHARS:
                raise WhereError(f"the number at character {start + 1} has {len(value)} "
                                 f"characters, more than {MAX_NUMBER_CHARS}")
            value = float(value) if any(c in value for c in ".eE") else int(value)
        elif kind == "str":
            if len(value) - 2 > MAX_TEXT_CHARS:
                raise WhereError(f"the text at character {start + 1} has {len(value) - 2} "
                                 f"characters, more than {MAX_TEXT_CHARS}")
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        elif kind == "name" and value in _KEYWORDS:
            kind = "kw"
        elif kind == "quoted":
            kind = "name"
        out.append((kind or "", value, start + 1))
        pos = match.end()
    return out


def compile_where(text: str, columns: Iterable[str]) -> Predicate:
    """A predicate over dict rows for ``text``; every column it names must be in
    ``columns`` (errors list them)."""
    known = set(columns)
    tokens = _tokens(text)
    if not tokens:
        raise WhereError("the expression is empty")
    pos = 0
    depth = 0

    def nested(at: int, by: int) -> None:
        """One level of '(' or 'not' in (``by`` 1) or out (-1): the parser and the
        predicate recurse per level, so the depth is bounded."""
        nonlocal depth
        depth += by
        if depth > MAX_DEPTH:
            raise WhereError(f"the expression nests deeper than {MAX_DEPTH} levels of '(' "
                             f"and 'not' at character {at}")

    def peek() -> tuple[str, Any, int] | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> tuple[str, Any, int]:
        nonlocal pos
        if pos >= len(tokens):
            raise WhereError("the expression ends too early")
        pos += 1
        return tokens[pos - 1]

    def is_kw(token: tuple[str, Any, int] | None, word: str) -> bool:
        return token is not None and token[0] in ("kw", "op") and token[1] == word

    def value() -> Callable[[Row], Any]:
        kind, val, at = take()
        if kind in ("num", "str"):
            return lambda row: val
        if kind == "kw" and val in ("true", "false", "null"):
            const = {"true": True, "false": False, "null": None}[val]
            return lambda row: const
        if kind == "name":
            if val not in known:
                raise WhereError(f"unknown column {val!r} at character {at}; columns: "
                                 f"{', '.join(sorted(known))}")
            return lambda row: row.get(val)
        if is_kw((kind, val, at), "("):
            nested(at, 1)
            inner = disjunction()
            nested(at, -1)
            if not is_kw(peek(), ")"):
                raise WhereError(f"missing ')' for the '(' at character {at}")
            take()
            return inner
        raise WhereError(f"expected a value at character {at}, got {val!r}")

    def comparison() -> Callable[[Row], Any]:
        left = value()
        token = peek()
        if token is not None and token[1] in _COMPARE and token[0] in ("op", "kw"):
            op = take()[1]
            right = value()
            return lambda row: _compare(op, left(row), right(row))
        return left

    def negation() -> Callable[[Row], Any]:
        if is_kw(peek(), "not"):
            at = take()[2]
            nested(at, 1)
            inner = negation()
            nested(at, -1)
            return lambda row: not inner(row)
        return comparison()

    def conjunction() -> Callable[[Row], Any]:
        parts = [negation()]
        while is_kw(peek(), "and"):
            take()
            parts.append(negation())
        return parts[0] if len(parts) == 1 else (lambda row: all(p(row) for p in parts))

    def disjunction() -> Callable[[Row], Any]:
        parts = [conjunction()]
        while is_kw(peek(), "or"):
            take()
            parts.append(conjunction())
        return parts[0] if len(parts) == 1 else (lambda row: any(p(row) for p in parts))

    expr = disjunction()
    if pos != len(tokens):
        _, val, at = tokens[pos]
        raise WhereError(f"unexpected {val!r} at character {at}")
    return lambda row: bool(expr(row))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _compare(op: str, left: Any, right: Any) -> bool:
    if op == "==":
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    if op == "contains":
        return isinstance(left, str) and isinstance(right, str) and right in left
    if op == "in":
        if isinstance(right, list):
            return left in right
        return isinstance(left, str) and isinstance(right, str) and left in right
    if left is None or right is None:
        return False
    if (_number(left) and _number(right)) or (isinstance(left, str) and isinstance(right, str)):
        if op == "<":
            return bool(left < right)
        if op == "<=":
            return bool(left <= right)
        if op == ">":
            return bool(left > right)
        return bool(left >= right)
    return False
