"""``trackmux sweep show``: the trials of a sweep as rows, and the best one."""

from __future__ import annotations

import math
from typing import Any

from trackmux.sweeps.study import Sweep

STALE = "its agent stopped answering (no heartbeat); another agent failed the trial"
STATES = {"RUNNING": "running", "COMPLETE": "complete", "PRUNED": "pruned",
          "FAIL": "failed", "WAITING": "waiting"}


def rows(sweep: Sweep) -> list[dict[str, Any]]:
    """One dict per trial, by number: number, state, params, value, run_id, run_dir,
    steps, reason, pruned_by, finding, seconds, cpu_seconds, agent, stderr (the last
    lines the program wrote there)."""
    out = []
    for trial in sorted(sweep.trials(), key=lambda t: t.number):
        attrs = trial.user_attrs
        value = trial.value if trial.value is not None else attrs.get("value")
        if isinstance(value, float) and math.isnan(value):
            value = None
        out.append({
            "number": trial.number,
            "state": STATES.get(trial.state.name, trial.state.name.lower()),
            "params": attrs.get("params", dict(trial.params)),
            "value": value,
            "run_id": attrs.get("run_id"),
            "run_dir": attrs.get("run_dir"),
            "steps": attrs.get("steps"),
            "reason": attrs.get("reason") or (
                STALE if trial.state.name == "FAIL" else ""),
            "pruned_by": attrs.get("pruned_by"),
            "finding": attrs.get("finding"),
            "found_at_step": attrs.get("found_at_step"),
            "seconds": attrs.get("seconds"),
            "cpu_seconds": attrs.get("cpu_seconds"),
            "agent": attrs.get("agent"),
            "stderr": list(attrs.get("stderr") or []),
        })
    return out


def best(sweep: Sweep, trials: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The best complete trial by the metric's goal (pruned and failed ones never are)."""
    done = [t for t in trials if t["state"] == "complete" and t["value"] is not None]
    if not done:
        return None
    pick = max if sweep.spec.goal == "maximize" else min
    return pick(done, key=lambda t: t["value"])


def summary(sweep: Sweep) -> dict[str, Any]:
    trials = rows(sweep)
    counts: dict[str, int] = {}
    for t in trials:
        counts[t["state"]] = counts.get(t["state"], 0) + 1
    return {"sweep": sweep.id, "method": sweep.spec.method,
            "metric": {"name": sweep.spec.metric_name, "goal": sweep.spec.goal,
                       "summary": sweep.spec.summary},
            "counts": counts, "trials": trials, "best": best(sweep, trials)}


def _params(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in params.items())


def text(data: dict[str, Any]) -> list[str]:
    metric = data["metric"]
    lines = [f"sweep {data['sweep']} ({data['method']}, {metric['goal']} {metric['name']}): "
             + ", ".join(f"{n} {s}" for s, n in sorted(data["counts"].items()))]
    for t in data["trials"]:
        value = "-" if t["value"] is None else f"{t['value']:.4g}"
        lines.append(f"  trial {t['number']:>3}  {t['state']:<8}  value {value:<8}  "
                     f"steps {t['steps'] if t['steps'] is not None else '-':<5}  "
                     f"run {t['run_id'] or '-'}  {_params(t['params'])}")
        if t["reason"]:
            lines.append(f"             {t['reason']}")
        if t.get("stderr") and t["state"] == "failed":
            lines.append("             its stderr ended with:")
            lines.extend(f"               | {line}" for line in t["stderr"])
        if t["found_at_step"] is not None and t["steps"]:
            lines.append(f"             the finding reached the spool at step "
                         f"{t['found_at_step']}; the last step logged was {t['steps'] - 1}")
    top = data["best"]
    if top is None:
        lines.append("best: none yet (no complete trial)")
    else:
        lines.append(f"best: trial {top['number']}, value {top['value']:.4g}, run "
                     f"{top['run_id']}  {_params(top['params'])}")
    return lines
