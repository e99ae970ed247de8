"""Agentic trajectories in the ledger (issue 37): what ``log_samples`` of conversations costs
the trainer, the spool's growth per step, and how fast the conversation view opens a step.

    python -m benchmarks.trajectories cost   [--repeat 30] [--logprobs 0]
    python -m benchmarks.trajectories growth [--steps 10]
    python -m benchmarks.trajectories view   [--chromium /usr/bin/chromium]

The batch is the issue's: 256 trajectories of 8 tool turns, 64 GRPO groups of 4. Each
trajectory: a system prompt (~400 characters, the same for all), a task (~300), then 8
times an assistant message (~200 characters of reasoning, one tool call with JSON
arguments, per-turn reward, latency and token count, and ``--logprobs`` per-token
logprobs, 32 by default) and the tool's result (~600 characters, one in ten an error),
then a final answer: 19 messages. Text is drawn from a small vocabulary with numbers in
it, so zlib meets about what it meets in real tool output, not a constant string.

- cost: median, p90 and p99 of the time ``log_samples`` takes in the caller's thread (no
  backend: spool only), with the spool writer idle between calls as between training
  steps; the CPU time of the caller's thread in the call (what it costs without other
  processes taking the cores; the load average is printed beside it); and the writer
  thread's time to pack and commit (off the caller's thread).
- growth: spool bytes per step (SQLite file after each step's commit, WAL checkpointed)
  against the canonical JSON's size.
- view: one such step (all 256, as ``trackmux ui`` serves a step) drawn by the sample
  browser and its conversation view in headless Chromium (Playwright): the time from
  ``mount`` to the first frame painted after it, and to the frame after the conversations
  near the screen were built and painted too (median of 5 page loads each).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import stats

TRAJECTORIES, TURNS, GROUP = 256, 8, 4
TOOLS = ("search", "python", "browse", "calculator")
WORDS = ("the", "result", "of", "query", "returned", "value", "row", "error", "file", "line",
         "def", "return", "import", "x", "=", "page", "title", "link", "score", "id")


def _text(rnd: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = rnd.choice(WORDS) if rnd.random() < 0.8 else str(rnd.randint(0, 99999))
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def trajectory(rnd: random.Random, system: str, logprobs: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                      {"role": "user", "content": _text(rnd, 300)}]
    for turn in range(TURNS):
        tool = rnd.choice(TOOLS)
        call = {"id": f"call_{turn}_{rnd.randint(0, 1 << 30):x}", "name": tool,
                "arguments": json.dumps({"query": _text(rnd, 40), "k": rnd.randint(1, 10)})}
        assistant: dict[str, Any] = {
            "role": "assistant", "content": _text(rnd, 200), "tool_calls": [call],
            "reward": round(rnd.random(), 3), "latency_ms": round(rnd.uniform(50, 900), 1),
            "tokens": rnd.randint(40, 120)}
        if logprobs:
            assistant["logprobs"] = [-abs(rnd.gauss(0, 1.5)) for _ in range(logprobs)]
        messages.append(assistant)
        failed = rnd.random() < 0.1
        messages.append({"role": "tool", "tool_call_id": call["id"], "name": tool,
                         "status": "error" if failed else "ok", "content": _text(rnd, 600)})
    messages.append({"role": "assistant", "content": _text(rnd, 250), "reward": 1.0,
                     "latency_ms": 300.0, "tokens": 80})
    return messages


def batch(step: int, logprobs: int = 32) -> dict[str, Any]:
    rnd = random.Random(step)
    system = _text(random.Random(0), 400)
    return {"messages": [trajectory(rnd, system, logprobs) for _ in range(TRAJECTORIES)],
            "uid": [f"g{step}-{i // GROUP}" for i in range(TRAJECTORIES)],
            "reward": [rnd.random() for _ in range(TRAJECTORIES)]}


def bench_cost(repeat: int, logprobs: int) -> dict[str, Any]:
    import trackmux

    with tempfile.TemporaryDirectory() as tmp:
        run = trackmux.init(project="bench", backends=[], dir=tmp)
        inputs = [batch(s, logprobs) for s in range(3)]
        times, cpu, writer = [], [], []
        for i in range(repeat):
            run._spool.flush(60)  # the writer is idle between steps, as in training
            time.sleep(0.1)
            start, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
            run.log_samples("agent/rollouts", inputs[i % len(inputs)], step=i)
            done = time.perf_counter_ns()
            cpu.append(time.thread_time_ns() - start_cpu)
            times.append(done - start)
            run._spool.flush(60)
            writer.append(time.perf_counter_ns() - done)
        run.finish(timeout=120)
        problems = dict(run.samples_problems)
    ordered = sorted(times)
    result = stats(times)
    return {"trajectories": TRAJECTORIES, "tool_turns": TURNS, "logprobs_per_turn": logprobs,
            "calls": repeat, "median_ms": result["median_us"] / 1000,
            "p90_ms": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] / 1e6,
            "p99_ms": result["p99_us"] / 1000, "max_ms": result["max_us"] / 1000,
            "cpu_ms_median": stats(cpu)["median_us"] / 1000,
            "load_average_1min": os.getloadavg()[0],
            "spool_writer_ms_median": stats(writer)["median_us"] / 1000,
            "problems": problems}


def _spool_bytes(run_dir: Path) -> int:
    return sum(p.stat().st_size for p in run_dir.glob("spool.db*"))


def bench_growth(steps: int, logprobs: int) -> dict[str, Any]:
    import orjson

    import trackmux

    with tempfile.TemporaryDirectory() as tmp:
        run = trackmux.init(project="bench", backends=[], dir=tmp)
        run._spool.flush(60)
        base = _spool_bytes(run.dir)
        raw = 0
        for s in range(steps):
            cols = batch(s, logprobs)
            raw += sum(len(orjson.dumps(m)) for m in cols["messages"])
            run.log_samples("agent/rollouts", cols, step=s)
            run._spool.flush(120)
        run.finish(timeout=120)
        conn = sqlite3.connect(run.dir / "spool.db")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        total = _spool_bytes(run.dir) - base
    return {"steps": steps, "logprobs_per_turn": logprobs,
            "json_mb_per_step": round(raw / steps / 1e6, 3),
            "spool_mb_per_step": round(total / steps / 1e6, 3),
            "ratio": round(raw / max(1, total), 2)}


def bench_view(chromium: str, repeat: int) -> dict[str, Any]:
    """One step of 256 trajectories (the UI's full step payload, as ``trackmux ui`` serves
    it) drawn by the sample browser and its conversation view in headless Chromium: the
    time from ``mount`` to the first frame painted after it (layout included)."""
    import orjson
    from playwright.sync_api import sync_playwright

    import trackmux
    from trackmux.samples.read import step_payload

    tmp = Path(tempfile.mkdtemp())
    run = trackmux.init(project="bench", backends=[], dir=tmp)
    run.log_samples("agent/rollouts", batch(1), step=1)
    run.finish(timeout=120)
    payload = step_payload(run.dir, "agent/rollouts", 1)
    assets = Path(trackmux.__file__).parent / "report" / "assets"
    css = (assets / "samples.css").read_text() + (assets / "conversation.css").read_text()
    scripts = (assets / "conversation.js").read_text() + (assets / "samples.js").read_text()
    page_file = tmp / "view.html"
    page_file.write_text(
        f"<!doctype html><meta charset=utf-8><style>{css}</style><div id=m></div>"
        f"<script>{scripts}</script><script>window.PAYLOAD = "
        f"{orjson.dumps(payload).decode().replace('<', chr(92) + 'u003c')};</script>",
        encoding="utf-8")
    measure = """() => new Promise(done => {
        const root = document.getElementById('m');
        const start = performance.now();
        window.trackmuxSamples.mount(root, window.PAYLOAD, {});
        const built = performance.now() - start;
        void document.body.offsetHeight;
        const laid = performance.now() - start;
        requestAnimationFrame(() => setTimeout(() => {
            const first = performance.now() - start;
            const drawn = root.querySelectorAll('.tm-msg, .tm-fold').length;
            /* then the conversations near the screen, built by the observer, painted */
            requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(() => done({
                ms: first, settled_ms: performance.now() - start, built: built, laid: laid,
                conversations: root.querySelectorAll('.tm-conv').length,
                bubbles_first_frame: drawn,
                bubbles_settled: root.querySelectorAll('.tm-msg, .tm-fold').length}), 0)));
        }, 0));
    })"""
    times, settled, last = [], [], {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for _ in range(repeat):
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(page_file.as_uri())
            last = page.evaluate(measure)
            times.append(last["ms"])
            settled.append(last["settled_ms"])
            page.close()
        browser.close()
    ordered = sorted(times)
    return {"trajectories": last.get("conversations"),
            "settled_median_ms": round(sorted(settled)[len(settled) // 2], 1),
            "payload_mb": round(len(orjson.dumps(payload)) / 1e6, 2), "opens": repeat,
            "median_ms": round(ordered[len(ordered) // 2], 1),
            "max_ms": round(ordered[-1], 1), "last_open": last,
            "load_average_1min": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("cost", "growth", "view"))
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--logprobs", type=int, default=32)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    os.environ.setdefault("TRACKMUX_DISABLE_PLUGIN_AUTOLOAD", "1")
    if args.what == "cost":
        result = bench_cost(args.repeat, args.logprobs)
    elif args.what == "growth":
        result = bench_growth(args.steps, args.logprobs)
    else:
        result = bench_view(args.chromium, min(args.repeat, 5))  # 5 page loads
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
