"""Make a folder of finished spools for the UI's scale benchmark, quickly.

``python -m benchmarks.ui_spools DIR --runs 100 --metrics 20 --steps 10000`` writes one
run per folder through the real SpoolWriter (the spool format, CRCs and meta are the
ones a trainer writes), a config with a learning rate, a KL coefficient and a batch size
that move the final reward, and 20 noisy RL-like curves. Runs are written by two worker
processes; 100 x 20 x 10,000 takes about a minute here.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from trackmux.core.events import ConfigEvent, MetricsEvent
from trackmux.core.spool.writer import SPOOL_FILE, SpoolWriter

PROJECT = "scale"


def metric_names(count: int) -> list[str]:
    base = ["reward/mean", "kl/divergence", "policy/entropy", "policy/grad_norm",
            "response_length/mean", "critic/score/mean", "actor/pg_loss", "actor/lr",
            "timing/step", "system/cpu"]
    names = base[:count]
    names += [f"extra/metric_{i:02d}" for i in range(count - len(names))]
    return names


def write_run(root: Path, index: int, metrics: int, steps: int) -> Path:
    rnd = random.Random(index)
    lr = [1e-6, 3e-6, 1e-5, 3e-5][index % 4]
    kl = [0.001, 0.01, 0.05, 0.1, 0.3][index % 5]
    batch = [64, 128, 256][index % 3]
    run_dir = root / PROJECT / f"run-{index:03d}"
    if (run_dir / SPOOL_FILE).exists():
        return run_dir
    writer = SpoolWriter(run_dir, max_buffered=steps + 10)
    start = time.time() - steps * 2.0
    writer.set_meta(run_id=run_dir.name, project=PROJECT, name=run_dir.name, state="running",
                    started_at=start, backends=[], pid=0, host="bench")
    config = {"lr": lr, "kl_coef": kl, "data": {"batch_size": batch}, "seed": index}
    writer.append(ConfigEvent(config, 0, start))
    names = metric_names(metrics)
    ceiling = 0.9 - 30 * kl + 4e3 * lr + batch / 2000
    for step in range(steps):
        t = step / steps
        reward = ceiling * (1 - math.exp(-5 * t)) + rnd.gauss(0, 0.03)
        data = {name: rnd.gauss(0, 1) for name in names}
        data["reward/mean"] = reward
        if "kl/divergence" in data:
            data["kl/divergence"] = kl * t * 10 + abs(rnd.gauss(0, 0.01))
        writer.append(MetricsEvent(data, step, start + step * 2.0))
    writer.set_meta(state="finished", finished_at=start + steps * 2.0)
    writer.close(timeout=600)
    return run_dir


def generate(root: Path, runs: int = 100, metrics: int = 20, steps: int = 10_000,
             workers: int = 2) -> float:
    """Write the folder (runs already there are kept); return the seconds it took."""
    began = time.monotonic()
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(write_run, [root] * runs, range(runs), [metrics] * runs,
                      [steps] * runs))
    return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--metrics", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10_000)
    args = parser.parse_args()
    seconds = generate(args.root, args.runs, args.metrics, args.steps)
    print(f"{args.runs} runs x {args.metrics} metrics x {args.steps} steps in "
          f"{args.root} ({seconds:.1f} s)")


if __name__ == "__main__":
    main()
