"""``idle_steps`` at its edge: how often it fires on runs that idle on a given share of
their steps, scattered or in bursts (docs/doctor.md, the rule's section).

The calibration benchmark's healthy runs never log a gradient of exactly 0, so they do not
reach this rule; this simulates the idle flags alone after a first update: i.i.d. at a
share, or a two-state Markov chain with a lag-1 correlation. Run:
``python -m benchmarks.idle_steps_edge [--runs 300] [--seed 1]``.
"""

from __future__ import annotations

import argparse
import random
from statistics import median

from trackmux.core.events import MetricsEvent
from trackmux.doctor.config import resolve
from trackmux.doctor.rules.idle import IdleSteps


def fired_at(flags: list[bool]) -> int | None:
    """The point (after the first update, which is point 0) at which the rule fired."""
    rule = IdleSteps(resolve(True)["idle_steps"])
    for i, idle in enumerate([False, *flags]):
        event = MetricsEvent({"grad_norm": 0.0 if idle else 0.5}, i, float(i))
        if rule.update(event):
            return i
    return None


def flags(rng: random.Random, share: float, rho: float, n: int) -> list[bool]:
    """``n`` idle flags at ``share``; with ``rho`` > 0 each keeps the last one's state
    with that chance (a Markov chain whose lag-1 correlation is ``rho``)."""
    out: list[bool] = []
    state = rng.random() < share
    for _ in range(n):
        if rng.random() >= rho:
            state = rng.random() < share
        out.append(state)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print("| idle share | lag-1 correlation | points | fired | median point fired |")
    print("|---|---|---|---|---|")
    cases = [(s, 0.0, 1000) for s in (0.3, 0.4, 0.45, 0.5)]
    cases += [(s, r, 1000) for s in (0.3, 0.4) for r in (0.5, 0.8)]
    cases += [(s, 0.0, n) for s in (0.7, 0.75, 0.8, 0.9) for n in (80, 300)]
    for share, rho, n in cases:
        hits = [p for p in (fired_at(flags(rng, share, rho, n)) for _ in range(args.runs))
                if p is not None]
        when = f"{median(hits):.0f}" if hits else "-"
        print(f"| {share:.2f} | {rho:.1f} | {n} | {len(hits) / args.runs:.1%} | {when} |")


if __name__ == "__main__":
    main()
