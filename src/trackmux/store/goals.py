"""The team's goals (KPI targets such as ``eval/aime_acc >= 0.7``) per project, and the
run nearest each target now. Goals live in the store (schema 2), so everyone sees the same.

A goal is judged on where a run *is*, not on its best point ever: one lucky early point
(a KL of 0.011 at step 0 in a run that ends at 0.4) meets nothing. Each run stands at its
latest value, or the mean of its last N points (``last=N``: noisy evals); the board names
which, and shows the leading run's value with the step and time of its latest point."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trackmux.store.connect import StoreConfigError

OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
_GOAL = re.compile(r"^\s*(?P<key>\S.*?)\s*(?P<op>>=|<=|>|<)\s*(?P<value>\S+)\s*$")


@dataclass(frozen=True)
class Goal:
    key: str
    op: str
    value: float

    @property
    def maximize(self) -> bool:
        return self.op in (">=", ">")

    def met(self, value: float | None) -> bool:
        return value is not None and OPS[self.op](value, self.value)

    def __str__(self) -> str:
        return f"{self.key} {self.op} {self.value:g}"


def parse(text: str) -> Goal:
    """``'KEY >= VALUE'`` (also <=, >, <); ValueError naming what is wrong."""
    found = _GOAL.match(text)
    if not found:
        raise ValueError(f"goal {text!r} is not 'KEY >= VALUE' (or <=, >, <)")
    try:
        value = float(found["value"])
    except ValueError:
        raise ValueError(f"goal {text!r}: {found['value']!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"goal {text!r}: the target must be a finite number")
    return Goal(found["key"], found["op"], value)


def set_goal(conn: Any, project: str, goal: Goal) -> None:
    """Adds the goal or changes its target (one goal per project, key and operator)."""
    from trackmux.store import schema

    if schema.version(conn) < 2:
        schema.ensure(conn, 2)
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("INSERT INTO trackmux.goals (project, key, op, value) VALUES "
                    "(%s, %s, %s, %s) ON CONFLICT (project, key, op) DO UPDATE SET "
                    "value = EXCLUDED.value", (project, goal.key, goal.op, goal.value))


def remove_goal(conn: Any, project: str, key: str) -> int:
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("DELETE FROM trackmux.goals WHERE project = %s AND key = %s",
                    (project, key))
        return int(cur.rowcount)


def judged(last: int) -> str:
    """How runs are judged, in words: "latest value" or "mean of the last N points"."""
    return "latest value" if last == 1 else f"mean of the last {last} points"


def board(source: Any, project: str, last: int = 1) -> list[dict[str, Any]]:
    """Per goal of ``project``: the run nearest the target now (``best``: name, value,
    step and time of its latest point, points averaged), whether that run meets it
    (``met``), how many runs meet it now (``meeting``) of those that logged the key
    (``runs``), and how runs were judged (``judged``, ``last``). Superseded points do not
    count; a run whose window holds a NaN stands nowhere."""
    if isinstance(last, bool) or not isinstance(last, int) or last < 1:
        raise ValueError(f"last must be a whole number >= 1, got {last!r}")
    if not hasattr(source, "goals"):
        raise StoreConfigError("goals live in the team store: pass --store postgresql://...")
    out = []
    for key, op, value in source.goals(project):
        goal = Goal(key, op, value)
        standing = source.standings(project, key, last)
        finite = [s for s in standing if math.isfinite(s["value"])]
        pick = max if goal.maximize else min
        best = pick(finite, key=lambda s: s["value"]) if finite else None
        out.append({"goal": str(goal), "key": key, "op": op, "target": value,
                    "judged": judged(last), "last": last,
                    "met": goal.met(best["value"] if best else None), "best": best,
                    "meeting": sum(goal.met(s["value"]) for s in finite),
                    "runs": len(standing)})
    return out
