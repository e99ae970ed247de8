"""The team's goals (KPI targets such as ``eval/aime_acc >= 0.7``) per project, and the
best run so far for each. Goals live in the store (schema 2), so everyone sees the same."""

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


def board(source: Any, project: str) -> list[dict[str, Any]]:
    """Per goal of ``project``: the best run so far (name, value, step) and whether the
    goal is met. Superseded points do not count."""
    if not hasattr(source, "goals"):
        raise StoreConfigError("goals live in the team store: pass --store postgresql://...")
    out = []
    for key, op, value in source.goals(project):
        goal = Goal(key, op, value)
        best = source.best(project, key, goal.maximize)
        row: dict[str, Any] = {"goal": str(goal), "key": key, "op": op, "target": value,
                               "met": goal.met(best["value"] if best else None),
                               "best": best}
        out.append(row)
    return out
