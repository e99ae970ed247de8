"""RL-native data (issue 15): what histograms, rollout tables and system metrics cost.

    python -m benchmarks.rl_data histogram            # binning 1M float32 values
    python -m benchmarks.rl_data tables --to wandb,mlflow [--rows 10000 --steps 100]
    python -m benchmarks.rl_data system [--interval 0.1]

- histogram: ``Run.log_histogram`` of 1M float32 values (numpy; torch too when installed,
  float32 and bfloat16), median and p99 of repeated calls. The issue's budget is 50 ms.
- tables: ``log_table`` of ``--rows`` rows a step for ``--steps`` steps with no backend
  (spool only): the time each call takes in the loop, the spool's size, then the time
  ``trackmux sync`` takes to deliver it to each backend of ``--to`` (wandb offline, mlflow
  to a sqlite store), with the backend's ``max_rows`` option from ``--cap`` (0: all rows).
- system: a CPU-bound loop of fixed work with ``Run.log`` each iteration, with and
  without ``system_metrics`` sampling at ``--interval`` seconds; the cost is the
  difference of the median iteration times.

Results are printed as JSON (``--out`` writes them to a file too).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import offline_env, stats


def bench_histogram(repeat: int) -> dict[str, Any]:
    import numpy as np

    import trackmux

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        run = trackmux.init(project="bench", backends=[], dir=tmp)
        inputs: dict[str, Any] = {"numpy_float32": np.random.default_rng(0).normal(
            size=1_000_000).astype(np.float32)}
        try:
            import torch

            base = torch.randn(1_000_000)
            inputs["torch_float32"] = base
            inputs["torch_bfloat16"] = base.to(torch.bfloat16)
        except ImportError:
            out["torch"] = "not installed"
        for name, values in inputs.items():
            run.log_histogram("warm", values)
            samples = []
            for _ in range(repeat):
                start = time.perf_counter_ns()
                run.log_histogram("reward/dist", values, bins=64)
                samples.append(time.perf_counter_ns() - start)
            result = stats(samples)
            out[name] = {"median_ms": result["median_us"] / 1000,
                         "p99_ms": result["p99_us"] / 1000, "n": result["n"]}
        run.finish()
    return out


def _rows(step: int, n: int) -> list[list[Any]]:
    rnd = random.Random(step)
    return [[f"prompt {step}-{i}: " + "x" * 80, f"response {i}: " + "y" * 200,
             rnd.random(), rnd.randint(10, 512)] for i in range(n)]


def bench_tables(rows: int, steps: int, to: list[str], cap: int) -> dict[str, Any]:
    import trackmux
    from trackmux.core.backends.registry import get_registry
    from trackmux.core.delivery.sync import deliver

    root = Path(tempfile.mkdtemp(prefix="trackmux-tables-"))
    os.environ.update(offline_env(root))
    columns = ["prompt", "response", "reward", "length"]
    prepared = [_rows(step, rows) for step in range(min(steps, 4))]
    run = trackmux.init(project="bench", name="tables", backends=[], dir=root / "spool")
    samples = []
    loop_start = time.perf_counter()
    for step in range(steps):
        start = time.perf_counter_ns()
        run.log_table("rollouts", columns, prepared[step % len(prepared)], step=step)
        samples.append(time.perf_counter_ns() - start)
    loop_s = time.perf_counter() - loop_start
    finish_start = time.perf_counter()
    run.finish()
    out: dict[str, Any] = {
        "rows_per_step": rows, "steps": steps,
        "log_table_ms": {k.replace("_us", "_ms"): v / 1000
                         for k, v in stats(samples).items() if k != "n"},
        "loop_s": round(loop_s, 3), "finish_s": round(time.perf_counter() - finish_start, 3),
        "spool_mb": round(sum(p.stat().st_size for p in run.dir.glob("spool.db*")) / 2**20, 1),
        "delivery": {},
    }
    registry = get_registry()
    for name in to:
        options: dict[str, Any] = {"max_rows": cap} if cap else {}
        if name == "mlflow":
            options.update(tracking_uri=f"sqlite:///{root / 'mlflow.db'}",
                           artifact_location=str(root / "mlflow-artifacts"))
        spec = registry.backend(name)
        start = time.perf_counter()
        result = deliver(run.dir, {name: lambda spec=spec, o=options: spec.factory(dict(o))},
                         timeout=3600)
        out["delivery"][name] = {"seconds": round(time.perf_counter() - start, 1),
                                 "complete": result.complete, "max_rows": cap or "all",
                                 "problems": [p.message for p in result.problems]}
    return out


def _work(n: int = 20_000) -> float:
    total = 0.0
    for i in range(n):
        total += (i * 0.5) ** 0.5
    return total


def bench_system(interval: float, iterations: int, rounds: int = 10) -> dict[str, Any]:
    """Blocks with and without the sampler alternate, so drift in the machine's load
    (other processes) falls on both alike."""
    import trackmux
    from trackmux.core.lifecycle.system_metrics import SystemSampler

    samples: dict[str, list[int]] = {"off": [], "on": []}
    block = max(1, iterations // rounds)
    with tempfile.TemporaryDirectory() as tmp:
        run = trackmux.init(project="bench", backends=[], dir=tmp)
        sampler_cost: list[int] = []
        step = 0
        for _ in range(rounds):
            for mode in ("off", "on"):
                sampler = None
                if mode == "on":
                    def emit(data: dict[str, float]) -> None:
                        run._system_sample(data)  # type: ignore[union-attr]

                    sampler = SystemSampler(emit, interval, Path(tmp))
                    start = time.perf_counter_ns()
                    sampler.sample()
                    sampler_cost.append(time.perf_counter_ns() - start)
                    sampler.start()
                for _ in range(block):
                    start = time.perf_counter_ns()
                    _work()
                    run.log({"loss": 1.0 / (step + 1)}, step=step)
                    samples[mode].append(time.perf_counter_ns() - start)
                    step += 1
                if sampler is not None:
                    sampler.stop()
        run.finish()
    off, on = stats(samples["off"]), stats(samples["on"])
    return {"interval_s": interval, "iterations_each": len(samples["on"]),
            "off_median_ms": off["median_us"] / 1000, "on_median_ms": on["median_us"] / 1000,
            "off_mean_ms": off["mean_us"] / 1000, "on_mean_ms": on["mean_us"] / 1000,
            "cost_percent_of_median": round((on["median_us"] - off["median_us"])
                                            / off["median_us"] * 100, 2),
            "one_sample_ms": stats(sampler_cost)["median_us"] / 1000,
            "load_average": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("histogram", "tables", "system"))
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--to", default="", help="comma list of backends for the tables bench")
    ap.add_argument("--cap", type=int, default=0, help="backend max_rows (0: all rows)")
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.what == "histogram":
        result = bench_histogram(args.repeat)
    elif args.what == "tables":
        result = bench_tables(args.rows, args.steps, [t for t in args.to.split(",") if t],
                              args.cap)
    else:
        result = bench_system(args.interval, args.iterations)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
