"""B12: the longest ``log()`` call, not the typical one, with the mlflow server dead.

    python -m benchmarks.log_stall [--points 1000000] [--keys 1] [--import-mlflow]
                                   [--no-provenance] [--backend mlflow|none] [--out F]
    python -m benchmarks.log_stall --spawns 60 [--niced-spawner]

One trainer logs ``--points`` values (``--keys`` per call, so 1M calls by default) as
fast as it can into a run whose mlflow backend points at a port nothing listens on (the
delivery process retries it in the background). Every call is timed; the report gives the
median, p99, p99.9 and max, and for each call over ``--stall-ms`` how much of it the
trainer's thread was blocked inside the process (neither running nor waiting for a CPU,
from /proc's schedstat: waiting for the GIL or a lock, which trackmux can fix; the rest
is the OS running other processes, which it cannot; and of the blocked time, the part
the spool writer was not itself waiting for a CPU: a caller held by backpressure waits
for the writer, and a writer the OS does not run is the machine's load), with what the
other threads were doing when the call ended, so a stall names its cause: the provenance
thread, the spool writer, delivery monitoring, an import; and how many full garbage
collections ran (each holds the GIL for its whole length; issue 43 item 17). Linux only.
Issue 34.9 saw one call of 12 ms about 5 s after ``init()``; docs/performance.md has the
numbers before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from benchmarks.common import stats


def _dead_uri() -> str:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _others() -> dict[str, str]:
    """The innermost frames of every other thread, as 'file:line function' lines."""
    names = {t.ident: t.name for t in threading.enumerate()}
    me = threading.get_ident()
    out = {}
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        stack = traceback.extract_stack(frame)[-3:]
        out[names.get(ident, str(ident))] = " <- ".join(
            f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(stack))
    return out


def bench(points: int, keys: int, backend: str, provenance: bool, stall_ms: float
          ) -> dict[str, Any]:
    import gc

    import trackmux

    names = [f"m/{i}" for i in range(keys)]
    full: list[float] = []  # full (oldest generation) collections: ms each, GIL held
    began: list[float] = []

    def collections(phase: str, info: dict[str, Any]) -> None:
        if info["generation"] == 2:
            if phase == "start":
                began.append(time.perf_counter())
            elif began:
                full.append((time.perf_counter() - began.pop()) * 1e3)

    gc.callbacks.append(collections)
    with tempfile.TemporaryDirectory() as tmp:
        options = {"mlflow": {"tracking_uri": _dead_uri()}} if backend == "mlflow" else {}
        start = time.perf_counter_ns()
        run = trackmux.init(project="bench", backends=[backend] if backend != "none" else [],
                            dir=tmp, backend_options=options, provenance=provenance)
        init_ns = time.perf_counter_ns() - start
        log, clock = run.log, time.perf_counter_ns
        sched = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        # the spool writer's: a caller held by backpressure waits for the writer, and a
        # writer waiting for a CPU is the machine's load, not trackmux
        writer_id = next(t.native_id for t in threading.enumerate()
                         if t.name == "trackmux-spool-writer")
        writer_sched = os.open(f"/proc/self/task/{writer_id}/schedstat", os.O_RDONLY)
        times: list[int] = []
        # the slow calls: wall, when, how long this thread was blocked inside the process
        # (neither running nor waiting for a CPU: waiting for the GIL or a lock), of that
        # how long the writer was not waiting for a CPU, and what the other threads were
        # doing when the call ended
        slow: list[tuple[int, int, int, int, dict[str, str]]] = []
        held: list[int] = []  # each slow call's wall minus its run-queue wait (issue 43.17)
        # of the slow calls' held time: those inside backpressure, and those not (the GIL)
        held_pressure: list[int] = []
        held_other: list[int] = []
        spool = run._spool
        counted = hasattr(spool, "holds")  # older sources (a 'before' run) do not count
        threshold = int(stall_ms * 1e6)
        value = 0.5
        for step in range(points // keys):
            data = dict.fromkeys(names, value)
            before = os.pread(sched, 64, 0)
            writer_before = os.pread(writer_sched, 64, 0)
            holds = spool.holds if counted else 0
            t0 = clock()
            log(data, step=step)
            took = clock() - t0
            after = os.pread(sched, 64, 0)
            times.append(took)
            if took > threshold:
                held.append(took - _queued(before, after))
                if counted:
                    (held_pressure if spool.holds != holds else held_other).append(held[-1])
            if took > threshold and len(slow) < 1000:
                blocked = _blocked(took, before, after)
                slow.append((took, t0 - start, blocked,
                             max(0, blocked - _queued(writer_before,
                                                      os.pread(writer_sched, 64, 0))),
                             _others()))
        os.close(sched)
        os.close(writer_sched)
        loop_s = (clock() - start) / 1e9
        holds_expired = getattr(spool, "holds_expired", None)
        holds = getattr(spool, "holds", None)
        run.finish(timeout=5)
    gc.callbacks.remove(collections)
    result = stats(times)
    slow.sort(key=lambda s: -s[0])
    ours = sorted(slow, key=lambda s: -s[2])  # by the time blocked inside the process
    fixable = max((s[3] for s in slow), default=0)
    return {"points": points, "keys_per_call": keys, "calls": len(times),
            "backend": backend, "provenance": provenance,
            "mlflow_imported": "mlflow" in sys.modules, "init_ms": init_ns / 1e6,
            "loop_s": round(loop_s, 2), "median_us": result["median_us"],
            "p99_us": result["p99_us"], "p999_us": result["p999_us"],
            "max_ms": result["max_us"] / 1000,
            f"calls_over_{stall_ms:g}ms": sum(t > threshold for t in times),
            f"calls_blocked_over_{stall_ms:g}ms": sum(s[2] > threshold for s in slow),
            "max_blocked_ms": round(ours[0][2] / 1e6, 2) if ours else 0.0,
            f"calls_blocked_writer_on_cpu_over_{stall_ms:g}ms": sum(
                s[3] > threshold for s in slow),
            "max_blocked_writer_on_cpu_ms": round(fixable / 1e6, 2),
            # the measure: wall minus run-queue wait, the longest call
            "max_held_ms": round(max(held, default=0) / 1e6, 2),
            f"calls_held_over_{stall_ms:g}ms": sum(h > threshold for h in held),
            "calls_held_over_10ms": sum(h > 10_000_000 for h in held),
            "max_held_in_backpressure_ms": round(max(held_pressure, default=0) / 1e6, 2),
            "max_held_elsewhere_ms": round(max(held_other, default=0) / 1e6, 2),
            "holds": holds, "holds_expired": holds_expired,
            "full_collections": len(full),
            "max_full_collection_ms": round(max(full, default=0.0), 2),
            "slowest": [_slow(s) for s in slow[:3]],
            "most_blocked": [_slow(s) for s in ours[:5]]}


def _blocked(took: int, before: bytes, after: bytes) -> int:
    """Of a call's ``took`` ns, those the thread neither ran nor waited for a CPU
    (/proc schedstat: ns on the CPU, ns waiting on a run queue): blocked in the process,
    on the GIL or a lock. What the OS took from it (the machine's other load) is not in
    it."""
    ran0, queued0 = (int(v) for v in before.split()[:2])
    ran1, queued1 = (int(v) for v in after.split()[:2])
    return max(0, took - (ran1 - ran0) - (queued1 - queued0))


def _queued(before: bytes, after: bytes) -> int:
    """ns a thread waited for a CPU between two reads of its schedstat."""
    return int(after.split()[1]) - int(before.split()[1])


def _slow(entry: tuple[int, int, int, int, dict[str, str]]) -> dict[str, Any]:
    took, at, blocked, writer_on_cpu, others = entry
    return {"ms": round(took / 1e6, 2), "at_s": round(at / 1e9, 2),
            "blocked_ms": round(blocked / 1e6, 2),
            "blocked_writer_on_cpu_ms": round(writer_on_cpu / 1e6, 2),
            "other_threads": others}


def spawns(count: int, niced_spawner: bool, stall_ms: float) -> dict[str, Any]:
    """The trainer's ``log()`` loop while another thread starts the provenance probe's
    command ``count`` times through ``record._run_niced`` (the child is lowered to nice 10).
    ``niced_spawner``: that thread first lowers itself to nice 10, as the helper did before
    issue 43 item 17, so the two can be compared on one machine at one time."""
    import trackmux
    from trackmux.provenance import record

    done = threading.Event()

    def spawner() -> None:
        if niced_spawner:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), record.NICE)
        for _ in range(count):
            with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out:
                given.write(b"[]")
                given.seek(0)
                record._run_niced([sys.executable, "-S", "-E", "-c", "pass"], given, out)
            time.sleep(0.01)
        done.set()

    with tempfile.TemporaryDirectory() as tmp:
        run = trackmux.init(project="bench", backends=[], dir=tmp, provenance=False)
        log, clock = run.log, time.perf_counter_ns
        sched = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        threshold = int(stall_ms * 1e6)
        blocked: list[int] = []
        calls = 0
        thread = threading.Thread(target=spawner)
        thread.start()
        while not done.is_set():
            before = os.pread(sched, 64, 0)
            t0 = clock()
            log({"m": 0.5}, step=calls)
            took = clock() - t0
            if took > threshold:
                blocked.append(_blocked(took, before, os.pread(sched, 64, 0)))
            calls += 1
        thread.join()
        os.close(sched)
        run.finish(timeout=5)
    return {"spawns": count, "niced_spawner": niced_spawner, "calls": calls,
            f"calls_over_{stall_ms:g}ms": len(blocked),
            f"calls_blocked_over_{stall_ms:g}ms": sum(b > threshold for b in blocked),
            "max_blocked_ms": round(max(blocked, default=0) / 1e6, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=1, help="values per log() call")
    ap.add_argument("--backend", default="mlflow", choices=("mlflow", "none"))
    ap.add_argument("--import-mlflow", action="store_true",
                    help="import mlflow in the trainer first, as a script that uses it would")
    ap.add_argument("--no-provenance", action="store_true")
    ap.add_argument("--stall-ms", type=float, default=3.0)
    ap.add_argument("--out", default="")
    ap.add_argument("--spawns", type=int, default=0,
                    help="instead: log() while the probe's command is started this many "
                         "times (issue 43 item 17)")
    ap.add_argument("--niced-spawner", action="store_true",
                    help="with --spawns: the starting thread at nice 10, as before")
    args = ap.parse_args()
    if args.spawns:
        print(json.dumps(spawns(args.spawns, args.niced_spawner, args.stall_ms), indent=2))
        return
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    # the delivery process of a finished run would otherwise retry the dead server for
    # 600 s, loading the machine the next run of this benchmark measures on
    os.environ.setdefault("TRACKMUX_ORPHAN_TIMEOUT", "0")
    if args.import_mlflow:
        import mlflow  # noqa: F401
    result = bench(args.points, args.keys, args.backend, not args.no_provenance,
                   args.stall_ms)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
