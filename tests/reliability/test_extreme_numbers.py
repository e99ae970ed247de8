"""Every conversion of user data is inside the bad-input policy (issue 34.6): each logging
call fed inf, NaN, 400-digit ints, 2**63, 2**64, numpy uint64 and longdouble in each
numeric argument never raises into training by default (the rest of the call arrives,
nothing is lost at the spool), and in strict mode raises only a TypeError/ValueError that
names what was wrong, never a bare OverflowError or RecursionError."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import trackmux

np = pytest.importorskip("numpy")

EXTREMES: dict[str, Any] = {
    "inf": math.inf, "-inf": -math.inf, "nan": math.nan, "10**400": 10**400,
    "-10**400": -(10**400), "2**63": 2**63, "2**64": 2**64, "np inf": np.float64("inf"),
    "np uint64 max": np.uint64(2**64 - 1), "longdouble": np.longdouble("1e300") * 10,
}

Call = Callable[[Any, Any], None]
CALLS: dict[str, Call] = {
    "log value": lambda run, x: run.log({"a": x, "b": 1.0}),
    "log step": lambda run, x: run.log({"a": 1.0}, step=x),
    "table cell": lambda run, x: run.log_table("t", ["a"], [[x], [1]]),
    "table step": lambda run, x: run.log_table("t", ["a"], [[1]], step=x),
    "table max_rows": lambda run, x: run.log_table("t", ["a"], [[1]], max_rows=x),
    "image step": lambda run, x: run.log_image("i", np.zeros((2, 2)), step=x),
    "text step": lambda run, x: run.log_text("x", "hi", step=x),
    "histogram values": lambda run, x: run.log_histogram("h", [x, 1.0, 2.0]),
    "histogram bins": lambda run, x: run.log_histogram("h", [1.0, 2.0], bins=x),
    "histogram counts": lambda run, x: run.log_histogram("h", ([x, 1], [0.0, 1.0, 2.0])),
    "histogram edges": lambda run, x: run.log_histogram("h", ([1, 1], [0.0, 1.0, x])),
    "samples cell": lambda run, x: run.log_samples("s", {"r": [x, 1.0]}),
    "samples step": lambda run, x: run.log_samples("s", {"r": [1.0]}, step=x),
    "samples max_rows": lambda run, x: run.log_samples("s", {"r": [1.0]}, max_rows=x),
    "samples token_lengths": lambda run, x: run.log_samples(
        "s", {"r": [1.0, 2.0]}, tokens={"lp": [[1.0], [2.0]]}, token_lengths=[x, 1]),
    "samples token_lengths padded": lambda run, x: run.log_samples(
        "s", {"r": [1.0, 2.0]}, tokens={"lp": np.zeros((2, 3))}, token_lengths=[x, 1]),
    "samples token value": lambda run, x: run.log_samples(
        "s", {"r": [1.0, 2.0]}, tokens={"lp": [[x, 1.0], [2.0]]}),
    "samples token int": lambda run, x: run.log_samples(
        "s", {"r": [1.0, 2.0]}, tokens={"ids": [[x, 1], [2]]}),
    "samples token array": lambda run, x: run.log_samples(
        "s", {"r": [1.0, 2.0]}, tokens={"lp": x}),
    "config": lambda run, x: run.log_config({"a": x}),
    "artifact copy_max_bytes": lambda run, x: run.log_artifact(__file__,
                                                               copy_max_bytes=x),
    "artifact step": lambda run, x: run.log_artifact(__file__, step=x),
}


def test_default_mode_never_raises_and_keeps_the_rest(tmp_path: Path) -> None:
    logging.getLogger("trackmux").setLevel(logging.ERROR)  # thousands of named drops
    try:
        run = trackmux.init(project="p", backends=[], dir=tmp_path)
        raised = []
        for name, call in CALLS.items():
            for label, value in EXTREMES.items():
                try:
                    call(run, value)
                except Exception as exc:
                    raised.append(f"{name} [{label}]: {type(exc).__name__}: {exc}"[:200])
        run.log({"after": 1.0}, step=10**6)
        summary = run.finish(timeout=60)
    finally:
        logging.getLogger("trackmux").setLevel(logging.NOTSET)
    assert raised == []
    assert summary.dropped == 0  # every event that got in could be stored
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run.dir)
    try:
        metrics: list[Any] = reader.events_of_kind("metrics")
    finally:
        reader.close()
    assert any("b" in e.data for e in metrics)  # the good half of each bad log() call
    assert metrics[-1].data == {"after": 1.0}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_strict_mode_names_the_problem(tmp_path: Path, name: str) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path, strict=True)
    try:
        for label, value in EXTREMES.items():
            try:
                CALLS[name](run, value)
            except (TypeError, ValueError) as exc:
                assert str(exc), (name, label)
            except Exception as exc:
                pytest.fail(f"{name} [{label}] raised {type(exc).__name__}: {exc}"[:300])
    finally:
        run.finish(timeout=30)
