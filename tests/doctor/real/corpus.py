"""The doctor's own corpus: real RL runs people published (cases/) and dialect runs (dialect/).

A case is a JSON file: ``id``, ``framework``, ``source``, ``label`` ("failure"/"healthy"),
``fault``, ``onset_step`` and ``series`` ``{key: [[step, value], ...]}`` with the keys as the
framework logged them (non-finite values as the strings "nan", "inf", "-inf"). ``replay``
writes a case into a real trackmux spool (``trackmux.init`` + ``run.log`` per step), and
``diagnose_case`` runs the offline doctor over it, the path of ``trackmux doctor RUN``.

Scoring: a failure is *found* when a warning or critical finding starts within
``tolerance(case)`` steps of the labelled onset, before or after; the tolerance is
max(20 steps, 15% of the steps the case spans). A healthy run is *clean* when the doctor
raises no warning or critical finding at all. A case is *long* when it spans at least
``LONG_STEPS`` training steps (first to last logged step, both counted) in at least
``LONG_POINTS`` logged steps (a handful of lines far apart is an excerpt, not a long run).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES_DIR = HERE / "cases"
DIALECT_DIR = HERE / "dialect"

LABELS = ("failure", "healthy")
FAULTS = ("reward_collapse", "kl_blowup", "entropy_collapse", "nan", "length_runaway",
          "grad_explosion", "mismatch", "flat_groups", "reward_hacking", "other")
MIN_TOLERANCE = 20
TOLERANCE_SHARE = 0.15
SERIOUS = ("warning", "critical")
LONG_STEPS = 100
LONG_POINTS = 25


def load_cases(directory: Path = CASES_DIR) -> list[dict[str, Any]]:
    """Every ``*.json`` case under ``directory``, sorted by id."""
    cases = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.json"))]
    return sorted(cases, key=lambda c: c["id"])


def decode(value: float | str) -> float:
    """A series value: a number, or "nan"/"inf"/"-inf" for what JSON cannot hold."""
    return float(value)


def rows(case: dict[str, Any]) -> list[tuple[int, dict[str, float]]]:
    """The case as (step, {key: value}) in step order, one row per logged step."""
    by_step: dict[int, dict[str, float]] = {}
    for key, points in case["series"].items():
        for step, value in points:
            by_step.setdefault(int(step), {})[key] = decode(value)
    return sorted(by_step.items())


def steps(case: dict[str, Any]) -> list[int]:
    return [step for step, _ in rows(case)]


def span(case: dict[str, Any]) -> int:
    """How many training steps the case covers, first and last logged step included."""
    logged = steps(case)
    return logged[-1] - logged[0] + 1 if logged else 0


def is_long(case: dict[str, Any]) -> bool:
    return span(case) >= LONG_STEPS and len(steps(case)) >= LONG_POINTS


def tolerance(case: dict[str, Any]) -> int:
    """How far from the labelled onset a finding may start and still count as found."""
    logged = steps(case)
    span = logged[-1] - logged[0] if logged else 0
    return max(MIN_TOLERANCE, math.ceil(TOLERANCE_SHARE * span))


def replay(case: dict[str, Any], root: Path) -> Path:
    """Write ``case`` into a trackmux spool under ``root``; returns the run directory."""
    import trackmux

    run = trackmux.init(project="real-corpus", name=case["id"], backends=[], dir=root,
                        doctor=False, provenance=False, system_metrics=False,
                        delivery="thread")
    try:
        for step, values in rows(case):
            run.log(values, step=step)
    finally:
        run.finish()
    assert run.dir is not None
    return Path(run.dir)


def diagnose_case(case: dict[str, Any], root: Path) -> list[dict[str, Any]]:
    """The offline doctor's findings on ``case`` (as ``trackmux doctor RUN --json`` has them)."""
    from trackmux.doctor.offline import diagnose

    run_dir = replay(case, root)
    return sorted((f.as_dict() for f in diagnose(run_dir)), key=lambda f: f["step"])


@dataclass
class Verdict:
    case: dict[str, Any]
    findings: list[dict[str, Any]]

    @property
    def serious(self) -> list[dict[str, Any]]:
        return [f for f in self.findings if f["severity"] in SERIOUS]

    @property
    def near_onset(self) -> list[dict[str, Any]]:
        onset = self.case.get("onset_step")
        if onset is None:
            return []
        tol = tolerance(self.case)
        return [f for f in self.serious if abs(int(f["step"]) - int(onset)) <= tol]

    @property
    def ok(self) -> bool:
        """Found (a failure) or clean (a healthy run)."""
        if self.case["label"] == "failure":
            return bool(self.near_onset)
        return not self.serious

    def line(self) -> str:
        c = self.case
        what = c.get("fault") or "-"
        onset = c.get("onset_step")
        status = ("found" if self.ok else "MISSED") if c["label"] == "failure" else (
            "clean" if self.ok else "FALSE ALARM")
        said = ", ".join(f"{f['rule']}@{f['step']}({f['severity'][0]})"
                         for f in self.findings) or "nothing"
        return (f"{c['id']:<42} {c['framework']:<24} {c['label']:<8} {what:<16} "
                f"{'' if onset is None else onset!s:>6}  {status:<11} {said}")


def judge(cases: list[dict[str, Any]], root: Path) -> Iterator[Verdict]:
    """Each case replayed under its own folder of ``root`` and diagnosed."""
    for case in cases:
        yield Verdict(case, diagnose_case(case, root / case["id"]))


@dataclass
class Score:
    """Failures found near their onset and healthy runs with a warning, over some verdicts."""

    failures: list[Verdict]
    found: list[Verdict]
    healthy: list[Verdict]
    false_alarms: list[Verdict]

    @property
    def found_share(self) -> float:
        return len(self.found) / len(self.failures) if self.failures else 1.0

    def line(self) -> str:
        missed = [v.case["id"] for v in self.failures if not v.ok]
        alarms = [v.case["id"] for v in self.false_alarms]
        return (f"{len(self.found)} of {len(self.failures)} failures found near onset "
                f"({self.found_share:.0%}), missed {missed or 'none'}; "
                f"{len(self.false_alarms)} of {len(self.healthy)} healthy runs with a warning "
                f"{alarms or ''}".rstrip())


def score(verdicts: list[Verdict]) -> Score:
    failures = [v for v in verdicts if v.case["label"] == "failure"]
    healthy = [v for v in verdicts if v.case["label"] == "healthy"]
    return Score(failures, [v for v in failures if v.ok], healthy,
                 [v for v in healthy if not v.ok])


def table(verdicts: list[Verdict]) -> str:
    head = (f"{'case':<42} {'framework':<24} {'label':<8} {'fault':<16} {'onset':>6}  "
            f"{'verdict':<11} findings (rule@step(severity))")
    return "\n".join([head, "-" * len(head)] + [v.line() for v in verdicts])
