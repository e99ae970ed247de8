"""SIGKILL of the training process at random points: the durability contract holds every
time, and ``trackmux sync`` afterwards delivers exactly what the spool holds.

The child prints ``<step> <monotonic time>`` after each ``log()`` returns; CLOCK_MONOTONIC
is shared by every process on the machine, so the parent can tell which calls returned
more than ``DURABILITY_WINDOW`` seconds before it sent SIGKILL.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest
from _reliability import file_lines, spawn, trackmux_cli

from trackmux.core.delivery.sync import deliver
from trackmux.core.events import MetricsEvent, TableEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.runs import summarize
from trackmux.core.spool.writer import DURABILITY_WINDOW
from trackmux.plugins.file import FileBackend

CHILD = r"""
import sys, time, trackmux
run = trackmux.init(project="kill", backends=[], dir=sys.argv[1], durability=sys.argv[2])
sys.stdout.write(f"RUN {run.dir}\n")
step = 0
while True:
    run.log({"loss": 1.0 / (step + 1), "sq": step * step}, step=step)
    if step % 25 == 0:
        run.log_table("samples", ["prompt", "score"], [[f"p{step}", step]], step=step)
    sys.stdout.write(f"{step} {time.monotonic()}\n")
    step += 1
    time.sleep(0.0005)
"""

TRIALS = 20
STRICT_TRIALS = 8


def _kill_after(root: Path, durability: str, delay: float) -> tuple[Path, list[tuple[int, float]],
                                                                    float]:
    """Start a logging child, SIGKILL it ``delay`` s after its run exists; return the run
    dir, every (step, returned_at) it reported, and the kill time."""
    child = spawn(CHILD, str(root), durability)
    assert child.stdout is not None
    first = child.stdout.readline().decode()
    assert first.startswith("RUN "), first + child.stderr.read().decode()  # type: ignore[union-attr]
    run_dir = Path(first[4:].strip())
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(child.stdout))  # type: ignore[arg-type]
    reader.start()
    time.sleep(delay)
    killed_at = time.monotonic()
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    reader.join(10)
    assert child.returncode == -signal.SIGKILL
    returned = []
    for line in lines:
        parts = line.split()
        if len(parts) == 2:  # the last line may be cut by the kill
            returned.append((int(parts[0]), float(parts[1])))
    return run_dir, returned, killed_at


def _spooled(run_dir: Path) -> tuple[list[MetricsEvent], list[TableEvent]]:
    reader = SpoolReader(run_dir)
    try:
        events = list(reader.iter_events())
        assert not reader.damage, reader.damage
    finally:
        reader.close()
    return ([e for e in events if isinstance(e, MetricsEvent)],
            [e for e in events if isinstance(e, TableEvent)])


def _check_sync(run_dir: Path, out: Path, use_cli: bool) -> None:
    """Sync to the file backend delivers exactly the spooled events, in order."""
    metrics, tables = _spooled(run_dir)
    target = out / "metrics.jsonl"
    if use_cli:
        done = trackmux_cli("sync", str(run_dir), "--to", "file", "-o", f"file.path={target}")
        assert done.returncode == 0, done.stdout + done.stderr
    else:
        result = deliver(run_dir, {"file": lambda: FileBackend({"path": str(target)})},
                         timeout=60)
        assert result.complete, result
    written = file_lines(target)
    assert [(r["step"], r["data"]) for r in written] == [(e.step, e.data) for e in metrics]
    table_lines = file_lines(out / "metrics.tables.jsonl")
    assert [r["step"] for r in table_lines] == [e.step for e in tables]


@pytest.mark.parametrize("durability", ["default", "strict"])
def test_sigkill_at_random_points_keeps_the_durability_contract(
        tmp_path: Path, durability: str) -> None:
    rng = random.Random(20240611 + len(durability))
    trials = TRIALS if durability == "default" else STRICT_TRIALS
    for trial in range(trials):
        root = tmp_path / f"t{trial}"
        delay = rng.uniform(0.05, 1.2)
        run_dir, returned, killed_at = _kill_after(root, durability, delay)
        metrics, _ = _spooled(run_dir)
        steps = [e.step for e in metrics]
        assert steps == list(range(len(steps))), "the spool is not a prefix of the calls"
        window = 0.0 if durability == "strict" else DURABILITY_WINDOW
        must_have = [s for s, at in returned if at <= killed_at - window]
        missing = sorted(set(must_have) - set(steps))
        assert not missing, (f"trial {trial} (delay {delay:.2f}s, {durability}): "
                             f"{len(missing)} events lost, first {missing[:5]}")
        assert summarize(run_dir).state == "crashed"
        _check_sync(run_dir, tmp_path / f"out{trial}", use_cli=trial < 2)
