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

- ``doctor``: the default: the doctor's critical findings and its signs of reward
  hacking (``spec.WRONG_RULES``: the samples start to repeat, a reward component turns
  against the total) stop a trial;
- ``doctor-critical``: critical findings only (``prune: {rules: []}``);
- ``median``: ``prune: false`` and ``early_terminate: {type: median}`` (Optuna's median
  pruner: 4 startup trials, 20 warm-up steps);
- ``none``: ``prune: false``, no early_terminate.

With ``--method random`` (default) trial ``n`` gets the same parameters in all three
(the sampler is seeded per trial), so the compute saved is the same trials cut short;
``--method bayes`` lets each way's pruning steer TPE. Reported per way: trials by state,
steps run (the compute a real trainer spends), the trials' CPU seconds (``wait4`` of each
program: trainer and what it waited for), wall time, the best final reward and its trial;
for the doctor, how many steps after the finding reached the spool each pruned trial
stopped, and after the finding's onset. Beside no pruning, a bound (:func:`peak_bound`):
the steps spent if each trial gone wrong were stopped exactly when its verifiable reward
peaks, the least a rule that waits for the reward to turn can spend.

``--bar`` runs the shape of issue 36's acceptance bar instead (B13c): ``method: bayes``
unseeded, ``run_cap: 12``, two ``trackmux agent`` at once, the default pruning. Each
pruned trial is then run again to the end without pruning (no pacing: about 2 s), so the
table says what it would have become: its final reward and how far it fell from its own
peak (the verifiable reward falling 10% or more from its peak is a trial gone wrong).
"""

from __future__ import annotations

import argparse
import dataclasses
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
    "doctor-critical": "prune: {rules: []}\n",
    "median": "prune: false\nearly_terminate: {type: median, n_startup_trials: 4, "
              "n_warmup_steps: 20}\n",
    "none": "prune: false\n",
}


def sweep_file(method: str, steps: int, step_seconds: float, trials: int,
               seeded: bool = True) -> str:
    return textwrap.dedent(f"""\
        method: {method}
        metric: {{name: reward/mean_last10, goal: maximize}}
        command: ["${{interpreter}}", "-m", "trackmux.demo.sweep_trial",
                  "--failure=reward-hacking", "--steps={steps}", "--seed=0",
                  "--step_seconds={step_seconds}", "${{args}}"]
        parameters:
          learning_rate: {{distribution: log_uniform_values, min: 0.004, max: 0.06}}
          kl_coef: {{values: [0.01, 0.05, 0.2]}}
        run_cap: {trials}
        """) + ("sampler: {seed: 0, n_startup_trials: 6}\n" if seeded else "")


def _cli(root: Path, *args: str) -> str:
    env = dict(os.environ, TRACKMUX_DIR=str(root), OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "trackmux", *args], env=env, cwd=root,
                          capture_output=True, text=True, check=True)
    return done.stdout


def _agents(root: Path, sweep_id: str, count: int | None, agents: int) -> None:
    env = dict(os.environ, TRACKMUX_DIR=str(root), OPENBLAS_NUM_THREADS="1")
    extra = [] if count is None else ["--count", str(count)]
    procs = [subprocess.Popen([sys.executable, "-m", "trackmux", "agent", sweep_id, *extra],
                              env=env, cwd=root, stdout=subprocess.DEVNULL)
             for _ in range(agents)]
    codes = [p.wait() for p in procs]
    if any(codes):
        raise SystemExit(f"an agent exited with {codes}")


def run_way(name: str, method: str, steps: int, step_seconds: float, trials: int,
            base: Path, agents: int = 1, seeded: bool = True) -> dict[str, Any]:
    root = base / name.replace("+", "-")
    root.mkdir(parents=True)
    path = root / "sweep.yaml"
    path.write_text(sweep_file(method, steps, step_seconds, trials, seeded) + WAYS[name])
    sweep_id = _cli(root, "sweep", "create", str(path)).strip().splitlines()[-1]
    started = time.monotonic()
    _agents(root, sweep_id, trials if agents == 1 else None, agents)
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
                                      "pruned_by", "reason", "found_at_step", "finding")}
                   for t in rows],
    }


def unpruned(params: dict[str, Any], steps: int, seed: int = 0) -> dict[str, float]:
    """A trial's parameters run to the end without pruning or pacing: its final reward
    (mean of the last 10 steps), the peak of that mean and its step, how far it fell from
    it, and how far the reward model's score ends above the verifiable reward (last 20
    steps)."""
    from trackmux.cli.demo import FAILURES
    from trackmux.demo import DemoConfig, train

    class Rewards:
        def __init__(self) -> None:
            self.rewards: list[float] = []
            self.scores: list[float] = []

        def log(self, data: dict[str, Any], step: int | None = None) -> None:
            if "reward/mean" in data:
                self.rewards.append(data["reward/mean"])
                self.scores.append(data.get("reward/model_score", data["reward/mean"]))

        def log_table(self, *args: Any, **kwargs: Any) -> None: ...
        def log_image(self, *args: Any, **kwargs: Any) -> None: ...
        def log_samples(self, *args: Any, **kwargs: Any) -> None: ...

    chosen = {"learning_rate": params["learning_rate"], "kl_coef": params["kl_coef"]}
    config = dataclasses.replace(DemoConfig(steps=steps, seed=seed),
                                 **{**FAILURES["reward-hacking"], **chosen})
    sink = Rewards()
    train(config, sink)
    r = sink.rewards
    smooth = [sum(r[max(0, i - 9):i + 1]) / len(r[max(0, i - 9):i + 1]) for i in range(len(r))]
    gap = [s - v for s, v in zip(sink.scores[-20:], r[-20:], strict=True)]
    return {"final": round(smooth[-1], 4), "peak": round(max(smooth), 4),
            "peak_step": smooth.index(max(smooth)),
            "fell": round(1 - smooth[-1] / max(smooth), 4),
            "score_gap": round(sum(gap) / len(gap), 4)}


#: a setting "goes wrong" when, run to the end, its verifiable reward falls this share
#: from its peak, or ends this far under the reward model's score (hacked from the start)
FELL, GAP = 0.1, 0.4


def _first_findings(setting: tuple[int, float, float], steps: int) -> dict[str, Any]:
    """One setting run to the end (no pacing) into its own root, then the offline
    doctor over it: every finding's rule, severity and step."""
    seed, lr, kl = setting
    with tempfile.TemporaryDirectory(prefix="trackmux-b13g-") as tmp:
        env = dict(os.environ, TRACKMUX_DIR=tmp, OPENBLAS_NUM_THREADS="1")
        subprocess.run([sys.executable, "-m", "trackmux.demo.sweep_trial",
                        "--failure=reward-hacking", f"--learning_rate={lr}",
                        f"--kl_coef={kl}", f"--seed={seed}", f"--steps={steps}"],
                       env=env, check=True, capture_output=True)
        run_id = next((Path(tmp) / "demo-sweep").iterdir()).name
        done = subprocess.run([sys.executable, "-m", "trackmux", "doctor", "--json",
                               "--dir", tmp, run_id], env=env, capture_output=True,
                              text=True, check=False)
    found = [f for line in done.stdout.splitlines() for f in json.loads(line)["findings"]]
    return {"seed": seed, "learning_rate": lr, "kl_coef": kl,
            "findings": [(f["rule"], f["severity"], f["step"]) for f in found],
            **unpruned({"learning_rate": lr, "kl_coef": kl}, steps, seed)}


