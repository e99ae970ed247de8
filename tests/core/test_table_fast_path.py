"""``log_table``'s fast path (a column at a time with built-ins) gives exactly what the
cell-by-cell path gives, and steps aside for every table that path would change."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trackmux.core.values import normalize
from trackmux.core.values.normalize import _plain_rows, _row, normalize_table

COLS = ("a", "b", "c")
cells = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                  st.floats(allow_nan=True), st.text(max_size=8))


def careful(rows: Any) -> tuple[tuple[Any, ...], ...]:
    """The cell-by-cell path alone (the fast path switched off)."""
    original = normalize._plain_rows
    normalize._plain_rows = lambda cols, rows: None  # type: ignore[assignment]
    try:
        return normalize_table(COLS, rows)[1]
    finally:
        normalize._plain_rows = original


def same(a: Any, b: Any) -> bool:  # NaN equals NaN here; types must match
    return len(a) == len(b) and all(
        type(x) is type(y) and (x == y or (x != x and y != y))
        for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True))


@given(st.lists(st.lists(cells, min_size=3, max_size=3), min_size=1, max_size=20))
def test_the_fast_path_equals_the_careful_one(rows: list[list[Any]]) -> None:
    fast = _plain_rows(COLS, rows)
    expected = careful(rows)
    assert same(normalize_table(COLS, rows)[1], expected)
    if fast is not None:
        assert same(fast, expected)


@pytest.mark.parametrize("rows", [
    [["x", 1, 2.0], ["\ud800", 1, 2.0]],             # a lone surrogate: repaired or refused
    [["x", 2**63, 2.0]],                              # beyond 64 bits: becomes text
    [["x", np.int64(3), 2.0]],                        # a numpy scalar: unwrapped
    [["x", 1, 2.0], ["y", "text", 3.0]],              # text and numbers: all text
    [["x", 1]],                                       # one cell short: refused
    [{"a": "x", "b": 1, "c": 2.0}],                   # a mapping row
    [[type("S", (str,), {})("x"), 1, 2.0]],           # a str subclass: plain str
])
def test_tables_the_careful_path_changes_take_it(rows: list[Any]) -> None:
    assert _plain_rows(COLS, rows) is None


def test_the_rows_are_copied() -> None:
    rows = [["x", 1, 2.0]]
    out = normalize_table(COLS, rows)[1]
    rows[0][0] = "changed"
    assert out == (("x", 1, 2.0),) and _row(COLS, rows[0], 0, None)[0] == "changed"
