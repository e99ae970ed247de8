"""B11: what the doctor (issue 22) costs and how fast it answers.

    python -m benchmarks.doctor [--points 1000000] [--tables 500] [--rounds 3]

- B11a ``trackmux doctor`` over a finished run of 1M points (10,000 steps x 100 keys, with
  verl's key names among them) and 500 sample tables (64 rows of ~400 characters each):
  wall time of the CLI process (target < 10 s);
- B11b the delivery process's CPU with the doctor on and off, at B7's rate (B7's workload,
  100 floats a step, a table every 10 steps, B7's backends where installed, else file),
  measured from the first acknowledgement to the drain of the loop (target <= 5% more):
  the process's CPU clock from /proc (user + system, not wall: load on the machine moves
  it far less), ``--rounds`` pairs with the order alternating, the medians, and the
  on/off ratio of each pair (its median, range and 90% bootstrap interval);
- B11b-watch the watch thread's own CPU in a live run at B7's rate (``delivery="thread"``
  and the file backend, so the thread is in this process: its scheduler clock in
  nanoseconds from /proc/self/task/<id>/schedstat) and how many spool reads it made;
- B11c latency from the ``log()`` that completes a finding (a NaN) to its line in the
  file backend's findings file and to the console's line in the trainer (target < 2 s).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import payload
from benchmarks.loop import TABLE_EVERY, Workload, _proc_cpu_s, _table


def _words(rng: random.Random, n: int) -> str:
    vocab = ["the", "answer", "is", "so", "we", "add", "then", "divide", "by", "two", "and",
             "check", "that", "the", "result", "holds", "for", "every", "case", "of", "the",
             "problem"]
    return " ".join(rng.choice(vocab) for _ in range(n))


def build_run(root: Path, points: int, tables: int) -> Path:
    """A finished run written through the public API with the doctor off."""
    import trackmux

    run = trackmux.init(project="b9", name="big", backends=[], dir=root, doctor=False)
    assert isinstance(run, trackmux.Run)
    steps = points // 100
    rng = random.Random(0)
    every = max(1, steps // tables)
    for step in range(steps):
        data = payload(step)
        data["critic/score/mean"] = 0.1 + 0.7 * min(1.0, step / (steps / 2))
        run.log(data, step=step)
        if step % every == 0 and step // every < tables:
            rows = [[f"prompt {i}", _words(rng, 70), rng.random()] for i in range(64)]
            run.log_table("val/generations", ["input", "output", "score"], rows, step=step)
    run.finish(timeout=120)
    return run.dir


def b11a(root: Path, points: int, tables: int) -> dict[str, Any]:
    run_dir = build_run(root / "a", points, tables)
    cli = str(Path(sys.executable).parent / "trackmux")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([cli, "doctor", "--json", str(run_dir)], capture_output=True,
                          text=True, check=False)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    load = os.getloadavg()[0]
    found = json.loads(done.stdout.splitlines()[-1])["findings"] if done.stdout else None
    return {"seconds": seconds, "cpu_seconds": cpu, "load": load,
            "exit": done.returncode, "findings": found,
            "points": points, "tables": tables}


def _backends() -> list[str]:
    import importlib.util

    wanted = ["wandb", "mlflow", "tensorboard"]
    return wanted if all(importlib.util.find_spec(m) for m in wanted) else ["file"]


def _b7_step(run: Any, work: Workload, step: int) -> None:
    """One step of B7's loop: the toy update, its metrics, a rollout table now and then."""
    scores, loss = work.step(step)
    data = payload(step)
    data["actor/pg_loss"] = loss
    run.log(data, step=step)
    if step % TABLE_EVERY == 0:
        columns, rows = _table(step, scores)
        run.log_table("rollout/samples", columns, rows, step=step)


def one_round(root: Path, doctor: bool, steps: int) -> dict[str, float]:
    """B7's loop with the doctor on or off; the delivery process's CPU during it."""
    import trackmux

    backends = _backends()
    options = {"wandb": {"mode": "offline", "dir": str(root / "wandb")},
               "mlflow": {"tracking_uri": f"sqlite:///{root / 'mlflow.db'}"},
               "tensorboard": {"root": str(root / "tensorboard")},
               "file": {"root": str(root / "file")}}
    run = trackmux.init(project="b9", name=f"doctor-{doctor}", backends=backends,
                        dir=root / "spool", doctor=doctor,
                        backend_options={b: options[b] for b in backends})
    assert isinstance(run, trackmux.Run)
    work = Workload()
    run.log(payload(0), step=0)
    while min(a for a, _ in run.delivery().values()) < 1:  # backends open: start the clock
        time.sleep(0.05)
    pid = run.delivery_pid
    assert pid is not None
    cpu0 = _proc_cpu_s(pid) or 0.0
    loop0 = time.perf_counter()
    for step in range(1, steps):
        _b7_step(run, work, step)
    loop_s = time.perf_counter() - loop0
    while True:  # drained: every backend acknowledged what the loop logged
        delivery = run.delivery()
        if all(a >= last for a, last in delivery.values()):
            break
        time.sleep(0.02)
    cpu = (_proc_cpu_s(pid) or 0.0) - cpu0
    run.finish(timeout=60)
    return {"delivery_cpu_s": cpu, "loop_s": loop_s}


