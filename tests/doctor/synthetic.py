"""Synthetic runs for the doctor's tests: curves that break in one way, and healthy ones."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from trackmux.core.events import Event, FindingEvent, MetricsEvent, TableEvent, latest_findings
from trackmux.doctor.config import resolve
from trackmux.doctor.engine import Doctor


def metrics(series: dict[str, Sequence[float]], start: float = 1000.0, interval: float = 2.0
            ) -> Iterator[MetricsEvent]:
    steps = len(next(iter(series.values())))
    for step in range(steps):
        yield MetricsEvent({k: float(v[step]) for k, v in series.items()}, step,
                           start + step * interval)


def run_doctor(events: Iterable[Event], rules: Any = True) -> list[FindingEvent]:
    """Each finding in its latest state, as a reader has them (a finding that grew was
    updated: ``run_doctor_events`` has every event)."""
    return latest_findings(run_doctor_events(events, rules))


def run_doctor_events(events: Iterable[Event], rules: Any = True) -> list[FindingEvent]:
    doctor = Doctor(resolve(rules))
    found: list[FindingEvent] = []
    last = 0.0
    for event in events:
        found += doctor.feed(event)
        last = event.time
    return found + doctor.tick(last, False)  # the run ended, as the offline doctor has it


def serious(found: list[FindingEvent]) -> list[FindingEvent]:
    return [f for f in found if f.severity in ("warning", "critical")]


def noisy(values: Iterable[float], sigma: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [v + rng.gauss(0.0, sigma) for v in values]


def rising(n: int, start: float, end: float) -> list[float]:
    """A saturating learning curve."""
    return [start + (end - start) * (1 - math.exp(-4 * i / n)) for i in range(n)]


def healthy(n: int, seed: int, shape: str = "rising") -> dict[str, list[float]]:
    """A healthy run of the demo's and verl's keys: rising noisily, plateau or a step."""
    rng = random.Random(seed)
    if shape == "rising":
        reward = noisy(rising(n, 0.1, 0.8), 0.05, seed)
    elif shape == "plateau":
        reward = noisy([0.6] * n, 0.05, seed)
    else:  # curriculum: a harder set at n/2 moves the reward down a notch, then it learns
        half = n // 2
        reward = noisy(rising(half, 0.2, 0.8) + [x - 0.15 for x in rising(n - half, 0.8, 0.9)],
                       0.04, seed)
    kl = [max(0.0, 0.02 + 0.3 * (1 - math.exp(-3 * i / n)) + rng.gauss(0, 0.01))
          for i in range(n)]
    entropy = noisy([1.5 - 0.8 * i / n for i in range(n)], 0.03, seed + 1)
    grad = [abs(rng.lognormvariate(-2.0, 0.35)) for _ in range(n)]
    length = noisy([300 + 100 * i / n for i in range(n)], 15, seed + 2)
    clip = [max(0.0, min(1.0, rng.gauss(0.05, 0.02))) for _ in range(n)]
    return {"critic/score/mean": reward, "actor/ppo_kl": kl, "actor/entropy": entropy,
            "actor/grad_norm": grad, "response_length/mean": length,
            "response_length/clip_ratio": clip}


def table(step: int, responses: Sequence[str], key: str = "val/generations") -> TableEvent:
    rows = tuple((f"prompt {i}", r, 0.5) for i, r in enumerate(responses))
    return TableEvent(key, ("input", "output", "score"), rows, step, 1000.0 + step)


def rerun_adds_nothing(run: Any) -> None:
    """A restarted delivery process reads a finished run again: its live doctor must find
    what is in the spool already and append nothing (findings, updates, notes)."""
    import time

    from trackmux.core.backends.contract import RunInfo
    from trackmux.core.delivery.watch import WatcherSpec, WatchRunner
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run.dir)
    try:
        before = reader.last_seq()
        info = RunInfo("p", run.name, run.id, run.dir, 0.0)
        found: list[FindingEvent] = []
        runner = WatchRunner([WatcherSpec("trackmux.doctor.live:watcher",
                                          {"rules": resolve(True)})],
                             info, alive=lambda: False, on_found=found.extend,
                             on_problem=lambda *a: None)
        runner.start()
        runner.catch_up(before, time.monotonic() + 60)
        runner.stop(wait=10)
        assert not runner.thread.is_alive()  # it appends nothing after the read below
        assert runner.cursor >= before  # it read the whole run: "none" is not "not yet"
        assert found == [] and reader.last_seq() == before
    finally:
        reader.close()