def grid(steps: int, seeds: int) -> list[dict[str, Any]]:
    """B13g: every setting of the space (14 learning rates x 3 kl_coef x ``seeds``),
    run to the end; what the doctor found in each and when."""
    from concurrent.futures import ThreadPoolExecutor

    rates = [0.004 * (0.06 / 0.004) ** (i / 13) for i in range(14)]
    settings = [(seed, round(lr, 6), kl) for seed in range(seeds) for lr in rates
                for kl in (0.01, 0.05, 0.2)]
    with ThreadPoolExecutor(2) as pool:  # each setting is two programs, one core each
        return list(pool.map(lambda s: _first_findings(s, steps), settings))


def grid_table(rows: list[dict[str, Any]], steps: int) -> str:
    """When the sweeps' default prune would stop each setting, with and without each
    of its rules: the first finding it stops on."""
    from trackmux.sweeps.spec import WRONG_RULES

    wrong = [r for r in rows if r["fell"] >= FELL or r["score_gap"] >= GAP]
    healthy = [r for r in rows if r not in wrong]
    lines = [f"{len(rows)} settings run to {steps} steps: {len(wrong)} go wrong (the "
             f"verifiable reward falls {FELL:.0%} from its peak, or ends {GAP} under the "
             f"reward model's score), {len(healthy)} stay healthy", "",
             "| rules the prune stops on (and any critical finding) | first finding: median "
             "step (mean) | after step 100 | never | on a healthy setting |",
             "|---|---|---|---|---|"]
    ways = [("the default (`WRONG_RULES`)", WRONG_RULES)]
    ways += [(f"the default without `{rule}`", tuple(r for r in WRONG_RULES if r != rule))
             for rule in WRONG_RULES]
    for name, rules in ways:
        def first(row: dict[str, Any], rules: tuple[str, ...] = rules) -> int | None:
            stops = [st for rule, sev, st in row["findings"]
                     if rule in rules or sev == "critical"]
            return min(stops) if stops else None
        hits = [h for h in (first(r) for r in wrong) if h is not None]
        alarms = sum(first(r) is not None for r in healthy)
        mid = f"{statistics.median(hits):.0f} ({statistics.mean(hits):.1f})" if hits else "-"
        lines.append(f"| {name} | {mid} | {sum(h > 100 for h in hits)} | "
                     f"{len(wrong) - len(hits)} | {alarms} |")
    return "\n".join(lines)


def bar(steps: int, step_seconds: float, trials: int, base: Path) -> dict[str, Any]:
    """B13c: the acceptance bar's shape, and what each trial would have become."""
    result = run_way("doctor", "bayes", steps, step_seconds, trials, base, agents=2,
                     seeded=False)
    for t in result["trials"]:
        t["unpruned"] = unpruned(t["params"], steps)
    return result


