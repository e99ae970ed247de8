"""``trackmux sync`` killed with SIGKILL mid-delivery and rerun: every event exactly once.

The child is the real ``trackmux sync`` command with one extra plugin registered: a
file backend that writes (and flushes) one event at a time and sleeps a little, so a kill
lands in the middle of a batch with part of it already on disk past the acknowledged
offset. The rerun must truncate that part and continue from the cursor.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from pathlib import Path

import pytest
from _reliability import file_lines, spawn

import trackmux
from trackmux.core.spool.reader import SpoolReader

EVENTS = 3000
TABLE_EVERY = 100

CHILD = r"""
import sys, time, types, trackmux
from trackmux.plugins.file import FileBackend

class SlowFile(FileBackend):
    def write(self, events):
        for event in events:
            super().write([event])
            self.flush()
            time.sleep(0.0003)

@trackmux.hookimpl
def trackmux_register_backends(register):
    register("slowfile", SlowFile)

trackmux.register_plugin(types.SimpleNamespace(trackmux_register_backends=trackmux_register_backends),
                         "slowfile-test")
sys.argv = ["trackmux", "sync", *sys.argv[1:]]
from trackmux.cli.main import main
main()
"""


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished spool-only run with EVENTS metrics events and a table every 100 steps."""
    root = tmp_path_factory.mktemp("sync-template")
    run = trackmux.init(project="ks", name="ks", backends=[], dir=root)
    for step in range(EVENTS):
        run.log({"loss": 1.0 / (step + 1), "step": step}, step=step)
        if step % TABLE_EVERY == 0:
            run.log_table("samples", ["prompt", "reward"], [[f"p{step}", step / 10]], step=step)
    assert run.finish(timeout=30).complete
    assert isinstance(run, trackmux.Run)
    return run.dir


def _sync(run_dir: Path, out: Path) -> list[str]:
    return [str(run_dir), "--to", "slowfile", "-o", f"slowfile.path={out}", "--no-progress"]


def test_sync_killed_mid_delivery_and_rerun_delivers_exactly_once(
        template: Path, tmp_path: Path) -> None:
    rng = random.Random(7)
    kills_mid_batch = 0
    for trial in range(5):
        run_dir = tmp_path / f"run{trial}"
        shutil.copytree(template, run_dir)
        out = tmp_path / f"out{trial}" / "m.jsonl"
        for _attempt in range(2):
            child = spawn(CHILD, *_sync(run_dir, out))
            deadline = time.monotonic() + 30
            while not out.exists() or out.stat().st_size == 0:  # delivery has begun
                assert child.poll() is None, child.stderr.read().decode()  # type: ignore[union-attr]
                assert time.monotonic() < deadline
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.8))
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
            reader = SpoolReader(run_dir)
            acked = reader.cursor("slowfile").acked_seq
            reader.close()
            # killed with unacknowledged lines on disk, or in the middle of writing one (a
            # torn last line, which the rerun must cut as well: not JSON to parse here)
            on_disk = out.read_bytes()
            if on_disk.count(b"\n") > acked or not on_disk.endswith(b"\n"):
                kills_mid_batch += 1
        final = spawn(CHILD, *_sync(run_dir, out))
        stdout, stderr = final.communicate(timeout=120)
        assert final.returncode == 0, stdout.decode() + stderr.decode()
        assert b"complete (" in stdout or b"nothing to do" in stdout
        lines = file_lines(out)
        assert [r["step"] for r in lines] == list(range(EVENTS)), f"trial {trial}"
        assert [r["data"]["step"] for r in lines] == list(range(EVENTS))
        tables = file_lines(out.with_name("m.tables.jsonl"))
        assert [r["step"] for r in tables] == list(range(0, EVENTS, TABLE_EVERY))
    assert kills_mid_batch >= 1, "no kill landed mid-batch; the test did not test redelivery"
