"""B10 (issue 25): what provenance adds to ``init()``, and what ``run.watch`` costs.

1. ``init()`` with and without provenance, in fresh processes, interleaved (``--rounds``
   pairs), in this git checkout (a real tree: git status, remote, diff): the median of the
   per-pair difference is the cost the trainer's thread pays at ``init()``. Also measured:
   how long the background collection takes until the event is committed (off the
   trainer's thread). Budget: at most 50 ms more than without.
2. ``run.watch(model, log=..., every=100)`` on a 100M-parameter model (an MLP of 10
   Linear layers of 3162 x 3162) on CPU: the time of one watched step's collection
   (binning every gradient and/or parameter tensor, one copy to the CPU, logging) against
   one forward-backward of the same model (batch 16). Target: under 1% amortised at
   every=100, i.e. a watched step under one forward-backward.

    python -m benchmarks.provenance [--rounds 15] [--repeats 5] [--skip-watch] [--skip-init]
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

INIT = r"""
import json, sys, time
t0 = time.perf_counter()
import trackmux
from trackmux.core.lifecycle import run as lifecycle
hook_s = []
def timed(hook):
    def call(run):
        t = time.perf_counter()
        hook(run)
        hook_s.append(time.perf_counter() - t)
    return call
lifecycle._start_hooks[:] = [timed(h) if h.__module__ == "trackmux.provenance.record" else h
                             for h in lifecycle._start_hooks]
t1 = time.perf_counter()
c1 = time.thread_time()
run = trackmux.init(project="b10", backends="none", dir={root!r}, provenance={on})
t2 = time.perf_counter()
c2 = time.thread_time()
run.log({{"x": 1.0}}, step=0)
collector = None
if {on}:
    from trackmux.provenance import record
    collector = record._collectors.get(run)
    # join(): this version; thread.join(): before the bare thread (to compare with it)
    if hasattr(collector, "join"):
        collector.join(30)
    else:
        collector.thread.join(30)
t3 = time.perf_counter()
run.finish()
print(json.dumps({{"import": t1 - t0, "init": t2 - t1, "init_cpu": c2 - c1,
                  "collected": t3 - t1, "hook": sum(hook_s)}}))
"""


def one_init(root: Path, on: bool) -> dict[str, float]:
    env = {**os.environ, "TRACKMUX_PROVENANCE": "1" if on else "0"}
    out = subprocess.run([sys.executable, "-c", INIT.format(root=str(root), on=on)],
                         capture_output=True, text=True, check=True, timeout=120, env=env,
                         cwd=Path(__file__).resolve().parent.parent)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def bench_init(rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        one_init(Path(tmp), True)  # warm the page cache
        pairs = []
        for _ in range(rounds):
            off = one_init(Path(tmp), False)
            on = one_init(Path(tmp), True)
            pairs.append((off, on))
    diffs = [on["init"] - off["init"] for off, on in pairs]
    cpu = [on["init_cpu"] - off["init_cpu"] for off, on in pairs]
    return {"init_off_ms": 1000 * statistics.median(p[0]["init"] for p in pairs),
            "init_on_ms": 1000 * statistics.median(p[1]["init"] for p in pairs),
            "added_ms_median": 1000 * statistics.median(diffs),
            "added_ms_p90": 1000 * sorted(diffs)[int(0.9 * (len(diffs) - 1))],
            # the trainer thread's own CPU time in init(): what load on the machine
            # cannot inflate (wall time includes waiting for a core)
            "added_thread_cpu_ms_median": 1000 * statistics.median(cpu),
            "added_thread_cpu_ms_p90": 1000 * sorted(cpu)[int(0.9 * (len(cpu) - 1))],
            # the provenance start hook's own wall time inside init(): the part init()
            # waits for (the rest is the thread and the child competing for the CPU)
            "hook_ms_median": 1000 * statistics.median(p[1]["hook"] for p in pairs),
            "hook_ms_p90": 1000 * sorted(p[1]["hook"] for p in pairs)[
                int(0.9 * (len(pairs) - 1))],
            "collected_after_init_ms": 1000 * statistics.median(
                p[1]["collected"] - p[1]["init"] for p in pairs)}


def bench_watch(repeats: int) -> dict[str, float]:
    import torch

    import trackmux

    torch.manual_seed(0)
    width, depth = 3162, 10
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(depth)])
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    x = torch.randn(16, width)

    def fwd_bwd() -> float:
        t = time.perf_counter()
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        return time.perf_counter() - t

    fwd_bwd()
    base = statistics.median(fwd_bwd() for _ in range(repeats))
    out: dict[str, float] = {"params_millions": params / 1e6, "fwd_bwd_s": base,
                             "torch_threads": torch.get_num_threads()}
    with tempfile.TemporaryDirectory() as tmp:
        run = trackmux.init(project="b10", backends="none", dir=tmp, provenance=False)
        for mode in ("gradients", "all"):
            watcher = run.watch(model, log=mode, every=100)
            times = []
            for _ in range(repeats):
                fwd_bwd()
                t = time.perf_counter()
                watcher.collect()
                times.append(time.perf_counter() - t)
            cost = statistics.median(times)
            out[f"watch_{mode}_s"] = cost
            out[f"watch_{mode}_amortised_pct_every100"] = 100 * cost / (100 * base)
            # the hook itself on the 99 other steps: one set lookup per optimizer step
            t = time.perf_counter()
            for _ in range(1000):
                watcher.owns(optimizer)
            out["hook_unwatched_step_us"] = (time.perf_counter() - t) / 1000 * 1e6
            run.unwatch(model)
        run.finish()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-watch", action="store_true")
    parser.add_argument("--skip-init", action="store_true")
    args = parser.parse_args()
    if not args.skip_init:  # each part printed when done: a loaded machine is slow
        print(json.dumps({"init": bench_init(args.rounds)}, indent=2), flush=True)
    if not args.skip_watch:
        print(json.dumps({"watch": bench_watch(args.repeats)}, indent=2), flush=True)


if __name__ == "__main__":
    main()