def bar_table(result: dict[str, Any], steps: int) -> str:
    lines = ["| trial | learning rate | kl_coef | state | steps | value | unpruned final "
             "(peak, fall) | reason |", "|---|---|---|---|---|---|---|---|"]
    for t in sorted(result["trials"], key=lambda t: t["params"]["learning_rate"]):
        u = t["unpruned"]
        value = "-" if t["value"] is None else f"{t['value']:.3f}"
        reason = (t["reason"] or "").split(":")[0]
        lines.append(f"| {t['number']} | {t['params']['learning_rate']:.4f} | "
                     f"{t['params']['kl_coef']} | {t['state']} | {t['steps']} | {value} | "
                     f"{u['final']:.3f} ({u['peak']:.3f}, {u['fell']:.0%}) | {reason} |")
    wrong = [t for t in result["trials"] if t["unpruned"]["fell"] >= 0.1]
    caught = [t for t in wrong if t["state"] == "pruned" and t["steps"] <= steps * 2 // 3]
    healthy = [t for t in result["trials"] if t not in wrong]
    best = result["best"]
    best_healthy = best is not None and best["trial"] in [t["number"] for t in healthy]
    lines.append(f"\ngone wrong (unpruned, the reward falls >= 10% from its peak): "
                 f"{len(wrong)}, pruned by step {steps * 2 // 3}: {len(caught)}; "
                 f"healthy: {len(healthy)}, complete: "
                 f"{sum(t['state'] == 'complete' for t in healthy)}; best trial "
                 f"{best and best['trial']} ({'healthy' if best_healthy else 'NOT healthy'})")
    return "\n".join(lines)


def peak_bound(result: dict[str, Any], steps: int) -> dict[str, Any]:
    """What a pruner spends that stops each trial gone wrong at the step its verifiable
    reward peaks (10-step mean) and runs the others to the end: the least any rule that
    waits for the checked reward to turn can spend. Less needs stopping a trial while its
    reward still rises, before the collapse shows in it."""
    spent, wrong = 0, 0
    for t in result["trials"]:
        u = unpruned(t["params"], steps)
        if u["fell"] >= FELL or u["score_gap"] >= GAP:
            spent, wrong = spent + u["peak_step"] + 1, wrong + 1
        else:
            spent += steps
    return {"steps": spent, "gone_wrong": wrong}


def steps_to(result: dict[str, Any], target: float) -> int | None:
    """Steps the sweep spent until a trial completed with at least ``target`` (trials in
    the order one agent runs them); None if none did."""
    spent = 0
    for t in sorted(result["trials"], key=lambda t: t["number"]):
        spent += t["steps"] or 0
        if t["state"] == "complete" and t["value"] is not None and t["value"] >= target:
            return spent
    return None


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
    if none is not None and none["best"] is not None:
        target = none["best"]["value"] - 5e-5  # as rounded in the table
        reached = ", ".join(f"{r['way']} {n if (n := steps_to(r, target)) is not None else 'never'}"
                            for r in results)
        lines.append(f"| (steps until a trial completes with no pruning's best, "
                     f"{none['best']['value']:.3f}: {reached}) | | | | | | |")
    bound = none.get("peak_bound") if none is not None else None
    if bound is not None:
        lines.append(f"| (bound) each of the {bound['gone_wrong']} trials gone wrong stopped "
                     f"at its reward's peak | | {bound['steps']} | "
                     f"{bound['steps'] / none['steps'] - 1:+.0%} | | | = no pruning's |")
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
    parser.add_argument("--bar", action="store_true",
                        help="the acceptance bar's shape (B13c): bayes, 12 trials, 2 agents")
    parser.add_argument("--grid", action="store_true",
                        help="every setting run to the end, and when the doctor found it "
                             "going wrong (B13g)")
    parser.add_argument("--seeds", type=int, default=3, help="demo seeds of --grid")
    args = parser.parse_args()
    if args.grid:
        rows = grid(args.steps, args.seeds)
        print(grid_table(rows, args.steps))
        if args.out:
            args.out.write_text(json.dumps(rows, indent=1))
        return
    if args.bar:
        with tempfile.TemporaryDirectory(prefix="trackmux-b13c-") as tmp:
            result = bar(args.steps, args.step_seconds, 12, Path(tmp))
        print(table([result]))
        print(bar_table(result, args.steps))
        if args.out:
            args.out.write_text(json.dumps(result, indent=1, default=str))
        return
    results = []
    with tempfile.TemporaryDirectory(prefix="trackmux-b13-") as tmp:
        for way in args.ways.split(","):
            print(f"B13 {way}: {args.trials} trials ...", file=sys.stderr, flush=True)
            results.append(run_way(way, args.method, args.steps, args.step_seconds,
                                   args.trials, Path(tmp)))
            if way == "none":
                results[-1]["peak_bound"] = peak_bound(results[-1], args.steps)
    print(table(results))
    if args.out:
        args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)},
                                        "results": results}, indent=1, default=str))


if __name__ == "__main__":
    main()
