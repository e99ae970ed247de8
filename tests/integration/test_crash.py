"""Issue 3: a run killed with SIGKILL mid-run keeps everything inside the durability
contract in its spool, shows as crashed, and ``trackmux sync`` delivers exactly that."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _child import metrics
from _support import (
    HERE,
    child_env,
    cli,
    cursor,
    spooled,
    wait_delivery_process_gone,
    wait_until,
)

from trackmux.core.spool.writer import DURABILITY_WINDOW


def _read_record(path: Path) -> tuple[Path, list[tuple[int, float]]]:
    lines = path.read_text().splitlines()
    run_dir = Path(lines[0].split(" ", 1)[1])
    returned = []
    for line in lines[1:]:
        parts = line.split()
        if len(parts) == 2:  # the last line may be torn by the kill
            returned.append((int(parts[0]), float(parts[1])))
    return run_dir, returned


@pytest.mark.parametrize("delivery", ["thread", "process"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigkill_mid_run_keeps_durable_events_and_sync_delivers_exactly_them(
        tmp_path: Path, seed: int, delivery: str) -> None:
    rng = random.Random(seed)
    root, record = tmp_path / "spool", tmp_path / "record.txt"
    child = subprocess.Popen([sys.executable, str(HERE / "_child.py"), "log-until-killed",
                              str(root), str(record)], env=child_env(TRACKMUX_DELIVERY=delivery),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        # past the 100 steps asserted below (the random delay alone gave a loaded machine
        # fewer), each returned at least the delay before the kill: durable by contract
        assert wait_until(lambda: record.exists() and record.read_text().count("\n") > 102,
                          60), "child never logged 100 steps"
        time.sleep(rng.uniform(0.8, 2.5))
        killed_at = time.monotonic()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    run_dir, returned = _read_record(record)
    assert len(returned) > 100, "the child logged too little to test anything"

    # the delivery process (delivery="process") outlives the trainer and may still append
    # what the doctor says of the run (this run logs reward/mean: its coverage note, a text
    # event) after the kill: read the spool once it has exited, so the listing and the
    # sync below see the same events
    wait_delivery_process_gone(run_dir)
    events = spooled(run_dir)
    metric_steps = [e.step for e in events if e.kind == "metrics"]
    durable = [step for step, t in returned if t <= killed_at - DURABILITY_WINDOW]
    assert durable, "nothing returned early enough to be covered by the contract"
    # Contract: every log() that returned DURABILITY_WINDOW before the kill is spooled ...
    missing = sorted(set(durable) - set(metric_steps))
    assert not missing, f"seed {seed}: steps missing from the spool: {missing[:10]}"
    # ... and the spool is exactly a prefix of what was logged: in order, no gaps, no
    # duplicates, nothing that was never logged (at most the call in flight at the kill).
    assert metric_steps == list(range(len(metric_steps)))
    assert len(metric_steps) <= returned[-1][0] + 2
    for event in events:
        if event.kind == "metrics":
            assert event.data == metrics(event.step)
    returned_at = dict(returned)
    tables = [e.step for e in events if e.kind == "table"]
    for step in range(0, len(metric_steps), 50):
        # log_table(step) returned before log(step + 1) started
        if returned_at.get(step + 1, float("inf")) <= killed_at - DURABILITY_WINDOW:
            assert step in tables, f"table of step {step} is not in the spool"
    assert tables == sorted(set(tables))

    listing = cli("runs", str(root))
    assert listing.returncode == 0, listing.stderr
    assert "crashed" in listing.stdout, listing.stdout
    assert f"{len(events)} events" in listing.stdout

    synced = cli("sync", str(run_dir))
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert cursor(run_dir, "file").acked_seq == events[-1].seq
    delivered = [json.loads(line) for line in (root / "file.jsonl").read_text().splitlines()]
    assert delivered == [{"step": e.step, "data": e.data} for e in events
                         if e.kind == "metrics"]
    table_lines = (root / "file.tables.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in table_lines] == tables

    before = (root / "file.jsonl").read_bytes()
    again = cli("sync", str(run_dir))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "nothing to do" in again.stdout
    assert (root / "file.jsonl").read_bytes() == before