def own_cpu(steps: int, repeats: int = 5) -> float:
    """CPU seconds of the doctor's thread over B7's events (``steps`` steps of 100 floats,
    a table every 10 steps), reading and decoding them from a spool as the watch thread
    does, then feeding the detectors: the thread's CPU clock, so other processes on a loaded
    machine barely move it. Median of ``repeats``."""
    from trackmux.core.events import MetricsEvent, TableEvent
    from trackmux.doctor.config import resolve
    from trackmux.doctor.engine import Doctor

    work = Workload()
    events: list[Any] = []
    for step in range(steps):
        scores, loss = work.step(step)
        data = payload(step)
        data["actor/pg_loss"] = loss
        events.append(MetricsEvent(data, step, 1000.0 + step * 0.005))
        if step % TABLE_EVERY == 0:
            columns, rows = _table(step, scores)
            events.append(TableEvent("rollout/samples", tuple(columns),
                                     tuple(tuple(r) for r in rows), step, 1000.0))
    from trackmux.core.spool.reader import SpoolReader
    from trackmux.core.spool.writer import SpoolWriter

    with tempfile.TemporaryDirectory(prefix="trackmux-b9-own-") as tmp:
        writer = SpoolWriter(Path(tmp))
        for event in events:
            writer.append(event)
        writer.close()
        times = []
        for _ in range(repeats):  # as the watch thread does: read, decode, feed
            doctor = Doctor(resolve(True))
            started = time.thread_time()
            reader = SpoolReader(Path(tmp))
            for event in reader.iter_events():
                doctor.feed(event)
            reader.close()
            times.append(time.thread_time() - started)
    return statistics.median(times)


def watch_thread_cpu(root: Path, steps: int) -> dict[str, float]:
    """The watch thread's CPU (scheduler clock, ns resolution) and spool reads in a live
    run of ``steps`` B7 steps, the thread being in this process (``delivery="thread"``)."""
    import threading

    import trackmux
    from trackmux.core.spool import reader as spool_reader

    original = spool_reader.SpoolReader.read
    reads = [0]

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "trackmux-watch":
            reads[0] += 1
        return original(self, *args, **kwargs)

    spool_reader.SpoolReader.read = counted  # type: ignore[method-assign]
    try:
        run = trackmux.init(project="b11w", backends=["file"], dir=root, delivery="thread",
                            doctor=True, backend_options={"file": {"root": str(root / "f")}})
        assert isinstance(run, trackmux.Run)
        work = Workload()
        loop0 = time.perf_counter()
        for step in range(steps):
            _b7_step(run, work, step)
        loop_s = time.perf_counter() - loop0
        time.sleep(1.5)  # the thread reads the last events and ticks
        watch = next(t for t in threading.enumerate() if t.name == "trackmux-watch")
        stat = Path(f"/proc/self/task/{watch.native_id}/schedstat").read_text()
        cpu = int(stat.split()[0]) / 1e9
        run.finish(timeout=60)
    finally:
        spool_reader.SpoolReader.read = original  # type: ignore[method-assign]
    return {"cpu_s": cpu, "reads": reads[0], "loop_s": loop_s}


def _paired(off: list[float], on: list[float]) -> dict[str, Any]:
    """Each pair's on/off ratio - 1: its median, range and a 90% bootstrap interval of the
    median (a pair ran back to back, so the machine's drift hits both alike)."""
    ratios = [b / a - 1 for a, b in zip(off, on, strict=False) if a > 0]
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios)))
                     for _ in range(2000))
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "ci90": [medians[100], medians[1899]], "ratios": ratios}


