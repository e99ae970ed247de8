"""The default ``trackmux demo`` (200 steps, console and file backends, the report), end
to end in a fresh process, as a user first runs it: its wall time, against the promise
that it runs in under a minute on 2 cores. (The test suite checks what the demo shows,
not how fast: tests/report/test_demo_loop.py.)

    python -m benchmarks.demo                 # 3 runs
    python -m benchmarks.demo --runs 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BOUND_S = 60.0  # the promise: under a minute on 2 cores


def once(root: Path) -> float:
    """Seconds for one ``python -m trackmux demo --dir ROOT`` (the interpreter's start and
    imports included: that is what the user waits for)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKMUX_")}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "trackmux", "demo", "--dir", str(root)],
                          env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"trackmux demo failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    times = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            times.append(once(Path(tmp)))
        print(f"demo run {i + 1}: {times[-1]:.1f} s", flush=True)
    median = statistics.median(times)
    print(f"trackmux demo (default): median {median:.1f} s, max {max(times):.1f} s over "
          f"{len(times)} runs; bound {BOUND_S:.0f} s: {'met' if max(times) < BOUND_S else 'MISSED'}"
          f"; load {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps({"seconds": times, "median": median,
                                         "bound": BOUND_S}, indent=2))


if __name__ == "__main__":
    main()
