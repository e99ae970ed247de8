"""B13: sweeps (issue 36) -- what pruning by the doctor saves, beside Optuna's median
pruner and no pruning, over the demo's reward hacking.

    python -m benchmarks.sweep [--trials 16] [--steps 150] [--step-seconds 0.02]
                               [--method random] [--out results.json]

One search space, three sweeps with the same trial budget, sampler seed and demo seed:
``learning_rate`` log-uniform 0.004-0.06 and ``kl_coef`` in {0.01, 0.05, 0.2} over the demo
with the flawed reward model (``trackmux.demo.sweep_trial --failure reward-hacking``): a
high learning rate with a small KL coefficient finds the flaw and the verifiable reward
collapses; a moderate one learns the task. The metric is ``reward/mean_last10``
(maximise). The three ways:

- ``doctor``: the default, the doctor's critical findings stop a trial;
- ``doctor+precursors``: also its warnings that precede reward hacking in the demo
  (``prune: {rules: [degenerate_text, component_divergence]}``: the samples start to
  repeat, a reward component turns against the total);
- ``median``: ``prune: false`` and ``early_terminate: {type: median}`` (Optuna's median
  pruner: 4 startup trials, 20 warm-up steps);
- ``none``: ``prune: false``, no early_terminate.

With ``--method random`` (default) trial ``n`` gets the same parameters in all three
(the sampler is seeded per trial), so the compute saved is the same trials cut short;
``--method bayes`` lets each way's pruning steer TPE. Reported per way: trials by state,
steps run (the compute a real trainer spends), the trials' CPU seconds (``wait4`` of each
program: trainer and what it waited for), wall time, the best final reward and its trial;
for the doctor, how many steps after the finding reached the spool each pruned trial
stopped, and after the finding's onset.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

WAYS = {
    "doctor": "",
    "doctor+precursors": "prune: {rules: [degenerate_text, component_divergence]}\n",
    "median": "prune: false\nearly_terminate: {type: median, n_startup_trials: 4, "
              "n_warmup_steps: 20}\n",
    "none": "prune: false\n",
}


def sweep_file(method: str, steps: int, step_seconds: float, trials: int) -> str:
    return textwrap.dedent(f"""\
        method: {method}
        metric: {{name: reward/mean_last10, goal: maximize}}
        command: ["${{interpreter}}", "-m", "trackmux.demo.sweep_trial",
                  "--failure=reward-hacking", "--steps={steps}", "--seed=0",
                  "--step_seconds={step_seconds}", "${{args}}"]
        parameters:
          learning_rate: {{distribution: log_uniform_values, min: 0.004, max: 0.06}}
          kl_coef: {{values: [0.01, 0.05, 0.2]}}
        sampler: {{seed: 0, n_startup_trials: 6}}
        run_cap: {trials}
        """)


def _cli(root: Path, *args: str) -> str:
    env = dict(os.environ, TRACKMUX_DIR=str(root), OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "trackmux", *args], env=env, cwd=root,
                          capture_output=True, text=True, check=True)
    return done.stdout


def run_way(name: str, method: str, steps: int, step_seconds: float, trials: int,
            base: Path) -> dict[str, Any]:
    root = base / name.replace("+", "-")
    root.mkdir(parents=True)
    path = root / "sweep.yaml"
    path.write_text(sweep_file(method, steps, step_seconds, trials) + WAYS[name])
    sweep_id = _cli(root, "sweep", "create", str(path)).strip().splitlines()[-1]
    started = time.monotonic()
    _cli(root, "agent", sweep_id, "--count", str(trials))
    wall = time.monotonic() - started
    data = json.loads(_cli(root, "sweep", "show", sweep_id, "--json"))
    rows = data["trials"]
    states: dict[str, int] = {}
    for t in rows:
        states[t["state"]] = states.get(t["state"], 0) + 1
    after_found, after_onset = [], []
    for t in rows:
        if t["pruned_by"] == "doctor" and t.get("found_at_step") is not None:
            after_found.append(t["steps"] - 1 - t["found_at_step"])
            after_onset.append(t["steps"] - 1 - t["finding"]["step"])
    best = data["best"]
    return {
        "way": name, "sweep": sweep_id, "states": states,
        "steps": sum(t["steps"] or 0 for t in rows),
        "cpu_seconds": round(sum(t["cpu_seconds"] or 0 for t in rows), 1),
        "wall_seconds": round(wall, 1),
        "best": None if best is None else {
            "trial": best["number"], "value": round(best["value"], 4),
            "params": best["params"]},
        "stopped_steps_after_finding": after_found,
        "stopped_steps_after_onset": after_onset,
        "trials": [{k: t[k] for k in ("number", "state", "value", "steps", "params",
                                      "pruned_by", "reason", "found_at_step")}
                   for t in rows],
    }


def table(results: list[dict[str, Any]]) -> str:
    none = next((r for r in results if r["way"] == "none"), None)
    lines = ["| way | trials (complete / pruned / failed) | steps | vs no pruning | "
             "trial CPU s | wall s | best final reward (trial) |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        s = r["states"]
        saved = "" if none is None else f"{r['steps'] / none['steps'] - 1:+.0%}"
        best = "-" if r["best"] is None else f"{r['best']['value']:.3f} ({r['best']['trial']})"
        lines.append(f"| {r['way']} | {s.get('complete', 0)} / {s.get('pruned', 0)} / "
                     f"{s.get('failed', 0)} | {r['steps']} | {saved} | {r['cpu_seconds']} | "
                     f"{r['wall_seconds']} | {best} |")
    for r in results:
        if r["stopped_steps_after_finding"]:
            found, onset = r["stopped_steps_after_finding"], r["stopped_steps_after_onset"]
            lines.append(f"\n{r['way']}: the doctor's pruned trials stopped "
                         f"{min(found)}-{max(found)} steps (median "
                         f"{statistics.median(found)}) after the finding "
                         f"reached the spool, {min(onset)}-{max(onset)} after its onset")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--step-seconds", type=float, default=0.05)
    parser.add_argument("--method", choices=("random", "bayes"), default="random")
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="trackmux-b12-") as tmp:
        for way in args.ways.split(","):
            print(f"B13 {way}: {args.trials} trials ...", file=sys.stderr, flush=True)
            results.append(run_way(way, args.method, args.steps, args.step_seconds,
                                   args.trials, Path(tmp)))
    print(table(results))
    if args.out:
        args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)},
                                        "results": results}, indent=1, default=str))


if __name__ == "__main__":
    main()
