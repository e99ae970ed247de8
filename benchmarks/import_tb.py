"""B15, ``trackmux import`` of TensorBoard folders (issue 44), beside tensorboard's own
``EventAccumulator`` loading the same folder.

    python -m benchmarks.import_tb                      # 1M points, 100k for the flat check
    python -m benchmarks.import_tb --points 200000 --idle 10

- import: a folder of ``--points`` scalar points (one record each, as ``add_scalar``
  writes them: 10 tags, ``--points / 10`` steps) written with tensorboard's ``Event``
  proto; ``trackmux import --json`` in a child process, wall time, CPU time (user + sys)
  and peak RSS of that process; points/s of wall and of CPU (the machine is shared: CPU
  time is what the import itself costs). The same folder cut to a tenth gives the flat
  memory check (peak RSS at 1/10 of the points against all of them).
- EventAccumulator: ``EventAccumulator(folder, size_guidance={"scalars": 0}).Reload()``
  in a child process, the same three figures (what TensorBoard's own loader pays to hold
  every point).
- follow idle: ``trackmux import --follow`` of the imported folder (nothing new), with
  the live doctor and without, CPU of its process over ``--idle`` seconds once it has
  settled (the doctor caught up with the imported run), as % of one core; and how long
  a point appended to the followed event file takes to reach the spool (p50, max).

Prints one JSON document (and ``--out FILE`` writes it).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from benchmarks.common import report

TAGS = [f"train/metric_{i}" for i in range(10)]


def write_folder(folder: Path, points: int) -> None:
    """``points`` scalar records (10 tags a step) in one event file, framed like
    tensorboard's writer (CRC-32C in C here only to write the fixture fast)."""
    import crc32c
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary

    def masked(data: bytes) -> int:
        crc = crc32c.crc32c(data)
        return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "events.out.tfevents.1700000000.bench.0"
    with open(path, "wb") as out:
        records = [Event(wall_time=1.7e9, file_version="brain.Event:2").SerializeToString()]
        for i in range(points):
            step = i // len(TAGS)
            tag = TAGS[i % len(TAGS)]
            records.append(Event(wall_time=1.7e9 + step, step=step, summary=Summary(
                value=[Summary.Value(tag=tag, simple_value=(step % 997) / 997.0)])
            ).SerializeToString())
            if len(records) >= 50_000:
                out.write(_frame(records, masked))
                records = []
        out.write(_frame(records, masked))


def _frame(records: list[bytes], masked: Any) -> bytes:
    parts = []
    for data in records:
        header = struct.pack("<Q", len(data))
        parts += [header, struct.pack("<I", masked(header)), data,
                  struct.pack("<I", masked(data))]
    return b"".join(parts)


def measured(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Wall, CPU and peak RSS of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{command} failed: {done.stderr[-2000:]}")
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "peak_rss_mb": round(after.ru_maxrss / 1024, 1), "stdout": done.stdout}


