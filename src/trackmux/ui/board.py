"""The goals board of ``trackmux ui postgresql://...``: per project, each goal judged on
where runs are now (trackmux/store/goals.py), the run nearest the target and that run's
curve, and the findings of the project's live runs.
Read from the store itself (goals live there), with the UI's read-only role."""

from __future__ import annotations

import threading
import time
from typing import Any

MAX_POINTS = 400
#: seconds a "has goals" answer is kept (the run list asks every 2 s)
GOALS_MAX_AGE = 15.0


class Board:
    """One store connection for the board's requests (their own, not the mirror's)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._source: Any = None
        self._lock = threading.Lock()
        self._has_goals: tuple[float, bool] | None = None  # (asked at, answer)

    def has_goals(self, max_age: float | None = None) -> bool:
        """Whether any project of the store has a goal (the page shows its "goals" link
        only then): two small queries, asked again after ``max_age`` seconds; False while
        the store cannot be read."""
        now = time.monotonic()
        cached = self._has_goals
        if cached is not None and now - cached[0] < (
                GOALS_MAX_AGE if max_age is None else max_age):
            return cached[1]
        with self._lock:
            try:
                source = self._open()
                found = any(source.goals(project) for project in source.projects())
            except Exception:
                if self._source is not None:  # reconnect on the next request
                    self._source.close()
                    self._source = None
                found = False
        self._has_goals = (now, found)
        return found

    def _open(self) -> Any:
        from trackmux.store.read import StoreSource

        if self._source is None:
            self._source = StoreSource(self.dsn)
        return self._source

    def payload(self) -> dict[str, Any]:
        from trackmux.store.goals import board

        with self._lock:
            try:
                source = self._open()
                projects = []
                for project in source.projects():
                    goals = board(source, project)
                    runs = source.runs(project)
                    by_ref = {r.ref: r for r in runs}
                    for row in goals:
                        best = row["best"]
                        entry = by_ref.get(best["ref"]) if best else None
                        row["curve"] = _curve(source.series(entry, row["key"])) if entry else None
                    live = [{"name": r.name, "run_id": r.run_id, "host": r.host,
                             "user": r.user, "findings": source.findings(r)}
                            for r in runs if r.state == "running"]
                    projects.append({"project": project, "goals": goals, "live": live,
                                     "runs": len(runs)})
                return {"projects": projects, "store": source.uri}
            except Exception:
                if self._source is not None:  # reconnect on the next request
                    self._source.close()
                    self._source = None
                raise


def _curve(series: Any) -> dict[str, list[float]]:
    steps, values = series.steps, series.values
    if len(steps) > MAX_POINTS:  # an overview: every k-th point and the last
        stride = -(-len(steps) // MAX_POINTS)
        keep = [*range(0, len(steps) - 1, stride), len(steps) - 1]
        steps = [steps[i] for i in keep]
        values = [values[i] for i in keep]
    return {"steps": steps, "values": [v if v == v else None for v in values]}
