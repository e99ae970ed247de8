"""B16: how soon a run stops after the doctor's finding (issue 45, ``stop_on``).

    python -m benchmarks.doctor_stop [--repeats 5] [--step-times 0.01,0.1,0.5] [--out F]

- B16a a custom loop (``run.should_stop`` read at every step boundary) logs a NaN at step
  50; the nonfinite finding is complete at that ``log()``, so the time from it to the first
  step boundary that sees the flag is the finding-to-stop latency: seconds and steps, per
  step time, with process delivery (the default) and thread delivery;
- B16b the same loop whose reward collapses at step 100 (``reward_collapse`` needs a few
  steps of evidence): steps from the collapse to the stop, the rule's own delay included;
- B16c a transformers Trainer (a tiny Llama built from a config, CPU) whose weights go NaN
  after step 5, with ``TrackmuxCallback(doctor={"stop_on": "critical"})``: the steps and
  seconds from the NaN step to ``checkpoint-N`` and the end of ``train()`` (skipped where
  transformers is not installed).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NAN_AT = 50
COLLAPSE_AT = 100
MAX_STEPS = 100_000


def custom_loop(root: Path, step_time: float, delivery: str, fault: str) -> dict[str, Any]:
    import random

    import trackmux

    run = trackmux.init(project="b16", backends=[], dir=root, delivery=delivery,
                        doctor={"stop_on": "critical"})
    assert isinstance(run, trackmux.Run)
    rng = random.Random(0)
    fault_at = NAN_AT if fault == "nan" else COLLAPSE_AT
    fault_time = None
    step = 0
    for step in range(MAX_STEPS):  # the step the loop stopped at is kept
        if fault == "nan":
            data = {"loss": math.nan if step >= NAN_AT else 1.0 / (1 + step),
                    "critic/score/mean": 0.5 + rng.gauss(0, 0.02)}
        else:
            level = (0.1 + 0.7 * (1 - math.exp(-4 * step / COLLAPSE_AT)) if step < COLLAPSE_AT
                     else 0.15)
            data = {"loss": 1.0, "critic/score/mean": level + rng.gauss(0, 0.04)}
        time.sleep(step_time)  # the step's work
        run.log(data, step=step)
        if step == fault_at:
            fault_time = time.monotonic()
        if run.should_stop:  # the step boundary
            break
    stopped = time.monotonic()
    reason = run.stop_reason or {}
    summary = run.finish(timeout=60)
    assert fault_time is not None
    return {"steps": step - fault_at, "seconds": round(stopped - fault_time, 3),
            "rule": reason.get("rule"), "state": summary.status}


def trainer_case(root: Path) -> dict[str, Any] | None:
    try:
        import torch
        from transformers import Trainer, TrainerCallback, TrainingArguments
    except ImportError:
        return None
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "hf"))
    from tiny_hf import build_model

    from trackmux.integrations.transformers import TrackmuxCallback

    class Rows(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 64

        def __getitem__(self, i: int) -> dict[str, Any]:
            ids = torch.tensor([3 + (i + j) % 20 for j in range(8)])
            return {"input_ids": ids, "labels": ids.clone()}

    marks: dict[str, float] = {}

    class Nan(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None,
                        **kwargs: Any) -> None:
            if state.global_step == 5:
                with torch.no_grad():
                    for parameter in model.parameters():
                        parameter.fill_(math.nan)
                marks["nan"] = time.monotonic()

    os.environ["TRACKMUX_DIR"] = str(root / "spool")
    args = TrainingArguments(output_dir=str(root / "out"), max_steps=MAX_STEPS,
                             per_device_train_batch_size=4, logging_steps=1, report_to="none",
                             use_cpu=True, disable_tqdm=True, save_strategy="no",
                             logging_nan_inf_filter=False)
    trainer = Trainer(model=build_model(30), args=args, train_dataset=Rows())
    trainer.add_callback(TrackmuxCallback(trainer, project="b16", backends=[],
                                          doctor={"stop_on": "critical"}))
    trainer.add_callback(Nan())
    trainer.train()
    ended = time.monotonic()
    step = trainer.state.global_step
    return {"steps": step - 6, "seconds": round(ended - marks["nan"], 3),
            "checkpoint": (root / "out" / f"checkpoint-{step}").is_dir()}


def summary(cases: list[dict[str, Any]]) -> dict[str, Any]:
    steps = [c["steps"] for c in cases]
    seconds = [c["seconds"] for c in cases]
    return {"steps_median": statistics.median(steps), "steps_max": max(steps),
            "seconds_median": round(statistics.median(seconds), 3),
            "seconds_max": round(max(seconds), 3), "runs": cases}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--step-times", default="0.01,0.1,0.5")
    parser.add_argument("--only", default="a,b,c")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    step_times = [float(t) for t in args.step_times.split(",")]
    result: dict[str, Any] = {"load": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="trackmux-b16-") as tmp:
        root = Path(tmp)
        if "a" in args.only:
            for delivery in ("process", "thread"):
                for step_time in step_times:
                    cases = [custom_loop(root / f"a-{delivery}-{step_time}-{i}", step_time,
                                         delivery, "nan") for i in range(args.repeats)]
                    s = result[f"B16a {delivery} {step_time}s"] = summary(cases)
                    print(f"B16a NaN -> should_stop, {delivery} delivery, steps of "
                          f"{step_time * 1000:.0f} ms: median {s['seconds_median']} s / "
                          f"{s['steps_median']} steps (max {s['seconds_max']} s / "
                          f"{s['steps_max']} steps; {args.repeats} runs)", flush=True)
        if "b" in args.only:
            cases = [custom_loop(root / f"b-{i}", 0.01, "process", "collapse")
                     for i in range(args.repeats)]
            s = result["B16b collapse 0.01s"] = summary(cases)
            print(f"B16b reward collapse at step {COLLAPSE_AT} -> should_stop (rule "
                  f"{cases[0]['rule']}), steps of 10 ms: median {s['steps_median']} steps / "
                  f"{s['seconds_median']} s (max {s['steps_max']} / {s['seconds_max']} s)",
                  flush=True)
        if "c" in args.only:
            cases = []
            for i in range(args.repeats):
                case = trainer_case(root / f"c-{i}")
                if case is None:
                    print("B16c skipped: transformers is not installed", flush=True)
                    break
                cases.append(case)
            if cases:
                s = result["B16c trainer"] = summary(cases)
                print(f"B16c transformers Trainer, NaN at step 6 -> checkpoint-N and out of "
                      f"train(): median {s['steps_median']} steps / {s['seconds_median']} s "
                      f"(max {s['steps_max']} / {s['seconds_max']} s; checkpoints "
                      f"{sum(c['checkpoint'] for c in cases)}/{len(cases)})", flush=True)
    result["load_after"] = os.getloadavg()[0]
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
