"""The doctor on runs it never saw: logs people published (cases/) and dialect runs (dialect/).

The bar of issue 32: on the real corpus at least 5 failures found near their onset, the KL
runaway among them, and no warning on a healthy run; on the dialect corpus at least 7 of 8
faults found and no false alarm. ``pytest -s`` prints the per-case table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from corpus import (
    CASES_DIR,
    DIALECT_DIR,
    FAULTS,
    LABELS,
    Verdict,
    judge,
    load_cases,
    steps,
    table,
)

REAL = load_cases(CASES_DIR)
DIALECT = load_cases(DIALECT_DIR)
MIN_POINTS_REAL = 2  # thread excerpts are short: README.md lists each case's count
MIN_POINTS_DIALECT = 30


@pytest.fixture(scope="module")
def real_verdicts(tmp_path_factory: pytest.TempPathFactory) -> list[Verdict]:
    verdicts = list(judge(REAL, tmp_path_factory.mktemp("real")))
    print("\nreal corpus\n" + table(verdicts))
    return verdicts


@pytest.fixture(scope="module")
def dialect_verdicts(tmp_path_factory: pytest.TempPathFactory) -> list[Verdict]:
    verdicts = list(judge(DIALECT, tmp_path_factory.mktemp("dialect")))
    print("\ndialect corpus\n" + table(verdicts))
    return verdicts


def _check_case(case: dict[str, Any], minimum: int, where: Path) -> None:
    name = case.get("id", "?")
    assert (where / f"{name}.json").is_file(), f"{name}: id must match the file name"
    assert case.get("source", "").startswith("https://"), f"{name}: no source URL"
    assert case.get("label") in LABELS, f"{name}: label {case.get('label')!r}"
    assert case.get("framework"), f"{name}: no framework"
    if case["label"] == "failure":
        assert case.get("fault") in FAULTS, f"{name}: fault {case.get('fault')!r}"
        assert isinstance(case.get("onset_step"), int), f"{name}: failure without onset"
    else:
        assert case.get("onset_step") is None, f"{name}: healthy with an onset"
    assert case.get("series"), f"{name}: no series"
    for key, points in case["series"].items():
        logged = [s for s, _ in points]
        assert logged == sorted(set(logged)), f"{name}: {key} steps not increasing"
        for _, value in points:
            assert isinstance(value, (int, float)) or value in ("nan", "inf", "-inf"), \
                f"{name}: {key} value {value!r}"
    assert len(steps(case)) >= minimum, f"{name}: fewer than {minimum} logged steps"


@pytest.mark.parametrize("case", REAL, ids=[c["id"] for c in REAL])
def test_real_case_is_well_formed(case: dict[str, Any]) -> None:
    _check_case(case, MIN_POINTS_REAL, CASES_DIR)
    assert (CASES_DIR / case["raw"]).is_file(), f"{case['id']}: raw excerpt missing"
    assert not case.get("synthetic"), f"{case['id']}: synthetic case among the real ones"


@pytest.mark.parametrize("case", DIALECT, ids=[c["id"] for c in DIALECT])
def test_dialect_case_is_well_formed(case: dict[str, Any]) -> None:
    _check_case(case, MIN_POINTS_DIALECT, DIALECT_DIR)
    assert case.get("synthetic") is True, f"{case['id']}: dialect cases are synthetic"
    assert case.get("keys_from", "").startswith("https://"), \
        f"{case['id']}: cite the framework file its key names come from"


def test_real_corpus_has_the_shape_the_issue_asks() -> None:
    failures = [c for c in REAL if c["label"] == "failure"]
    healthy = [c for c in REAL if c["label"] == "healthy"]
    assert len(failures) >= 7 and len(healthy) >= 5
    assert any(c["fault"] == "kl_blowup" for c in failures)
    assert len({c["framework"] for c in REAL}) >= 3


def test_real_failures_are_found_near_onset(real_verdicts: list[Verdict]) -> None:
    failures = [v for v in real_verdicts if v.case["label"] == "failure"]
    found = [v for v in failures if v.ok]
    missed = [v.case["id"] for v in failures if not v.ok]
    assert len(found) >= 5, f"found {len(found)} of {len(failures)}; missed {missed}"
    assert any(v.case["fault"] == "kl_blowup" for v in found), "the KL runaway is missed"


def test_real_healthy_runs_raise_no_warning(real_verdicts: list[Verdict]) -> None:
    alarms = {v.case["id"]: [f"{f['rule']}@{f['step']}" for f in v.serious]
              for v in real_verdicts if v.case["label"] == "healthy" and not v.ok}
    assert not alarms, f"false alarms: {alarms}"


def test_dialect_corpus_has_the_shape_the_issue_asks() -> None:
    assert len([c for c in DIALECT if c["label"] == "failure"]) == 8
    assert len([c for c in DIALECT if c["label"] == "healthy"]) == 4


def test_dialect_faults_are_found(dialect_verdicts: list[Verdict]) -> None:
    failures = [v for v in dialect_verdicts if v.case["label"] == "failure"]
    found = [v for v in failures if v.ok]
    missed = [v.case["id"] for v in failures if not v.ok]
    assert len(found) >= 7, f"found {len(found)} of {len(failures)}; missed {missed}"


def test_dialect_healthy_runs_raise_no_false_alarm(dialect_verdicts: list[Verdict]) -> None:
    alarms = {v.case["id"]: [f"{f['rule']}@{f['step']}" for f in v.serious]
              for v in dialect_verdicts if v.case["label"] == "healthy" and not v.ok}
    assert not alarms, f"false alarms: {alarms}"