def child_peak(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """``measured`` in a fresh process of its own, so ``ru_maxrss`` is this command's."""
    script = ("import json, subprocess, sys, resource, time\n"
              "from benchmarks.import_tb import measured\n"
              "print(json.dumps(measured(json.loads(sys.argv[1]), dict(__import__('os')"
              ".environ))))\n")
    out = subprocess.run([sys.executable, "-c", script, orjson.dumps(command).decode()],
                         env=env, capture_output=True, text=True, check=True,
                         cwd=str(Path(__file__).resolve().parent.parent))
    result: dict[str, Any] = orjson.loads(out.stdout.splitlines()[-1])
    return result


ACCUMULATE = ("import sys\n"
              "from tensorboard.backend.event_processing.event_accumulator import "
              "EventAccumulator\n"
              "acc = EventAccumulator(sys.argv[1], size_guidance={'scalars': 0})\n"
              "acc.Reload()\n"
              "print(sum(len(acc.Scalars(t)) for t in acc.Tags()['scalars']))\n")


def bench_import(folder: Path, root: Path, env: dict[str, str], points: int) -> dict[str, Any]:
    shutil.rmtree(root, ignore_errors=True)
    run = child_peak([sys.executable, "-m", "trackmux", "import", "--json", "--dir",
                      str(root), str(folder)], env)
    (line,) = [orjson.loads(x) for x in run.pop("stdout").splitlines() if x.startswith("{")]
    assert line["points"] == points, line
    run["points_per_s_wall"] = round(points / run["wall_s"])
    run["points_per_s_cpu"] = round(points / run["cpu_s"])
    return run


def bench_accumulator(folder: Path, env: dict[str, str], points: int) -> dict[str, Any]:
    run = child_peak([sys.executable, "-c", ACCUMULATE, str(folder)], env)
    assert int(run.pop("stdout").split()[-1]) == points
    run["points_per_s_wall"] = round(points / run["wall_s"])
    run["points_per_s_cpu"] = round(points / run["cpu_s"])
    return run


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_follow_idle(folder: Path, root: Path, env: dict[str, str], seconds: float,
                      doctor: str) -> dict[str, Any]:
    """CPU of a ``--follow`` whose source does not grow, once it has settled (its first
    read done and, with the doctor, the doctor caught up with the run: 2 s windows until
    one uses under 2% of a core, at most 3 minutes)."""
    proc = subprocess.Popen([sys.executable, "-m", "trackmux", "import", "--follow",
                             "--json", "--doctor", doctor, "--dir", str(root), str(folder)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        settled = 0.0
        while time.monotonic() < deadline:
            before = _cpu_of(proc.pid)
            time.sleep(2.0)
            settled += 2.0
            if (_cpu_of(proc.pid) - before) / 2.0 < 0.02:
                break
        first, start = _cpu_of(proc.pid), time.monotonic()
        time.sleep(seconds)
        used, spent = _cpu_of(proc.pid) - first, time.monotonic() - start
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    return {"doctor": doctor, "settled_after_s": settled, "seconds": round(spent, 1),
            "cpu_s": round(used, 3), "cpu_percent_of_one_core": round(100 * used / spent, 2)}


def append_point(path: Path, step: int) -> None:
    import crc32c
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary

    def masked(data: bytes) -> int:
        crc = crc32c.crc32c(data)
        return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    record = Event(wall_time=time.time(), step=step, summary=Summary(
        value=[Summary.Value(tag=TAGS[0], simple_value=0.5)])).SerializeToString()
    with open(path, "ab") as out:
        out.write(_frame([record], masked))


def bench_follow_latency(folder: Path, root: Path, env: dict[str, str], samples: int
                         ) -> dict[str, Any]:
    """Seconds from a point appended to the followed event file to its step in the spool
    (read with sqlite, as any reader would), ``samples`` times, one a second."""
    import sqlite3

    (path,) = folder.glob("events.out.tfevents*")
    proc = subprocess.Popen([sys.executable, "-m", "trackmux", "import", "--follow",
                             "--json", "--dir", str(root), str(folder)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    delays = []
    try:
        deadline = time.monotonic() + 180
        while not list(root.glob("*/*/run.lock")) and time.monotonic() < deadline:
            time.sleep(0.1)
        (spool,) = root.glob("*/*/spool.db")
        time.sleep(2.0)
        for i in range(samples):
            step = 10_000_000 + i
            append_point(path, step)
            start = time.monotonic()
            while time.monotonic() - start < 30:
                conn = sqlite3.connect(f"file:{spool}?mode=ro", uri=True)
                try:
                    top = conn.execute("SELECT max(step) FROM events WHERE kind = 'metrics'"
                                       ).fetchone()[0]
                finally:
                    conn.close()
                if top is not None and top >= step:
                    break
                time.sleep(0.01)
            delays.append(time.monotonic() - start)
            time.sleep(1.0)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    delays.sort()
    return {"samples": samples, "p50_s": round(delays[len(delays) // 2], 3),
            "max_s": round(delays[-1], 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--idle", type=float, default=20.0)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="trackmux-b15-"))
    env = {**os.environ, "TRACKMUX_DOCTOR": os.environ.get("TRACKMUX_DOCTOR", "on"),
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    try:
        big, small = work / "tb-big" / "run", work / "tb-small" / "run"
        write_folder(big, args.points)
        write_folder(small, args.points // 10)
        result: dict[str, Any] = {
            "points": args.points, "load_before": os.getloadavg()[0],
            "file_mb": round(sum(p.stat().st_size for p in big.iterdir()) / 2**20, 1)}
        result["import"] = bench_import(big, work / "spools", env, args.points)
        result["import_tenth"] = bench_import(small, work / "spools-small", env,
                                              args.points // 10)
        result["event_accumulator"] = bench_accumulator(big, env, args.points)
        result["follow_idle"] = [bench_follow_idle(big, work / "spools", env, args.idle, d)
                                 for d in ("on", "off")]
        result["follow_latency"] = bench_follow_latency(small, work / "spools-small", env,
                                                        args.samples)
        result["load_after"] = os.getloadavg()[0]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(result, args.out)


if __name__ == "__main__":
    main()
