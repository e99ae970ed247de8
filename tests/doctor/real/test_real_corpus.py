"""The doctor on runs it never saw: logs people published (cases/) and dialect runs (dialect/).

Every real case is checked against its label (found near the onset for a failure, no warning
for a healthy run); a case the doctor of today gets wrong is an expected failure whose reason
names the rule gap (``KNOWN_GAPS``), so the suite stays green while the gap stays visible.
The score (failures found, healthy runs with a warning) is printed and held to the floors
that hold today: issue 32's bar (at least 5 failures found, the KL jump among them) and, on
the dialect corpus, 7 of 8 faults found with no false alarm. Issue 42's targets (85% of
failures found, 0 warnings on healthy runs, a corpus of 30 runs with 10 long healthy runs and
8 long failures) are asserted once they hold and reported as expected failures until then.
``pytest -s`` prints the per-case table; ``tools/scoreboard.py`` writes it as markdown.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from corpus import (
    CASES_DIR,
    DIALECT_DIR,
    FAULTS,
    LABELS,
    Verdict,
    is_long,
    judge,
    load_cases,
    score,
    steps,
    table,
)

REAL = load_cases(CASES_DIR)
DIALECT = load_cases(DIALECT_DIR)
MIN_POINTS_REAL = 2  # thread excerpts are short: README.md lists each case's count
MIN_POINTS_DIALECT = 30

# Issue 42's bar for the real corpus ("Numbers" and "Your real corpus grows").
TARGET_FOUND_SHARE = 0.85
TARGET_RUNS = 30
TARGET_LONG_HEALTHY = 10
TARGET_LONG_FAILURES = 8

# Cases the doctor of today does not get right, each with the rule gap that explains it.
# A case listed here that the doctor gets right is reported as XPASS: take it off the list.
#: the class of gap behind the session-8 round's false alarms (entropy_collapse on healthy
#: 200-step GRPO runs whose policy keeps sharpening after most of its reward was bought)
_LATE_SHARPENING = (
    "entropy_collapse's learning excuse (rules/learning.py reward_bought) measures the "
    "reward's gain from where the fall is dated, the last step the entropy was above the "
    "geometric middle of its early level and its 10% line, against 5 times the reward's "
    "per-step noise: a run that bought most of its reward before that point (rollout "
    "accuracy 0.016 at step 1, a median of 0.63-0.71 over the 20 steps before it) and "
    "keeps sharpening afterwards (0.02-0.05 nats, 4-9% of its early level, where converged "
    "GRPO runs on MATH end) gains only 0.05-0.20 more, under 5 times its noise (0.05-0.10 "
    "from the batch's prompts: a bar of 0.26-0.49), so the fall is a warning although the "
    "finding's own text says the reward rose ")


KNOWN_GAPS: dict[str, str] = {
    "cs336-shibuki-grpo-masked-mean-healthy": (
        _LATE_SHARPENING + "0.307 -> 0.812 (fall dated at 55, warned at 89; again at 155). "
        "Two remedies measured and left out (2026-12-07): crediting the gain over the whole "
        "fall, from the last step at the early level, clears all four but lets 8 of the "
        "calibration's 30 generated collapses (found 100% -> 73%) and both dialect entropy "
        "collapses through (a reward that climbed before an abrupt late fall); reading the "
        "gain as the median of every point since the dated start against the AR(1) sigma "
        "of that change (stats.Noise.shift) clears none: 0.4-4.3 of it, the reward barely "
        "rose over the last part of the fall. By the reward these runs are the saturated "
        "collapse of Cui et al. 2025, the shape the generator's fault has; what differs is "
        "the fall's pace (about 0.05 e-folds a step from the first step here, 0.1-0.9 in "
        "the generator's fault), and a line between the two would be fitted to them"),
    "cs336-shibuki-grpo-batch-token-mean-healthy": (
        _LATE_SHARPENING + "0.279 -> 0.684 (fall dated at 62, warned at 96)"),
    "cs336-shibuki-grpo-masked-normalize-slow-learner-healthy": (
        _LATE_SHARPENING + "0.229 -> 0.656 (fall dated at 73, warned at 107); this is the "
        "slower learner of the three, its entropy 0.2-0.6 for 50 steps before it falls"),
    "cs336-shibuki-grpo-no-std-healthy": (
        _LATE_SHARPENING + "0.275 -> 0.703 (fall dated at 151, warned at 185)"),
    "grpodual-handwritten-entropy-collapse": (
        "entropy_collapse looks for a fall from the run's own entropy level and the "
        "first-point checks have no entropy floor: a hand-written loop whose fairness entropy "
        "is 0.03-0.06 from its first step (4 steps) raises nothing; the doctor reads "
        "fairness_entropy_mean as the entropy and reward_before_norm_mean as the reward (by "
        "their words), but flat_reward_groups_pct not as the zero-std share (zero_std_groups "
        "does not run: a share in percent is not read, the thresholds are fractions); an "
        "absolute entropy floor at the first points would fit this one case (the healthy "
        "cs336-grpo-no-clip-off-policy-stable runs at 0.06-0.08 on steps 59-71)"),
    "openr1-255-format-up-accuracy-down": (
        "reward_hacking fits a trend per reward component and needs min_points (8) per "
        "line; the excerpt has 3 points (format 0.48 -> 0.86 while accuracy 0.16 -> 0.06). "
        "Its short-run test (a mean of 0/1 rewards, judged over the batch's prompts) does "
        "not judge it: the excerpt has no config naming the samples per prompt. The means "
        "are of 1120 samples (179, 132, 72 of 1120 correct: their lattice); as independent "
        "samples the fall would be 7.2 standard errors, but a GRPO group's samples succeed "
        "or fail together: over 140 prompts of 8 (TRL's default num_generations) it is "
        "2.5 (the reasoning-steps reward's 3.0), of 7 2.7 (3.2), below the rule's 3.5; "
        "groups of 5 or fewer would carry it, and the issue does not say "
        "(tests/doctor/test_short_run_hacking.py)"),
    "rfs-ch07-grpo-no-kl-500-step-instability": (
        "loss_blowup reads the loss but it does not grow by orders of magnitude near the "
        "onset: its non-zero sizes are 0.006-28 (median 3.0) on steps 1-400 and 0.05-53 "
        "(median 8.9) on 401-476 (the tolerance's end), 3x, not 10x; it reaches 77, 71, 343, "
        "275 only on 480-500 and the rule's recent median never passes its line; the "
        "reward is 0-1 per step with 8 rollouts and its 50-step mean falls from 0.645 "
        "(351-400) to 0.49 (401-450), 24%, inside the noise the reward rules allow for such "
        "a curve; the author's other signal, the MATH-500 accuracy, is not in the committed "
        "log. Lowering a threshold to catch it would be fitting the one case"),
}


@pytest.fixture(scope="module")
def real_verdicts(tmp_path_factory: pytest.TempPathFactory) -> list[Verdict]:
    verdicts = list(judge(REAL, tmp_path_factory.mktemp("real")))
    print("\nreal corpus\n" + table(verdicts))
    return verdicts


@pytest.fixture(scope="module")
def real_by_id(real_verdicts: list[Verdict]) -> dict[str, Verdict]:
    return {v.case["id"]: v for v in real_verdicts}


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


@pytest.mark.parametrize("case", REAL, ids=[c["id"] for c in REAL])
def test_real_case_is_what_build_cases_makes_of_its_excerpt(case: dict[str, Any]) -> None:
    """The committed JSON is the parse of its excerpt, so a change to a reader that would
    alter a number shows here."""
    sys.path.insert(0, str(Path(__file__).parent / "tools"))
    import build_cases

    built = json.loads(json.dumps(build_cases.build(case["id"]), ensure_ascii=False))
    assert built == case, f"{case['id']}: rebuild with tools/build_cases.py"


@pytest.mark.parametrize("case", DIALECT, ids=[c["id"] for c in DIALECT])
def test_dialect_case_is_well_formed(case: dict[str, Any]) -> None:
    _check_case(case, MIN_POINTS_DIALECT, DIALECT_DIR)
    assert case.get("synthetic") is True, f"{case['id']}: dialect cases are synthetic"
    assert case.get("keys_from", "").startswith("https://"), \
        f"{case['id']}: cite the framework file its key names come from"


def test_known_gaps_name_real_cases() -> None:
    ids = {c["id"] for c in REAL}
    assert not set(KNOWN_GAPS) - ids, f"KNOWN_GAPS names no case: {set(KNOWN_GAPS) - ids}"


def test_real_corpus_has_the_shape_of_issue_32() -> None:
    failures = [c for c in REAL if c["label"] == "failure"]
    healthy = [c for c in REAL if c["label"] == "healthy"]
    assert len(failures) >= 7 and len(healthy) >= 5
    assert any(c["fault"] == "kl_blowup" for c in failures)
    assert len({c["framework"] for c in REAL}) >= 3


def test_real_corpus_has_the_shape_of_issue_42() -> None:
    long_healthy = [c["id"] for c in REAL if c["label"] == "healthy" and is_long(c)]
    long_failures = [c["id"] for c in REAL if c["label"] == "failure" and is_long(c)]
    custom = [c["id"] for c in REAL if c["framework"] == "custom"]
    shape = (f"{len(REAL)} runs (target {TARGET_RUNS}), {len(long_healthy)} long healthy "
             f"(target {TARGET_LONG_HEALTHY}), {len(long_failures)} long failures (target "
             f"{TARGET_LONG_FAILURES}), {len(custom)} hand-written loops")
    print("\nreal corpus shape: " + shape)
    if (len(REAL) < TARGET_RUNS or len(long_healthy) < TARGET_LONG_HEALTHY
            or len(long_failures) < TARGET_LONG_FAILURES or not custom):
        pytest.xfail("corpus smaller than issue 42 asks: " + shape)


@pytest.mark.parametrize("case", [
    pytest.param(c, id=c["id"], marks=pytest.mark.xfail(reason=KNOWN_GAPS[c["id"]],
                                                         strict=False))
    if c["id"] in KNOWN_GAPS else pytest.param(c, id=c["id"]) for c in REAL])
def test_real_case_matches_its_label(case: dict[str, Any],
                                     real_by_id: dict[str, Verdict]) -> None:
    verdict = real_by_id[case["id"]]
    said = [f"{f['rule']}@{f['step']}({f['severity']})" for f in verdict.findings]
    if case["label"] == "failure":
        assert verdict.ok, (f"{case['fault']} at step {case['onset_step']} not found near "
                            f"its onset; the doctor said {said or 'nothing'}")
    else:
        assert verdict.ok, f"healthy run with a warning: {said}"


def test_real_score_holds_issue_32_floor(real_verdicts: list[Verdict]) -> None:
    result = score(real_verdicts)
    print("\nreal corpus score: " + result.line())
    assert len(result.found) >= 5, result.line()
    assert any(v.case["fault"] == "kl_blowup" for v in result.found), "the KL jump is missed"


def test_real_score_meets_issue_42(real_verdicts: list[Verdict]) -> None:
    result = score(real_verdicts)
    if result.found_share < TARGET_FOUND_SHARE or result.false_alarms:
        pytest.xfail(f"below issue 42's bar ({TARGET_FOUND_SHARE:.0%} found, 0 warnings on "
                     f"healthy runs): {result.line()}")


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
