"""The calibration benchmark's generator on a few fixed seeds (benchmarks/doctor_runs.py):
healthy runs of every dialect and noise family raise no warning, and a fault of every
family is found, at or after its onset, by the rules meant for it (issue 42).

A behaviour check of the doctor's thresholds, not of their rates: those are measured over
1,000+ runs by ``python -m benchmarks.doctor_calibration`` (docs/doctor.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the benchmarks package lives beside src/, not in the wheel
    sys.path.insert(0, str(ROOT))

from benchmarks.doctor_calibration import judge, serious  # noqa: E402
from benchmarks.doctor_runs import FAULTS, draw  # noqa: E402

#: healthy runs: verl, TRL, NeMo-RL, slime, OpenRLHF and hand-written names; i.i.d.
#: noise at three scales, AR(1) up to phi 0.9, Student-t tails; plain, trends, curricula
#: and budget raises; some with a key NaN at every step
HEALTHY = (0, 2, 3, 5, 6, 9, 10, 11, 12, 16, 17, 19, 24, 27, 28, 29, 31, 33, 38, 61, 65)
#: two runs of every fault family (the seeds the benchmark's fault set draws them from)
FAULTY = {
    "entropy_collapse": (1_000_000, 1_000_010),
    "entropy_explosion": (1_000_001, 1_000_011),
    "flat_groups": (1_000_002, 1_000_072),
    "kl_runaway": (1_000_033, 1_000_083),
    "length_to_cap": (1_000_034, 1_000_054),
    "mismatch_drift": (1_000_015, 1_000_035),
    "nan": (1_000_026, 1_000_106),
    "reward_collapse": (1_000_017, 1_000_057),
    "reward_frozen": (1_000_018, 1_000_028),
    "reward_hacking": (1_000_009, 1_000_059),
}


def test_the_seed_set_is_broad() -> None:
    runs = [draw(seed) for seed in HEALTHY]
    assert {r.dialect for r in runs} == {"verl", "trl", "nemo_rl", "slime", "openrlhf",
                                        "custom"}
    assert {r.noise for r in runs} == {"iid", "ar1", "student_t"}
    assert {r.scenario for r in runs} == {"plain", "trend", "curriculum", "budget_raise"}
    assert any(r.nan_key for r in runs) and max(r.phi for r in runs) >= 0.85
    assert set(FAULTY) == set(FAULTS)


@pytest.mark.parametrize("seed", HEALTHY)
def test_no_false_alarm_on_a_healthy_run(seed: int) -> None:
    result = judge(draw(seed))
    assert not serious(result), (result["label"], serious(result))


@pytest.mark.parametrize(("fault", "seed"),
                         [(fault, seed) for fault, seeds in FAULTY.items() for seed in seeds])
def test_a_fault_is_found_after_its_onset(fault: str, seed: int) -> None:
    run = draw(seed, fault)
    result = judge(run)
    found = serious(result)
    wanted = FAULTS[fault].rules
    right = [f for f in found if f["raised"] >= run.onset
             and any(f["rule"] == w or f["rule"].startswith(w) for w in wanted)]
    assert right, (result["label"], found)
    assert not [f for f in found if f["raised"] < run.onset], (result["label"], found)
