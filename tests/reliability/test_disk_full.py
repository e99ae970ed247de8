"""A full disk (a 2 MB tmpfs) or the configured cap (``max_spool_bytes`` /
TRACKMUX_MAX_SPOOL_BYTES): training continues, the condition is reported once, events
wait in memory up to ``max_buffered`` and are then dropped and counted; the count is in
the run's meta (``dropped_events``), in ``trackmux runs`` and in FinishSummary.dropped."""

from __future__ import annotations

import functools
import logging
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _reliability import trackmux_cli

import trackmux
from trackmux.core.lifecycle import run as run_module
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.writer import SpoolWriter

BUFFERED = 300


@pytest.fixture
def small_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    """init() has no max_buffered argument; a small one keeps the test light."""
    monkeypatch.setattr(run_module, "SpoolWriter",
                        functools.partial(SpoolWriter, max_buffered=BUFFERED))
    monkeypatch.setattr("trackmux.core.spool.writer.DISK_RETRY_INTERVAL", 0.1)


@pytest.fixture
def tiny_disk(tmpfs: Callable[[str], Path]) -> Path:
    return tmpfs("2m")


def _fill(run: Any, steps: int) -> None:
    for step in range(steps):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
        run.log_text("sample", f"{step} " + "lorem ipsum " * 1500, step=step)  # ~18 KB
        if step % 10 == 9:  # the writer commits in between (the cap is checked per commit)
            wait_for_writer(run)


def wait_for_writer(run: Any, timeout: float = 60.0) -> None:
    """Until the writer took what was logged, or met the cap or the full disk. A sleep
    was not always enough on a loaded machine: the queue then ran into ``max_buffered``
    before the cap, and the spool reported twice (buffer full, written, cap reached)."""
    spool = run._spool
    deadline = time.monotonic() + timeout
    while spool.queued and spool.status.full is None:
        assert time.monotonic() < deadline, f"the writer took nothing in {timeout} s"
        time.sleep(0.005)


def _check(run: Any, summary: Any, caplog: pytest.LogCaptureFixture, memory: Any,
           runs_dir: Path, exact_meta: bool = True) -> None:
    full = [r for r in caplog.records if "cannot take more events" in r.getMessage()]
    assert len(full) == 1, [r.getMessage() for r in full]
    assert summary.dropped > 0 and not summary.complete
    reader = SpoolReader(run.dir)
    meta = reader.meta()
    spooled = reader.count()
    reader.close()
    if exact_meta:
        assert meta["dropped_events"] == summary.dropped
    else:  # a full disk may refuse even the last meta update: best effort, never more
        assert 0 < meta["dropped_events"] <= summary.dropped
    assert meta["state"] == "finished"
    assert spooled > 0
    assert len(memory[run.id].metrics()["loss"]) + len(memory[run.id].of_kind("text")) == spooled
    listed = trackmux_cli("runs", str(runs_dir))
    shown = f"{meta['dropped_events']} events dropped (spool full)"
    assert shown in listed.stdout, listed.stdout + listed.stderr


def test_size_cap_keeps_training_going_and_counts_drops(
        tmp_path: Path, small_buffer: None, memory_backend: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="trackmux")
    run = trackmux.init(project="cap", backends=["memory"], dir=tmp_path,
                        max_spool_bytes=600_000)
    _fill(run, 200)  # ~3.6 MB of text against a 0.6 MB cap
    summary = run.finish(timeout=5)
    _check(run, summary, caplog, memory_backend, tmp_path)


def test_cap_from_the_environment(tmp_path: Path, small_buffer: None, memory_backend: Any,
                                  monkeypatch: pytest.MonkeyPatch,
                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="trackmux")
    monkeypatch.setenv("TRACKMUX_MAX_SPOOL_BYTES", "400000")
    run = trackmux.init(project="cap", backends=["memory"], dir=tmp_path)
    _fill(run, 120)
    summary = run.finish(timeout=5)
    _check(run, summary, caplog, memory_backend, tmp_path)


def test_full_disk_keeps_training_going_and_counts_drops(
        tiny_disk: Path, small_buffer: None, memory_backend: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="trackmux")
    run = trackmux.init(project="full", backends=["memory"], dir=tiny_disk)
    _fill(run, 250)  # ~4.5 MB of text on a 2 MB filesystem
    summary = run.finish(timeout=5)
    _check(run, summary, caplog, memory_backend, tiny_disk, exact_meta=False)


def test_a_full_disk_holds_the_buffer_bound_not_twice(
        tmpfs: Callable[[str], Path], fill_disk: Callable[[Path], None], memory_backend: Any,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 27: each retry on a full disk used to encode a whole batch before finding the
    disk still full, so the trainer held the queue plus its encoded copy (about twice
    ``max_buffered_bytes``). A 64 KB probe write now finds it full: the peak stays near the
    bound (measured: 4.3-5.0 MB against a 4 MB bound; 13.2-13.7 MB without the probe and
    with the failed batch kept alive by the traceback through the retry wait). Memory is
    traced in this process (the writer thread is in it), from the first failed commit on."""
    disk = tmpfs("8m")  # room for the 4 MB queue once the filler is gone
    caplog.set_level(logging.WARNING, logger="trackmux")
    bound = 4 * 2**20
    monkeypatch.setenv("TRACKMUX_MAX_BUFFERED_BYTES", str(bound))
    monkeypatch.setattr("trackmux.core.spool.writer.DISK_RETRY_INTERVAL", 0.02)
    run = trackmux.init(project="full", backends=["memory"], dir=disk)
    run.log({"before": 1.0}, step=0)
    run._spool.flush(5)
    fill_disk(disk / "filler")
    text = "x" * 50_000  # ~50 KB an event: the bound holds about 80 of them
    tracemalloc.start()
    try:
        for step in range(400):
            if step == 20:  # the first commit on the full disk has failed: from here on,
                deadline = time.monotonic() + 60  # retries only
                while run._spool.status.full is None and time.monotonic() < deadline:
                    time.sleep(0.02)
                assert run._spool.status.full is not None, "no commit failed in 60 s"
                tracemalloc.reset_peak()
            run.log_text("t", f"{step} {text}", step=step)
            if step % 20 == 19:
                time.sleep(0.1)  # several retries while the queue sits at its bound
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert run._spool.status.full is not None and run._spool.status.dropped > 0
    assert peak < 1.4 * bound, f"peak {peak / 2**20:.1f} MB against a {bound / 2**20:.0f} MB bound"
    (disk / "filler").unlink()  # space again: what waited in memory is written
    summary = run.finish(timeout=60)  # returns once what was spooled is delivered
    assert summary.dropped > 0 and summary.events > 1
    [said] = [r.getMessage() for r in caplog.records if f"run {run.id} dropped" in
              r.getMessage()]
    assert "because the spool could not take them" in said  # the cause, in words
    assert len(memory_backend[run.id].of_kind("text")) == summary.events - 1
