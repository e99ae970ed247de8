"""B7: what tracking costs a CPU-bound training loop, not one call.

    python -m benchmarks.loop [--steps 400] [--rounds 3] [--pair-rounds 0] [--log-every 1]
    python -m benchmarks --only B7            # as one session of the benchmark run

The loop stands in for an RL trainer's Python-heavy step (about 9 ms here): it scores
256 generated strings in Python and runs a few matrix products on one BLAS thread. Every
step logs 100 floats; every 10th step also logs a 16-row table of samples. The loop
runs, each time in a fresh process, with:

- ``none``: no tracking;
- ``trackmux``: delivery process (the default), backends wandb (offline), mlflow
  (SQLite) and tensorboard; the loop starts the moment ``init()`` returns, so it runs
  beside the backends' start-up in the delivery process (importing mlflow and creating
  its database alone take about 4 s of CPU, longer than the loop);
- ``trackmux-warm``: the same, but the loop starts once every backend has opened its run
  and acknowledged the config event: the steady state of a long run, where start-up
  overlaps the trainer's own (model loading, a first validation);
- ``trackmux-thread``: the same with ``delivery="thread"`` (backends on threads here);
- ``trackmux-spool``: trackmux with no backend, so what the trainer's process pays
  (``log()``, the spool writer thread) without any delivery work beside it;
- ``verl``: verl's own ``Tracking`` with the same three backends, when verl is installed.

Modes alternate within each round (reversed every other round), so machine load and
order hit all of them alike. The figures: each mode's median loop time over the rounds,
as overhead in % over ``none``; each round's overhead against the untracked loop of the
same round (median, 90% bootstrap interval); the share of the loop spent in trackmux's
calls and threads; peak RSS; and the time from ``log()`` until each backend acknowledged
the event (50 probes after the loop; with ``--watch`` every event of the loop too).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import offline_env, payload, rss_kb

BACKENDS = ["wandb", "mlflow", "tensorboard"]
TABLE_EVERY = 10
PROBES = 50


class Workload:
    """A trainer-like step: Python string work plus small matmuls on one thread."""

    def __init__(self) -> None:
        import numpy as np

        rng = np.random.default_rng(0)
        self.np = np
        self.a = rng.standard_normal((192, 192))
        self.b = rng.standard_normal((192, 192))
        self.texts = [" ".join(f"tok{(i * 7 + j) % 101}" for j in range(60))
                      for i in range(256)]

    def step(self, step: int) -> tuple[list[float], float]:
        scores = []
        for i, text in enumerate(self.texts):
            words = text.split()
            hits = sum(1 for w in words if w.endswith(str((step + i) % 10)))
            scores.append(hits / len(words) + len(set(words)) * 1e-3)
        c = self.a
        for _ in range(4):
            c = self.np.tanh(c @ self.b * 0.01)
        return scores, float(c.mean())


def _table(step: int, scores: list[float]) -> tuple[list[str], list[list[Any]]]:
    rows = [[f"prompt {step}-{i}", f"response {step}-{i} " * 8, scores[i], i % 3 == 0]
            for i in range(16)]
    return ["prompt", "response", "reward", "correct"], rows


def _trackmux(mode: str, root: Path) -> Any:
    import trackmux

    backends = [] if mode == "trackmux-spool" else BACKENDS
    options = {"wandb": {"mode": "offline", "dir": str(root / "wandb")},
               "mlflow": {"tracking_uri": f"sqlite:///{root / 'mlflow.db'}"},
               "tensorboard": {"root": str(root / "tensorboard")}}
    return trackmux.init(
        project="b7", name=mode, backends=backends, dir=root / "spool",
        delivery="thread" if mode == "trackmux-thread" else "process",
        config={"trainer": {"total_steps": 400}, "actor": {"lr": 1e-6}},
        backend_options={b: options[b] for b in backends})


def _verl(root: Path) -> Any:
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{root / 'mlflow-verl.db'}"
    from verl.utils.tracking import Tracking

    return Tracking(project_name="b7", experiment_name="verl", default_backend=BACKENDS,
                    config={"trainer": {"total_steps": 400}, "actor": {"lr": 1e-6}})


def one(mode: str, steps: int, root: Path, log_every: int = 1, watch_acks: bool = False
        ) -> dict[str, Any]:
    """Run the loop once in this process with ``mode``; return its figures."""
    root = root.resolve()
    os.chdir(root)  # mlflow's SQLite store puts artifacts under ./mlruns: keep them here
    work = Workload()
    work.step(0)  # warm numpy
    tracker: Any = None
    if mode.startswith("trackmux"):
        tracker = _trackmux(mode, root)
        if mode == "trackmux-warm":
            from benchmarks.common import wait_delivered

            wait_delivered(tracker, 300)
    elif mode == "verl":
        tracker = _verl(root)
    # the watcher's thread costs the loop a little: latency rounds only (--watch)
    watch = _AckWatch(tracker) if watch_acks and mode.startswith("trackmux") else None
    logged: list[float] = []  # when each event was logged; event k has seq first_seq + k
    in_calls = 0.0  # seconds the loop spent inside the tracker's calls
    rss_start = rss_kb()[0]
    cpu_start = _cpu_s()
    threads_start = _other_threads_cpu_s()
    delivery_pid = getattr(tracker, "delivery_pid", None) if mode != "verl" else None
    delivery_start = _proc_cpu_s(delivery_pid) if delivery_pid else None
    start = time.perf_counter()
    for step in range(steps):
        scores, loss = work.step(step)
        metrics = payload(step)
        metrics["train/loss"] = loss
        if tracker is not None and step % log_every == 0:
            t0 = time.perf_counter()
            if mode == "verl":
                tracker.log(data=metrics, step=step)
            else:
                tracker.log(metrics, step=step)
                logged.append(time.perf_counter())
            if step % (TABLE_EVERY * log_every) == 0 and mode != "verl":
                columns, rows = _table(step, scores)
                tracker.log_table("val/generations", columns, rows, step=step)
                logged.append(time.perf_counter())
            elif step % (TABLE_EVERY * log_every) == 0:  # verl's ValidationGenerationsLogger
                from verl.utils.tracking import ValidationGenerationsLogger

                samples = [(r[0], r[1], r[2]) for r in _table(step, scores)[1]]
                ValidationGenerationsLogger("b7", "verl").log(BACKENDS, samples, step)
            in_calls += time.perf_counter() - t0
    loop = time.perf_counter() - start
    out: dict[str, Any] = {"mode": mode, "loop_s": loop, "cpu_s": _cpu_s() - cpu_start,
                           "in_calls_s": in_calls,
                           "threads_cpu_s": _other_threads_cpu_s() - threads_start,
                           "rss_start_kb": rss_start, "rss_end_kb": rss_kb()[0],
                           "rss_peak_kb": rss_kb()[1]}
    if delivery_pid and delivery_start is not None:  # the delivery process during the loop
        delivery_end = _proc_cpu_s(delivery_pid)
        if delivery_end is not None:
            out["delivery_cpu_s"] = delivery_end - delivery_start
    out["modules"] = sorted(m for m in ("wandb", "mlflow", "tensorboard", "torch")
                            if m in sys.modules)
    if mode.startswith("trackmux"):
        from benchmarks.common import wait_delivered

        t0 = time.perf_counter()  # the backlog the loop left: delivery ran below it
        wait_delivered(tracker, 300)
        out["drain_s"] = time.perf_counter() - t0
        if watch is not None:
            out["loop_latency_ms"] = watch.stop(logged, start)
        if mode != "trackmux-spool":
            out["latency_ms"] = _latency(tracker)
        t0 = time.perf_counter()
        summary = tracker.finish(timeout=300)
        out["finish_s"] = time.perf_counter() - t0
        out["pending"] = summary.pending
    elif mode == "verl":
        t0 = time.perf_counter()
        tracker.finish()
        out["finish_s"] = time.perf_counter() - t0
    return out


class _AckWatch:
    """Polls the run's acknowledgements every 10 ms from a thread (it holds the GIL for a
    few microseconds a poll), so the latency of events logged *during* the loop, with
    both cores busy, can be told afterwards: log time to the first poll that saw the ack."""

    def __init__(self, run: Any) -> None:
        import threading

        run._spool.flush(30)  # the config event is committed: the loop's events follow it
        self.run = run
        self.first_seq = run._spool.last_seq + 1
        self.polls: list[tuple[float, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(0.01):
            state = self.run.delivery()
            self.polls.append((time.perf_counter(), {b: a for b, (a, _) in state.items()}))

    def stop(self, logged: list[float], loop_start: float) -> dict[str, dict[str, float]]:
        """Per backend, ms from log() to acknowledgement: over all the loop's events, and
        in steady state (events logged after the backend first held everything logged so
        far, i.e. once its library was imported and its run opened), and when that was."""
        import bisect

        self._stop.set()
        self._thread.join()
        out: dict[str, dict[str, float]] = {}
        for backend in BACKENDS:
            waits, i = [], 0
            for k, at in enumerate(logged):
                seq = self.first_seq + k
                while i < len(self.polls) and self.polls[i][1].get(backend, 0) < seq:
                    i += 1
                if i == len(self.polls):
                    break
                waits.append((self.polls[i][0] - at) * 1000)
            if not waits:
                continue
            caught_up = next((t for t, acked in self.polls
                              if (n := bisect.bisect(logged, t))
                              and acked.get(backend, 0) >= self.first_seq + n - 1), None)
            entry = {**_stats(waits), "events": len(waits)}
            if caught_up is not None:
                entry["caught_up_s"] = caught_up - loop_start
                steady = waits[bisect.bisect(logged, caught_up):]
                if steady:
                    entry.update({f"steady_{k}": v for k, v in _stats(steady).items()})
                    entry["steady_events"] = len(steady)
            out[backend] = entry
        return out


def _stats(waits: list[float]) -> dict[str, float]:
    ranked = sorted(waits)
    return {"median": statistics.median(ranked), "p90": ranked[int(0.9 * (len(ranked) - 1))],
            "max": ranked[-1]}


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process, all its threads, no children."""
    times = os.times()
    return times.user + times.system