def b11b(root: Path, rounds: int, steps: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    for r in range(rounds):
        for mode in ("off", "on") if r % 2 == 0 else ("on", "off"):
            result = one_round(root / f"b{r}-{mode}", mode == "on", steps)
            runs[mode].append(result)
            print(f"B11b round {r + 1} doctor {mode:3s}: delivery CPU "
                  f"{result['delivery_cpu_s']:.2f} s, loop {result['loop_s']:.2f} s", flush=True)
    off_cpu = [x["delivery_cpu_s"] for x in runs["off"]]
    on_cpu = [x["delivery_cpu_s"] for x in runs["on"]]
    off, on = statistics.median(off_cpu), statistics.median(on_cpu)
    own = own_cpu(steps)
    watch = watch_thread_cpu(root / "watch", steps)
    return {"backends": _backends(), "steps": steps, "rounds": rounds, "off_cpu_s": off,
            "on_cpu_s": on, "increase": on / off - 1 if off else None,
            "off_range_s": [min(off_cpu), max(off_cpu)],
            "on_range_s": [min(on_cpu), max(on_cpu)],
            "paired": _paired(off_cpu, on_cpu) if rounds else None,
            "doctor_own_cpu_s": own, "own_share_of_off": own / off if off else None,
            "watch_thread": watch, "watch_share_of_off": watch["cpu_s"] / off if off else None,
            "load": os.getloadavg()[0], "runs": runs}


class _Stamped(io.TextIOBase):
    """stdout that notes when the doctor's line was printed (the console backend)."""

    def __init__(self) -> None:
        self.at: float | None = None

    def write(self, text: str) -> int:
        if self.at is None and "[trackmux doctor]" in text:
            self.at = time.time()
        return len(text)


def b11c(root: Path, repeats: int) -> dict[str, Any]:
    import trackmux

    file_s, console_s = [], []
    for r in range(repeats):
        stamped = _Stamped()
        saved, sys.stdout = sys.stdout, stamped  # type: ignore[assignment]
        try:
            run = trackmux.init(project="b11c", name=f"latency-{r}",
                                backends=["console", "file"], dir=root / "c",
                                backend_options={"file": {"root": str(root / "c-out")},
                                                 "console": {"interval": 60}})
            assert isinstance(run, trackmux.Run)
            for step in range(20):
                run.log({"loss": 1.0}, step=step)
                time.sleep(0.05)
            sent = time.time()
            run.log({"loss": float("nan")}, step=20)
            findings = root / "c-out" / "b11c" / f"{run.name}.findings.jsonl"
            seen: float | None = None
            while time.time() - sent < 10 and (seen is None or stamped.at is None):
                if seen is None and findings.exists() and findings.stat().st_size:
                    seen = time.time()
                time.sleep(0.005)
            run.finish(timeout=30)
        finally:
            sys.stdout = saved
        if seen is not None:
            file_s.append(seen - sent)
        if stamped.at is not None:
            console_s.append(stamped.at - sent)
        print(f"B11c {r + 1}: file {file_s[-1] if seen else 'none'}, console "
              f"{console_s[-1] if stamped.at else 'none'}", flush=True)
    return {"file_s": file_s, "console_s": console_s,
            "file_median_s": statistics.median(file_s) if file_s else None,
            "console_median_s": statistics.median(console_s) if console_s else None}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=10, help="B11b pairs (off, on)")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--latency-repeats", type=int, default=5)
    parser.add_argument("--only", default="a,b,c")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="trackmux-b9-") as tmp:
        root = Path(tmp)
        os.chdir(root)
        if "a" in args.only:
            result["B11a"] = b11a(root, args.points, args.tables)
            print(f"B11a trackmux doctor over {args.points:,} points and {args.tables} tables: "
                  f"{result['B11a']['seconds']:.2f} s wall, {result['B11a']['cpu_seconds']:.2f} s "
                  f"CPU (exit {result['B11a']['exit']}, load {result['B11a']['load']:.1f})",
                  flush=True)
        if "b" in args.only:
            result["B11b"] = b11b(root, args.rounds, args.steps)
            b = result["B11b"]
            p = b["paired"]
            print(f"B11b delivery CPU ({', '.join(b['backends'])}, {b['rounds']} pairs): "
                  f"doctor off median {b['off_cpu_s']:.2f} s ({b['off_range_s'][0]:.2f}-"
                  f"{b['off_range_s'][1]:.2f}), on {b['on_cpu_s']:.2f} s "
                  f"({b['on_range_s'][0]:.2f}-{b['on_range_s'][1]:.2f}), "
                  f"{b['increase']:+.1%} at the medians; per pair on/off median "
                  f"{p['median']:+.1%} (range {p['min']:+.1%}..{p['max']:+.1%}, 90% CI "
                  f"{p['ci90'][0]:+.1%}..{p['ci90'][1]:+.1%}); the doctor's own CPU over the "
                  f"same events {b['doctor_own_cpu_s'] * 1000:.0f} ms "
                  f"({b['own_share_of_off']:.1%} of the delivery process's); the live watch "
                  f"thread {b['watch_thread']['cpu_s'] * 1000:.0f} ms in "
                  f"{b['watch_thread']['reads']} reads ({b['watch_share_of_off']:.1%}; "
                  f"load {b['load']:.1f})", flush=True)
        if "w" in args.only and "b" not in args.only:
            result["B11b-watch"] = w = watch_thread_cpu(root / "watch", args.steps)
            print(f"B11b-watch the live watch thread over {args.steps} steps: "
                  f"{w['cpu_s'] * 1000:.0f} ms CPU in {w['reads']} reads (loop "
                  f"{w['loop_s']:.1f} s)", flush=True)
        if "c" in args.only:
            result["B11c"] = b11c(root, args.latency_repeats)
            c = result["B11c"]
            print(f"B11c finding latency: file median {c['file_median_s']}, console median "
                  f"{c['console_median_s']}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
