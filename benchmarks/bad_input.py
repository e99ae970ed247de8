"""B1-bad: the caller's cost of ``log()`` when the call carries a bad value or key.

Beside B1 (100 floats under verl-like keys, the fast path), the same call with one entry
that cannot be a metric: a ``None`` value (the commonest: an eval metric not computed this
step), a ``str`` value, a non-str key. By default (issue 27) the bad entry is dropped,
named once and counted, and the other 99 floats are kept; this measures what that costs
the training loop. Calls of the four kinds alternate, so they see the same load; the
spool writer runs (spool only: in process delivery, backends do not run in the trainer,
so they do not change this figure beyond B1's GIL noise).

    python -m benchmarks.bad_input [--steps 20000]
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from typing import Any

import trackmux
from benchmarks.common import payload, stats

CASES = ("all floats (B1)", "one None value", "one str value", "one int key")


def bad(kind: str, data: dict[Any, Any]) -> dict[Any, Any]:
    """``data`` (100 floats) with one bad entry of ``kind`` added."""
    if kind == "one None value":
        return {**data, "val/acc": None}
    if kind == "one str value":
        return {**data, "note": "lr warmup"}
    if kind == "one int key":
        return {**data, 5: 1.0}
    return data


def measure(steps: int) -> dict[str, Any]:
    logging.getLogger("trackmux").setLevel(logging.ERROR)  # the one warning per key
    with tempfile.TemporaryDirectory() as root:
        run = trackmux.init(project="bench", backends=[], dir=root)
        calls = {case: [bad(case, payload(step)) for step in range(64)] for case in CASES}
        timings: dict[str, list[int]] = {case: [] for case in CASES}
        log = run.log
        clock = time.perf_counter_ns
        for step in range(steps + 200):  # the first 200 rounds warm up (keys become known)
            for case in CASES:
                data = calls[case][step % 64]
                start = clock()
                log(data, step=step)
                took = clock() - start
                if step >= 200:
                    timings[case].append(took)
        summary = run.finish(timeout=60)
    result = {case: stats(samples) for case, samples in timings.items()}
    result["input_dropped"] = summary.input_dropped
    result["problems"] = [(p.kind, p.count) for p in summary.problems]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    args = parser.parse_args()
    result = measure(args.steps)
    base = result[CASES[0]]["median_us"]
    print(f"log() of 100 floats plus one bad entry, {args.steps} calls each, interleaved")
    print(f"{'case':<18} {'median':>9} {'p99':>9} {'vs B1 median':>13}")
    for case in CASES:
        s = result[case]
        print(f"{case:<18} {s['median_us']:7.1f}us {s['p99_us']:7.1f}us "
              f"{s['median_us'] / base:12.2f}x")
    print(f"dropped and counted: {result['input_dropped']} ({result['problems']})")
    print(json.dumps({c: result[c] for c in CASES}))


if __name__ == "__main__":
    main()
