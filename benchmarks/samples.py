"""The rollout ledger (issue 23): what ``log_samples`` costs the trainer, what it costs the
disk, and how fast one step reads back.

    python -m benchmarks.samples cost   [--repeat 15]     # trainer thread, per call
    python -m benchmarks.samples growth [--steps 5]       # spool bytes per step
    python -m benchmarks.samples read   [--steps 500]     # trackmux samples --step N

The batch is the issue's: 1,024 samples (128 GRPO groups of 8; a prompt of ~600
characters per group, a response of ~8,000 characters per sample), reward, advantage,
two reward components, uid, data source and policy version, and 3 per-token arrays of
1,024 x 2,048 (logprob, ref_logprob, entropy) as torch float32 (``--input`` numpy,
torch, torch-bf16), every sample using all 2,048 tokens (``--ragged``: lengths drawn in
1..2,048, passed as ``token_lengths``; ``--ragged --layout list``: the same lengths as a
list of one array or tensor per sample, each of its own length, the natural form for
responses of different lengths, issue 33.21). Token values are drawn like real ones (logprobs
= -|N(0, 1.5)|, entropy = |N(0, 1)|), so the compression measured is realistic, not
that of constant arrays.

- cost: median and p99 of the time ``log_samples`` takes in the caller's thread (no
  backend: spool only), with a pause between calls so the spool writer is idle, as it is
  between training steps; and the time the spool writer's thread then needs to pack,
  hash and commit the batch (off the caller's thread, but in the trainer's process).
- growth: the spool's size per step (SQLite file after each step's commit), token arrays
  as float16 (default) and float32, and how much the payload's zlib saved.
- read: a run of ``--steps`` such steps, then ``trackmux samples RUN --step N`` (a fresh
  process, as a person runs it) for a step in the middle; the time of the whole command.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import offline_env, stats

SAMPLES, TOKENS, GROUP = 1024, 2048, 8


def batch(step: int, text: bool = True) -> dict[str, Any]:
    rnd = random.Random(step)
    words = ["the", "answer", "is", "therefore", "we", "compute", "sum", "of", "x", "="]
    prompts = [" ".join(rnd.choice(words) for _ in range(120)) for _ in range(SAMPLES // GROUP)]
    return {
        "prompt": [prompts[i // GROUP] for i in range(SAMPLES)],
        "response": [f"{step}-{i} " + " ".join(rnd.choice(words) for _ in range(1600))
                     if text else f"r{i}" for i in range(SAMPLES)],
        "reward": [rnd.random() for _ in range(SAMPLES)],
        "reward/acc": [float(rnd.random() > 0.5) for _ in range(SAMPLES)],
        "reward/format": [rnd.random() for _ in range(SAMPLES)],
        "advantage": [rnd.gauss(0, 1) for _ in range(SAMPLES)],
        "uid": [f"g{step}-{i // GROUP}" for i in range(SAMPLES)],
        "data_source": ["gsm8k" if i % 3 else "math" for i in range(SAMPLES)],
        "policy_version": [step] * SAMPLES,
    }


def as_list(arrays: dict[str, Any], lens: list[int] | None) -> dict[str, Any]:
    """Each padded array as a list of per-sample rows cut to their lengths (views)."""
    widths = lens or [TOKENS] * SAMPLES
    return {k: [v[i, :n] for i, n in enumerate(widths)] for k, v in arrays.items()}


def tokens(step: int, kind: str) -> dict[str, Any]:
    import numpy as np

    gen = np.random.default_rng(step)
    arrays = {"logprob": -np.abs(gen.normal(0, 1.5, (SAMPLES, TOKENS))),
              "ref_logprob": -np.abs(gen.normal(0, 1.5, (SAMPLES, TOKENS))),
              "entropy": np.abs(gen.normal(0, 1.0, (SAMPLES, TOKENS)))}
    arrays = {k: v.astype(np.float32) for k, v in arrays.items()}
    if kind == "numpy":
        return arrays
    import torch

    dtype = torch.bfloat16 if kind == "torch-bf16" else torch.float32
    return {k: torch.from_numpy(v).to(dtype) for k, v in arrays.items()}


def lengths(step: int, ragged: bool) -> list[int] | None:
    if not ragged:
        return None
    rnd = random.Random(-step - 1)
    return [rnd.randint(1, TOKENS) for _ in range(SAMPLES)]


def bench_cost(repeat: int, kind: str, ragged: bool, dtype: str,
               layout: str = "padded") -> dict[str, Any]:
    import trackmux

    with tempfile.TemporaryDirectory() as tmp:
        run = trackmux.init(project="bench", backends=[], dir=tmp)
        inputs = [(batch(s), tokens(s, kind), lengths(s, ragged)) for s in range(3)]
        if layout == "list":  # one array per sample, no token_lengths
            inputs = [(c, as_list(t, n), None) for c, t, n in inputs]
        times, writer = [], []
        for i in range(repeat):
            cols, toks, lens = inputs[i % len(inputs)]
            run._spool.flush(60)  # the writer is idle between steps, as in training
            time.sleep(0.2)
            start = time.perf_counter_ns()
            run.log_samples("rollouts", cols, step=i, tokens=toks, token_lengths=lens,
                            token_dtype=dtype)
            done = time.perf_counter_ns()
            times.append(done - start)
            run._spool.flush(60)  # the spool writer's thread: pack, hash, commit
            writer.append(time.perf_counter_ns() - done)
        run.finish(timeout=120)
    result = stats(times)
    behind = stats(writer)
    return {"input": kind, "ragged": ragged, "layout": layout, "token_dtype": dtype,
            "median_ms": result["median_us"] / 1000, "p90_ms": result["p90_us"] / 1000,
            "p99_ms": result["p99_us"] / 1000,
            "max_ms": result["max_us"] / 1000, "calls": repeat,
            "spool_writer_ms_median": behind["median_us"] / 1000}


def _spool_bytes(run_dir: Path) -> int:
    return sum(p.stat().st_size for p in run_dir.glob("spool.db*"))


def bench_growth(steps: int, dtype: str) -> dict[str, Any]:
    import sqlite3

    import trackmux
    from trackmux.core.spool import samplepack

    with tempfile.TemporaryDirectory() as tmp:
        run = trackmux.init(project="bench", backends=[], dir=tmp)
        run._spool.flush(60)
        base = _spool_bytes(run.dir)
        for s in range(steps):
            run.log_samples("rollouts", batch(s), step=s, tokens=tokens(s, "numpy"),
                            token_dtype=dtype)
            run._spool.flush(120)
        run.finish(timeout=120)
        conn = sqlite3.connect(run.dir / "spool.db")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        total = _spool_bytes(run.dir) - base
        payloads = [bytes(r[0]) for r in conn.execute("SELECT data FROM blobs")]
        header, _ = samplepack.read_header(payloads[0])
        raw_tokens = sum(SAMPLES * TOKENS * (2 if dtype == "float16" else 4) for _ in range(3))
        stored_tokens = sum(t["bytes"] for t in header["tokens"])
        conn.close()
    return {"token_dtype": dtype, "steps": steps, "mb_per_step": total / steps / 1e6,
            "payload_mb": len(payloads[0]) / 1e6,
            "token_arrays_raw_mb": raw_tokens / 1e6,
            "token_arrays_stored_mb": stored_tokens / 1e6,
            "token_sections_zlib": [t["zlib"] for t in header["tokens"]],
            "text_raw_mb": sum(len(x) for c in ("prompt", "response")
                               for x in batch(0)[c]) / 1e6}


def bench_read(steps: int, keep: str) -> dict[str, Any]:
    import trackmux

    tmp = keep or tempfile.mkdtemp()
    env = offline_env(Path(tmp) / "env")
    runs = sorted(Path(tmp).glob("bench/*/spool.db"))
    write_s = None
    if runs:  # --keep: a run of this benchmark written before
        run_dir = runs[0].parent
    else:
        run = trackmux.init(project="bench", backends=[], dir=tmp)
        cols = [batch(s) for s in range(4)]
        start = time.perf_counter()
        for s in range(steps):
            run.log_samples("rollouts", {**cols[s % 4], "policy_version": [s] * SAMPLES},
                            step=s, tokens=tokens(s, "numpy"))
            run._spool.flush(120)
        run.finish(timeout=300)
        write_s = round(time.perf_counter() - start, 1)
        run_dir = run.dir
    size = _spool_bytes(run_dir)
    cli = [sys.executable, "-c", "from trackmux.cli.main import main; main()", "samples"]
    times = {}
    middle = str(steps // 2)
    for args in (["--step", middle], ["--step", middle, "--where",
                 "reward < 0.2 and length > 100", "--sort", "-advantage"],
                 ["--step", middle, "--json", "--tokens"]):
        runs_s = []
        for _ in range(3):
            begin = time.perf_counter()
            out = subprocess.run([*cli, str(run_dir), *args], capture_output=True, env=env,
                                 check=True)
            runs_s.append(time.perf_counter() - begin)
        times[" ".join(args)] = {"seconds_median_of_3": round(sorted(runs_s)[1], 3),
                                 "output_bytes": len(out.stdout)}
    startup = []
    for _ in range(3):
        begin = time.perf_counter()
        subprocess.run([*cli, "--help"], env=env, check=True, capture_output=True)
        startup.append(time.perf_counter() - begin)
    from trackmux.samples.read import Ledger

    begin = time.perf_counter()
    with Ledger(run_dir) as ledger:
        found = ledger.step("rollouts", steps // 2, tokens=False)
    in_process = time.perf_counter() - begin
    assert found is not None and found.count == SAMPLES
    return {"steps": steps, "spool_gb": round(size / 1e9, 2), "write_s": write_s,
            "run_dir": str(run_dir), "commands": times,
            "cli_startup_s_median_of_3": round(sorted(startup)[1], 3),
            "in_process_read_one_step_s": round(in_process, 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("cost", "growth", "read"))
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--input", default="torch", choices=("numpy", "torch", "torch-bf16"))
    ap.add_argument("--ragged", action="store_true")
    ap.add_argument("--layout", default="padded", choices=("padded", "list"),
                    help="cost: 2-D arrays (padded), or a list of per-sample rows")
    ap.add_argument("--token-dtype", default="float16", choices=("float16", "float32"))
    ap.add_argument("--keep", default="", help="read: write the run here, or reuse it")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    os.environ.setdefault("TRACKMUX_DISABLE_PLUGIN_AUTOLOAD", "1")
    if args.what == "cost":
        result = bench_cost(args.repeat, args.input, args.ragged, args.token_dtype,
                            args.layout)
    elif args.what == "growth":
        result = bench_growth(args.steps or 5, args.token_dtype)
    else:
        result = bench_read(args.steps or 500, args.keep)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
