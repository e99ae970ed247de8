"""Exactly once across attempts (issue 13): a run is SIGKILLed, resumed with a rewind, the
resumed attempt is SIGKILLed too, and ``trackmux sync`` finishes the delivery.

Each attempt logs every step once, so (attempt, step) names an event. The file backend's
output must then hold no event twice, every live event once, and superseded events only
before the first event of the attempt that superseded them (delivered before the rewind,
never after). A sync into a new file must hold exactly the live events, in order.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from pathlib import Path

from _reliability import file_lines, spawn, trackmux_cli

from spool_support import forget_cursors
from trackmux.core.spool.reader import SpoolReader

CHILD = r"""
import sys, time, types, trackmux
from trackmux.plugins.file import FileBackend

class SlowFile(FileBackend):  # delivery slower than logging: a kill leaves a backlog
    def write(self, events):
        for event in events:
            super().write([event])
            self.flush()
            time.sleep(0.0005)

@trackmux.hookimpl
def trackmux_register_backends(register):
    register("slowfile", SlowFile)

trackmux.register_plugin(types.SimpleNamespace(
    trackmux_register_backends=trackmux_register_backends), "slowfile-test")
if sys.argv[1] == "sync":
    sys.argv = ["trackmux", *sys.argv[1:]]
    from trackmux.cli.main import main
    main()
attempt, out, root = int(sys.argv[1]), sys.argv[2], sys.argv[3]
extra = {} if attempt == 1 else {"resume": "must", "rewind_to": int(sys.argv[4])}
run = trackmux.init(project="k", backends=["slowfile"], dir=root, run_id="k",
                    backend_options={"slowfile": {"path": out}}, **extra)
start = run.step + 1
for step in range(start, start + 3000):
    run.log({"v": float(step), "attempt": float(attempt)}, step=step)
    if step % 20 == 0:
        time.sleep(0.002)
run.finish()
"""


def _acked(run_dir: Path) -> int:
    if not (run_dir / "spool.db").exists():
        return 0
    reader = SpoolReader(run_dir)
    try:
        return reader.cursor("slowfile").acked_seq
    finally:
        reader.close()


def _attempt(args: list[str], out: Path, delay: float, run_dir: Path | None = None) -> None:
    """Run one attempt and SIGKILL it ``delay`` s after it began to deliver; with
    ``run_dir``, not before the slow backend acknowledged a batch (on a loaded machine the
    delay alone did not always cover one)."""
    child = spawn(CHILD, *args)
    deadline = time.monotonic() + 60
    start = out.stat().st_size if out.exists() else 0
    while not out.exists() or out.stat().st_size <= start:  # this attempt delivers
        assert child.poll() is None, child.stderr.read().decode()  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(delay)  # a random point of the delivery
    while run_dir is not None and _acked(run_dir) <= 2 and child.poll() is None:
        assert time.monotonic() < deadline + 60, "nothing acknowledged in 120 s"
        time.sleep(0.01)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)


def live_events(run_dir: Path) -> list[tuple[int, int]]:
    reader = SpoolReader(run_dir)
    try:
        return [(int(e.data["attempt"]), e.step) for e in reader.iter_events()
                if e.kind == "metrics"]
    finally:
        reader.close()


def test_kill_during_the_resumed_attempt_then_sync_duplicates_nothing(tmp_path: Path) -> None:
    rng = random.Random(13)
    delivered_superseded = left_for_sync = 0
    for trial in range(3):
        root = tmp_path / f"t{trial}"
        out = root / "out" / "m.jsonl"
        run_dir = root / "k" / "k"
        # long enough for a batch (1000 events) to be acknowledged
        _attempt(["1", str(out), str(root)], out, rng.uniform(0.8, 1.2), run_dir)
        reader = SpoolReader(run_dir)
        acked = reader.cursor("slowfile").acked_seq
        reader.close()
        assert acked > 2, "nothing acknowledged before the kill"
        rewind = (acked - 1) // 2  # seq n is step n - 1: back into what the file shows
        _attempt(["2", str(out), str(root), str(rewind)], out, rng.uniform(0.05, 0.4))
        reader = SpoolReader(run_dir)
        left_for_sync += reader.cursor("slowfile").acked_seq < reader.last_seq()
        reader.close()
        done = spawn(CHILD, "sync", str(run_dir), "--to", "slowfile", "--no-progress")
        stdout, stderr = done.communicate(timeout=120)
        assert done.returncode == 0, stdout.decode() + stderr.decode()
        got = [(int(r["data"]["attempt"]), r["step"]) for r in file_lines(out)]
        live = live_events(run_dir)
        assert len(got) == len(set(got)), f"trial {trial}: an event was written twice"
        assert set(live) <= set(got), f"trial {trial}: a live event is missing"
        first_resumed = got.index(next(e for e in got if e[0] == 2))
        superseded = [i for i, (a, s) in enumerate(got) if a == 1 and s > rewind]
        assert all(i < first_resumed for i in superseded), f"trial {trial}"
        delivered_superseded += bool(superseded)
        assert [e for e in got if e in set(live)] == live  # live events in spool order
        copy = root / "copy"  # a fresh destination: the spool without its file cursor
        shutil.copytree(run_dir, copy)
        forget_cursors(copy)
        fresh = root / "fresh" / "m.jsonl"
        synced = trackmux_cli("sync", str(copy), "--to", "file", "-o",
                              f"file.path={fresh}", "--no-progress")
        assert synced.returncode == 0, synced.stdout + synced.stderr
        assert [(int(r["data"]["attempt"]), r["step"]) for r in file_lines(fresh)] == live
    # the trials exercised what they claim: superseded lines already in the file, and a
    # resumed attempt killed with events left for sync
    assert delivered_superseded >= 1 and left_for_sync >= 1
