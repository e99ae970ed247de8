"""B17: what ``log_image`` costs the trainer's thread (issue 43 item 19).

    python -m benchmarks.log_image [--size 512] [--calls 30]

A ``size`` x ``size`` RGB uint8 image of noise (PNG's worst case) logged ``calls`` times
into a spool-only run; each call is timed in the caller. The PNG is made on the spool
writer's thread, so the call pays for the checks and one memory copy of the pixels.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time


def bench(size: int, calls: int) -> dict[str, float]:
    import numpy as np

    import trackmux

    image = (np.random.default_rng(0).random((size, size, 3)) * 255).astype(np.uint8)
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        run = trackmux.init(project="bench", backends=[], dir=tmp, provenance=False,
                            doctor=False)
        run.log_image("warm", image, step=0)
        for step in range(calls):
            t0 = time.perf_counter()
            run.log_image("image", image, step=step)
            times.append((time.perf_counter() - t0) * 1e3)
        run.finish(timeout=120)
    return {"size": size, "calls": calls, "median_ms": round(statistics.median(times), 3),
            "max_ms": round(max(times), 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--calls", type=int, default=30)
    args = ap.parse_args()
    print(json.dumps(bench(args.size, args.calls)))


if __name__ == "__main__":
    main()
