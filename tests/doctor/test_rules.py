"""Each rule on a synthetic run that breaks its way, and every rule silent on healthy,
noisy runs (rising, plateau, curriculum step)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synthetic import healthy, metrics, noisy, rising, run_doctor, serious, table

from trackmux.core.events import HistogramEvent, MetricsEvent
from trackmux.doctor.detector import Detector
from trackmux.doctor.engine import Doctor
from trackmux.doctor.rules.text import why_degenerate
from trackmux.doctor.rules.time import Stall


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), shape=st.sampled_from(["rising", "plateau", "curriculum"]))
def test_healthy_noisy_runs_give_no_warning(seed: int, shape: str) -> None:
    found = run_doctor(metrics(healthy(300, seed, shape)))
    assert serious(found) == [], [f.message for f in found]


def test_reward_collapse_found_once_with_onset() -> None:
    run = healthy(300, 1)
    reward = noisy(rising(200, 0.1, 0.8), 0.04, 1) + noisy([0.25] * 100, 0.04, 2)
    run["critic/score/mean"] = reward
    found = [f for f in run_doctor(metrics(run)) if f.rule == "reward_collapse"]
    assert len(found) == 1
    assert 200 <= found[0].step <= 206
    assert found[0].severity == "critical"
    assert found[0].keys == ("critic/score/mean",)
    assert "fell" in found[0].message and "%" in found[0].message


def test_reward_dip_of_one_step_is_not_a_collapse() -> None:
    run = healthy(300, 3)
    run["critic/score/mean"][150] = 0.0
    run["critic/score/mean"][151] = 0.0
    assert serious(run_doctor(metrics(run))) == []


def test_kl_blowup_relative_and_bound() -> None:
    run = healthy(200, 4)
    run["actor/ppo_kl"] = [0.02 + 0.001 * (i % 3) for i in range(150)] + \
        [0.02 * 1.3 ** (i - 149) for i in range(150, 200)]
    found = [f for f in run_doctor(metrics(run)) if f.rule == "kl_blowup"]
    assert len(found) == 1 and 150 <= found[0].step <= 160
    assert "above its level" in found[0].message
    bound = [f for f in run_doctor(metrics(run), {"kl_blowup": {"bound": 0.5, "ratio": 1000}})
             if f.rule == "kl_blowup"]
    assert bound and bound[0].severity == "critical" and "bound" in bound[0].message


def test_kl_that_runs_away_over_tens_of_steps_is_found_and_a_learning_rise_is_not() -> None:
    """A KL that climbs 5x over 30 steps from a plateau (never 3x within the 20-point window
    just before it) is found against its level before the climb (``gap``); a KL that rises
    from zero as a policy learns, steeply at first, is not."""
    run = healthy(200, 7)
    # (the KL starts near 0, as a policy at its reference does, and plateaus by step 20)
    plateau = [0.5 * i / 20 for i in range(20)] + noisy([0.5] * 80, 0.03, 7)
    climb = [0.5 * 5 ** (i / 30) for i in range(1, 31)]
    run["actor/ppo_kl"] = plateau + noisy(climb, 0.03, 8) + noisy([2.5] * 70, 0.1, 9)
    found = [f for f in run_doctor(metrics(run)) if f.rule == "kl_blowup"]
    assert len(found) == 1 and 100 <= found[0].step <= 125, [f.message for f in found]
    no_gap = [f for f in run_doctor(metrics(run), {"kl_blowup": {"gap": 1}})
              if f.rule == "kl_blowup"]
    assert no_gap == []  # the window just before the recent points holds half the climb
    learning = healthy(200, 8)
    learning["actor/ppo_kl"] = noisy([2.5 * (1 - math.exp(-6 * i / 200)) for i in range(200)],
                                     0.03, 10)
    # (this curve passes 0.3 by its 5th step, which kl_blowup's first-points check calls
    # out on its own; here only the level test is asked, so that check judges 1 point)
    assert serious(run_doctor(metrics(learning), {"kl_blowup": {"early_points": 1}})) == []


def test_entropy_collapse() -> None:
    run = healthy(200, 5)
    run["actor/entropy"] = noisy([1.5] * 100 + [0.05] * 100, 0.01, 5)
    found = [f for f in run_doctor(metrics(run)) if f.rule == "entropy_collapse"]
    assert len(found) == 1 and 100 <= found[0].step <= 106


def test_grad_explosion_spike_hard_spike_and_vanish() -> None:
    run = healthy(200, 6)
    one = list(run["actor/grad_norm"])
    one[100] *= 30  # one wild step: not an explosion
    run["actor/grad_norm"] = one
    assert [f for f in run_doctor(metrics(run)) if f.rule == "grad_explosion"] == []
    hard = list(one)
    hard[150] = 500.0  # one step far beyond any noise, and back: still not a level
    run["actor/grad_norm"] = hard
    assert [f for f in run_doctor(metrics(run)) if f.rule == "grad_explosion"] == []
    run["actor/grad_norm"] = one[:120] + [g * 50 for g in one[120:]]
    found = [f for f in run_doctor(metrics(run)) if f.rule == "grad_explosion"]
    assert found and found[0].step == 120 and "spiked" in found[0].message
    run["actor/grad_norm"] = one[:120] + [1e-7] * 80
    found = [f for f in run_doctor(metrics(run)) if f.rule == "grad_explosion"]
    assert len(found) == 1 and "vanished" in found[0].message


def test_length_blowup_runaway_collapse_and_clip() -> None:
    run = healthy(200, 7)
    base = run["response_length/mean"][:100]
    run["response_length/mean"] = base + [1500 + i for i in range(100)]
    assert any(f.rule == "length_blowup" and "ran away" in f.message
               for f in run_doctor(metrics(run)))
    run["response_length/mean"] = base + [40.0] * 100  # a collapse: length_collapse's
    found = run_doctor(metrics(run))
    assert any(f.rule == "length_collapse" and "collapsed" in f.message for f in found)
    assert not [f for f in found if f.rule == "length_blowup"]
    run = healthy(200, 7)
    run["response_length/clip_ratio"] = run["response_length/clip_ratio"][:100] + [0.6] * 100
    found = [f for f in run_doctor(metrics(run)) if f.rule == "length_blowup"]
    assert len(found) == 1 and "truncated" in found[0].message


def test_val_regression() -> None:
    events = []
    scores = [0.30, 0.42, 0.50, 0.55, 0.56, 0.35, 0.30, 0.31]
    for i, score in enumerate(scores):
        events.append(MetricsEvent({"val-core/gsm8k/acc/mean@1": score, "val/loss": 1.0},
                                   i * 50, 1000.0 + i))
    found = [f for f in run_doctor(events) if f.rule == "val_regression"]
    assert len(found) == 1 and found[0].step == 250
    assert "best 0.56" in found[0].message
    noisy_val = [0.5, 0.53, 0.49, 0.52, 0.5, 0.47, 0.51, 0.5]
    events = [MetricsEvent({"val-core/x/acc": v}, i * 50, 1.0) for i, v in enumerate(noisy_val)]
    assert run_doctor(events) == []


def test_nonfinite_names_keys_once() -> None:
    events = [MetricsEvent({"a": 1.0, "b": 2.0}, 0, 1.0),
              MetricsEvent({"a": float("nan"), "b": float("inf")}, 1, 2.0),
              MetricsEvent({"a": float("nan"), "b": 2.0}, 2, 3.0),
              HistogramEvent("h", (1,), (0.0, 1.0), 1, 0.0, 0.0, 0.0, 0.0, 3, 4.0, nan=2)]
    found = [f for f in run_doctor(events) if f.rule == "nonfinite"]
    assert [(f.step, f.keys) for f in found] == [(1, ("a", "b")), (3, ("h",))]
    assert found[0].severity == "critical" and "first" in found[0].message


@pytest.mark.parametrize("text,why", [
    ("this question " * 14, "repeats 'this question' 14 times"),
    ("2 2 2 6 6 6 6", "repeats '6' 4 times"),
    ("\x00\x01\x02\ufffd\ufffd garbled \x03\x04\x05\x06\x07\x08", "garbled"),
    ("abcdefghij" * 40, "compresses"),
])
def test_degenerate_text_rows(text: str, why: str) -> None:
    from trackmux.doctor.config import resolve

    assert why in (why_degenerate(text, resolve(True)["degenerate_text"]) or "")


def test_degenerate_text_finding_names_rows_and_healthy_tables_pass() -> None:
    rng = random.Random(0)
    words = ["the", "model", "reasons", "about", "the", "answer", "step", "by", "step", "and",
             "then", "checks", "it"]
    fine = [" ".join(rng.choice(words) for _ in range(60)) for _ in range(16)]
    digits = [" ".join(str(rng.randrange(10)) for _ in range(7)) for _ in range(16)]
    assert run_doctor([table(10, fine), table(20, digits)]) == []
    bad = list(fine)
    for row in (3, 7, 12):
        bad[row] = "Let me think. " + "this question " * 14
    bad[5] = "x" * 300
    found = run_doctor([table(10, fine), table(20, bad)])
    assert len(found) == 1
    assert found[0].rule == "degenerate_text" and found[0].step == 20
    assert "rows 3, 5, 7, 12" in found[0].message
    assert "repeats 'this question' 14 times" in found[0].message


def test_degenerate_text_reads_the_samples_kind(tmp_path: Path) -> None:
    """A real log_samples batch, read back from the spool, as the doctor sees it."""
    import trackmux
    from trackmux.core.events import SamplesEvent
    from trackmux.core.spool.reader import SpoolReader

    run = trackmux.init(project="p", backends=[], dir=tmp_path, doctor=False)
    run.log_samples("rollout", {"prompt": ["p"] * 4, "reward": [1.0, 0.0, 0.0, 0.0],
                                "response": ["ok fine text here"] + ["no no no no no"] * 3},
                    step=5)
    run.finish(timeout=30)
    reader = SpoolReader(run.dir)
    try:
        events = [e for e in reader.iter_events() if isinstance(e, SamplesEvent)]
    finally:
        reader.close()
    found = run_doctor(events)
    assert found and found[0].rule == "degenerate_text" and "rows 1, 2, 3" in found[0].message


def test_stall_live_and_after_the_fact() -> None:
    stall = Stall(resolve_stall())
    for step in range(10):
        stall.update(MetricsEvent({"x": 1.0}, step, 1000.0 + 2 * step))
    assert stall.tick(1200.0, True) == ()  # 182 s: under the 300 s minimum
    assert stall.tick(2000.0, False) == ()  # the trainer is gone: not a stall
    found = stall.tick(1400.0, True)
    assert len(found) == 1 and "since step 9" in found[0].message
    assert stall.tick(1500.0, True) == ()  # once per episode
    # a finished run with a gap it recovered from, and a step time that jumped
    found = run_doctor(metrics({"x": [1.0] * 30}, interval=2.0))
    assert found == []
    events = list(metrics({"x": [1.0] * 30}, interval=2.0))
    late = [MetricsEvent(e.data, e.step, e.time + (600 if e.step >= 20 else 0)) for e in events]
    found = run_doctor(late)
    assert [f.rule for f in found] == ["stall"] and "no step for 602 s after step 19" in \
        found[0].message
    slow = [MetricsEvent(e.data, e.step, e.time if e.step < 20 else e.time + 30 * (e.step - 19))
            for e in events]
    found = run_doctor(slow)
    assert found and found[0].severity == "info" and "step time jumped" in found[0].message


def resolve_stall() -> dict[str, object]:
    from trackmux.doctor.config import resolve

    return resolve(True)["stall"]


def test_findings_of_one_event_told_together_and_later_ones_linked() -> None:
    class Fires(Detector):
        def update(self, event: object) -> list[object]:  # type: ignore[override]
            step = getattr(event, "step", 0)
            if step == 5:
                return [self.finding(5, [self.rule + "/key"], f"{self.rule} moved")]
            return []

    one, two = Fires({"severity": "warning"}), Fires({"severity": "critical"})
    one.rule, two.rule = "first", "second"
    found = []
    doctor = Doctor({}, detectors=[one, two])
    for event in metrics({"x": [1.0] * 10}):
        found += doctor.feed(event)
    assert len(found) == 1  # one alert, not two
    assert found[0].rule == "second" and found[0].severity == "critical"
    assert found[0].message == "second moved; first moved"
    assert found[0].keys == ("second/key", "first/key")
    run = healthy(300, 8)
    run["actor/ppo_kl"] = run["actor/ppo_kl"][:200] + [3.0] * 100
    # fallen 20 steps later, and still moving (a change this large is told at once, so
    # on the same step both would be one finding, as above)
    run["critic/score/mean"] = run["critic/score/mean"][:220] + [
        0.05 + 0.01 * ((i * 7) % 5) for i in range(80)]
    found = run_doctor(metrics(run))
    assert [f.rule for f in found] == ["kl_blowup", "reward_collapse"]
    assert [f.step for f in found] == [200, 220]
    assert "(after kl_blowup at step 200)" in found[1].message


def test_a_raising_detector_is_reported_once_and_switched_off() -> None:
    class Broken(Detector):
        rule = "broken"
        calls = 0

        def update(self, event: object) -> list[object]:  # type: ignore[override]
            Broken.calls += 1
            raise RuntimeError("boom")

    doctor = Doctor({}, detectors=[Broken({})])
    found = []
    for event in metrics({"x": [1.0] * 20}):
        found += doctor.feed(event)
    assert Broken.calls == 1
    assert len(found) == 1 and found[0].rule == "doctor" and found[0].severity == "info"
    assert "broken" in found[0].message and "RuntimeError: boom" in found[0].message


def test_a_kl_that_grows_from_zero_to_a_few_hundredths_is_learning_not_a_runaway() -> None:
    """A GRPO policy starts at its reference: its per-token KL grows from 0 to a few
    hundredths, many times its first level, as it learns (``min_kl``); the same curve
    that goes on to several tenths is a runaway."""
    rng = random.Random(3)
    learning = [0.0] * 15 + [max(0.0, 0.05 * min(1.0, i / 150) * rng.lognormvariate(0, 0.8))
                             for i in range(235)]
    assert max(learning) > 0.1  # single points past min_kl: the recent median is not
    run = healthy(250, 9)
    run["actor/kl_loss"] = learning
    assert serious(run_doctor(metrics(run))) == []
    run["actor/kl_loss"] = learning[:180] + [learning[179] * 1.12 ** i + 0.02
                                             for i in range(1, 71)]
    found = [f for f in run_doctor(metrics(run)) if f.rule == "kl_blowup"]
    assert found and 175 <= found[0].step <= 195, [f.message for f in found]


@pytest.mark.parametrize(("creep", "start"), [(0.0, 70), (0.01, 90)])
def test_kl_blowup_is_dated_where_the_climb_began_from_a_level_before_it(
        creep: float, start: int) -> None:
    """A KL flat (or creeping up) and then growing 9% a step is dated at the knee, and the
    level it quotes is the window before it, not one the climb already raised."""
    rng = random.Random(7)
    kl = [(0.004 + 0.0005 * rng.gauss(0, 1)) * (1 + creep * i) for i in range(150)]
    kl = [v * (1.09 ** (i - start) if i > start else 1.0) for i, v in enumerate(kl)]
    run = healthy(150, 2)
    run["actor/kl_loss"] = kl
    [found] = [f for f in run_doctor(metrics(run)) if f.rule == "kl_blowup"]
    assert start - 1 <= found.step <= start + 8, found.message  # the climb: from start + 1
    last_level_step = int(found.message.split("(steps ")[1].split(")")[0].split("-")[1])
    assert last_level_step <= start + 2, found.message
    key, step, value = found.evidence[0]  # the onset's (then the update's worst, latest)
    assert (key, step, value) == ("actor/kl_loss", found.step, kl[found.step])
