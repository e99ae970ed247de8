"""B9: what tracking costs a TRL GRPO step on CPU: the trackmux callback against
``report_to="wandb"`` (offline) and ``report_to="none"``, the same run in each mode.

    python -m benchmarks.hf_grpo                         # 3 modes x 2 rounds, 30 steps
    python -m benchmarks.hf_grpo --steps 20 --rounds 1 --json b9.json

Each mode runs in a fresh process (wandb and the delivery process start there): a tiny
Llama (2 layers, hidden 32, tests/hf/tiny_hf.py), 4 completions per step, two Python
reward functions, ``logging_steps=1`` and ``log_completions=True`` (so TRL logs its
completions table to wandb in the wandb mode, and the trackmux callback logs the samples
of each step). Measured per step, after 3 warm-up steps:

- ``log``: the time inside ``trainer.log`` (TRL's ``log``: the Trainer's logging, every
  callback's ``on_log``, TRL's completions parquet and, with wandb, its ``wandb.Table``);
  the tracker's overhead per step is this minus the same in the ``none`` mode;
- ``on_log``: the time inside the callbacks' ``on_log`` alone;
- ``step``: wall time from one step's start to the next (the whole step: generation,
  rewards, loss, optimizer, logging), noisy on a shared machine.

The trackmux mode sends to the wandb backend (offline), so both tracked modes end in the
same kind of wandb run. Needs ``trl``, ``transformers``, ``accelerate``, ``wandb``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODES = ("none", "wandb", "trackmux")
WARMUP = 3


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def one(mode: str, steps: int, work: Path) -> dict[str, Any]:
    """Run GRPO once in this process in ``mode``; per-step timings in seconds."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "hf"))
    from tiny_hf import build_dataset, build_model, build_tokenizer, reward_colour, reward_length
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    tok = build_tokenizer()
    args = GRPOConfig(output_dir=str(work / "out"), max_steps=steps,
                      per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=8, logging_steps=1, save_strategy="no",
                      report_to="wandb" if mode == "wandb" else "none", use_cpu=True,
                      learning_rate=1e-3, disable_tqdm=True, seed=0, run_name=f"b9-{mode}",
                      log_completions=True, num_completions_to_print=0)
    trainer = GRPOTrainer(model=build_model(len(tok)), args=args, processing_class=tok,
                          reward_funcs=[reward_length, reward_colour],
                          train_dataset=build_dataset(steps * 4))
    if mode == "trackmux":
        from trackmux.integrations.transformers import TrackmuxCallback

        trainer.add_callback(TrackmuxCallback(trainer, project="b9", backends=["wandb"]))
    starts: list[float] = []
    log_times: list[float] = []
    on_log_times: list[float] = []

    class Clock(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            starts.append(time.perf_counter())

    trainer.add_callback(Clock())
    log = trainer.log
    handler_on_log = trainer.callback_handler.on_log

    def timed_log(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return log(*a, **k)
        finally:
            log_times.append(time.perf_counter() - t0)

    def timed_on_log(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return handler_on_log(*a, **k)
        finally:
            on_log_times.append(time.perf_counter() - t0)

    trainer.log = timed_log
    trainer.callback_handler.on_log = timed_on_log
    t0 = time.perf_counter()
    trainer.train()
    total = time.perf_counter() - t0
    step_times = [b - a for a, b in itertools.pairwise(starts)][WARMUP:]
    # the last log() is the end-of-training summary, not a step's
    per_step_log = log_times[WARMUP:steps]
    per_step_on_log = on_log_times[WARMUP:steps]
    return {"mode": mode, "steps": steps, "train_s": total,
            "step_median_s": _median(step_times),
            "log_median_s": _median(per_step_log), "on_log_median_s": _median(per_step_on_log),
            "log_max_s": max(per_step_log), "end_of_train_log_s": log_times[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.one:
        with tempfile.TemporaryDirectory() as work:
            result = one(opts.one, opts.steps, Path(work))
        opts.out.write_text(json.dumps(result))
        return
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true",
                   WANDB_DIR=tmp, WANDB_DATA_DIR=tmp, WANDB_CACHE_DIR=tmp,
                   WANDB_CONFIG_DIR=tmp, TRACKMUX_DIR=os.path.join(tmp, "spool"),
                   HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", DO_NOT_TRACK="1")
        for round_ in range(opts.rounds):
            order = MODES if round_ % 2 == 0 else tuple(reversed(MODES))
            for mode in order:
                out = Path(tmp) / f"{mode}-{round_}.json"
                subprocess.run([sys.executable, "-m", "benchmarks.hf_grpo", "--one", mode,
                                "--steps", str(opts.steps), "--out", str(out)],
                               env=env, check=True, stdout=subprocess.DEVNULL)
                result = json.loads(out.read_text())
                result["round"] = round_
                results.append(result)
                print(json.dumps(result), flush=True)
    base = _median([r["log_median_s"] for r in results if r["mode"] == "none"])
    print(f"\n{'mode':<10} {'log() median':>13} {'overhead/step':>14} {'on_log median':>14} "
          f"{'step median':>12}")
    for mode in MODES:
        rows = [r for r in results if r["mode"] == mode]
        log_ms = _median([r["log_median_s"] for r in rows]) * 1e3
        print(f"{mode:<10} {log_ms:>10.2f} ms {log_ms - base * 1e3:>11.2f} ms "
              f"{_median([r['on_log_median_s'] for r in rows]) * 1e3:>11.2f} ms "
              f"{_median([r['step_median_s'] for r in rows]) * 1e3:>9.0f} ms")
    if opts.json:
        opts.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