def _other_threads_cpu_s() -> float:
    """CPU seconds of this process's threads other than the main one (the spool writer,
    the delivery monitor, ...: the tracker's own work beside the loop), from /proc."""
    main, total = threading.main_thread().native_id, 0.0
    for task in Path("/proc/self/task").iterdir():
        if int(task.name) != main:
            try:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # the thread ended meanwhile
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _proc_cpu_s(pid: int) -> float | None:
    """CPU seconds of another process so far, from /proc (None when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _latency(run: Any) -> dict[str, float]:
    """Median ms from log() until each backend acknowledged that event."""
    from benchmarks.common import wait_delivered

    wait_delivered(run, 300)
    samples: dict[str, list[float]] = {b: [] for b in BACKENDS}
    for i in range(PROBES):
        t0 = time.perf_counter()
        run.log({"probe": float(i)}, step=100_000 + i)
        run._spool.flush(10)
        seq = run._spool.last_seq
        waiting = set(BACKENDS)
        deadline = t0 + 30
        while waiting and time.perf_counter() < deadline:
            state = run.delivery()
            for name in list(waiting):
                if state[name][0] >= seq:
                    samples[name].append((time.perf_counter() - t0) * 1000)
                    waiting.discard(name)
            time.sleep(0.002)
        time.sleep(0.05)  # a step's worth of spacing, so probes do not queue up
    return {b: statistics.median(v) for b, v in samples.items() if v}


def _has_verl() -> bool:
    import importlib.util

    return importlib.util.find_spec("verl") is not None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--log-every", type=int, default=1,
                        help="log every Nth step (the loop runs every step regardless)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="none,trackmux,trackmux-warm,trackmux-thread,verl")
    parser.add_argument("--pair-rounds", type=int, default=0,
                        help="then this many more rounds of none and trackmux(-warm) only: the "
                             "5%% verdict needs many rounds, the slow modes do not")
    parser.add_argument("--watch", action="store_true",
                        help="also time each event of the loop from log() to each backend "
                             "(a 10 ms polling thread in the trainer: not for overhead runs)")
    parser.add_argument("--out", type=Path, help="write {'B7': ...} here as JSON")
    parser.add_argument("--root", type=Path, help="where the runs' files go (default: tmp)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        result = one(args.one, args.steps, args.root, args.log_every, args.watch)
        print("B7RESULT " + json.dumps(result), flush=True)
        return result
    modes = [m for m in args.modes.split(",") if m != "verl" or _has_verl()]
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="trackmux-b7-", dir=args.root) as tmp:
        pair = [m for m in modes if m in ("none", "trackmux", "trackmux-warm")]
        schedule = [modes] * args.rounds + [pair] * args.pair_rounds
        for r, round_modes in enumerate(schedule):
            # every other round in reverse order (ABBA), so neither mode always runs first
            for mode in (round_modes if r % 2 == 0 else round_modes[::-1]):
                root = Path(tmp) / f"{mode}-{r}"
                root.mkdir()
                env = offline_env(root)
                env.update({"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                            "MKL_NUM_THREADS": "1", "TRACKMUX_DIR": str(root / "spool")})
                done = subprocess.run(
                    [sys.executable, "-m", "benchmarks.loop", "--one", mode, "--steps",
                     str(args.steps), "--log-every", str(args.log_every), "--root",
                     str(root), *(["--watch"] if args.watch else [])],
                    env=env, capture_output=True, text=True, timeout=1800, check=False)
                line = next((x for x in done.stdout.splitlines()
                             if x.startswith("B7RESULT ")), None)
                if line is None:
                    raise RuntimeError(f"B7 {mode} failed:\n{done.stdout[-2000:]}\n"
                                       f"{done.stderr[-4000:]}")
                result = json.loads(line[len("B7RESULT "):])
                runs[mode].append(result)
                print(f"B7 round {r + 1} {mode:16s} loop {result['loop_s']:6.2f} s  "
                      f"peak RSS {result['rss_peak_kb'] / 1024:7.1f} MB", flush=True)
    summary = _summarize(runs)
    for line in _lines(summary):
        print(line)
    if args.out:
        args.out.write_text(json.dumps({"B7": {**summary, "runs": runs}}, indent=2))
    return summary


_LATENCY_FIELDS = ("median", "p90", "max", "caught_up_s", "steady_median", "steady_p90",
                   "steady_max")


def _summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    base = statistics.median(r["loop_s"] for r in runs["none"])
    base_cpu = statistics.median(r["cpu_s"] for r in runs["none"])
    base_rss = statistics.median(r["rss_peak_kb"] for r in runs["none"]) / 1024
    out: dict[str, Any] = {"none_loop_s": base, "none_cpu_s": base_cpu,
                           "none_rss_mb": base_rss, "modes": {}}
    for mode, results in runs.items():
        loop = statistics.median(r["loop_s"] for r in results)
        cpu = statistics.median(r["cpu_s"] for r in results)
        rss = statistics.median(r["rss_peak_kb"] for r in results) / 1024
        entry: dict[str, Any] = {"rounds": len(results),
                                 "loop_s": loop, "overhead_pct": (loop / base - 1) * 100,
                                 "cpu_s": cpu, "cpu_overhead_pct": (cpu / base_cpu - 1) * 100,
                                 "rss_mb": rss, "rss_over_untracked_mb": rss - base_rss,
                                 "modules_in_trainer": results[-1]["modules"]}
        paired = _paired(runs["none"], results)
        if paired is not None:
            entry["paired_overhead_pct"] = paired
        own = [(r["in_calls_s"] + r["threads_cpu_s"]) / r["loop_s"] * 100 for r in results
               if "in_calls_s" in r]
        if own and mode != "none":
            entry["trainer_side_pct"] = statistics.median(own)
        delivery_cpu = [r["delivery_cpu_s"] for r in results if r.get("delivery_cpu_s")]
        if delivery_cpu:
            entry["delivery_cpu_s"] = statistics.median(delivery_cpu)
        in_loop = [r["loop_latency_ms"] for r in results if r.get("loop_latency_ms")]
        if in_loop:
            entry["loop_latency_ms"] = {
                b: {k: statistics.median(vals) for k in _LATENCY_FIELDS
                    if (vals := [x[b][k] for x in in_loop if k in x.get(b, {})])}
                for b in BACKENDS if any(b in x for x in in_loop)}
        lat = [r["latency_ms"] for r in results if r.get("latency_ms")]
        if lat:
            entry["latency_ms"] = {b: statistics.median(x[b] for x in lat if b in x)
                                   for b in BACKENDS}
        drains = [r["drain_s"] for r in results if "drain_s" in r]
        if drains:
            entry["drain_after_loop_s"] = statistics.median(drains)
        if results[0].get("finish_s") is not None:
            entry["finish_s"] = statistics.median(r["finish_s"] for r in results)
        out["modes"][mode] = entry
    return out


def _paired(base: list[dict[str, Any]], runs: list[dict[str, Any]]) -> dict[str, float] | None:
    """Overhead of each round against the untracked run of the same round (the machine's
    drift hits both alike): median and the range over rounds, in %."""
    import random

    ratios = [(r["loop_s"] / b["loop_s"] - 1) * 100 for b, r in zip(base, runs, strict=False)]
    if not ratios or runs is base:
        return None
    rng = random.Random(0)  # a 90% bootstrap interval of the median, over the rounds
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios)))
                     for _ in range(2000))
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "ci90": [medians[100], medians[1899]]}


def _lines(summary: dict[str, Any]) -> list[str]:
    lines = [f"B7 loop overhead (median of rounds; untracked {summary['none_loop_s']:.2f} s, "
             f"{summary['none_rss_mb']:.0f} MB peak RSS)"]
    for mode, e in summary["modes"].items():
        lat = e.get("latency_ms")
        lat_txt = ("  log->backend " + ", ".join(f"{b} {v:.0f} ms" for b, v in lat.items())
                   if lat else "")
        drain = (f"  drain after loop {e['drain_after_loop_s']:.1f} s"
                 if "drain_after_loop_s" in e else "")
        paired = e.get("paired_overhead_pct")
        paired_txt = (f" (per round {paired['median']:+.1f}%, 90% CI {paired['ci90'][0]:+.1f}"
                      f"..{paired['ci90'][1]:+.1f}%, range {paired['min']:+.1f}.."
                      f"{paired['max']:+.1f}%)" if paired else "")
        if "trainer_side_pct" in e:
            paired_txt += f"  in log() + tracker threads {e['trainer_side_pct']:.1f}% of the loop"
        lines.append(f"  {mode:16s} {e['loop_s']:6.2f} s  {e['overhead_pct']:+7.1f}%"
                     f"{paired_txt}  trainer CPU {e['cpu_overhead_pct']:+6.1f}%  "
                     f"RSS {e['rss_over_untracked_mb']:+6.1f} MB{lat_txt}{drain}")
        for backend, ms in e.get("loop_latency_ms", {}).items():
            steady = (f"; steady state (caught up {ms['caught_up_s']:.1f} s into the loop) "
                      f"median {ms['steady_median']:.0f} ms, p90 {ms['steady_p90']:.0f} ms"
                      if "steady_median" in ms else "; never caught up during the loop")
            lines.append(f"      during the loop, log->{backend}: median {ms['median']:.0f} ms, "
                         f"p90 {ms['p90']:.0f} ms{steady}")
    return lines


if __name__ == "__main__":
    main()
