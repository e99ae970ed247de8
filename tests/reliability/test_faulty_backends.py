"""A plugin that raises everywhere, one that hangs in write, one that hangs in open, all
in one run beside healthy backends: the training loop and the healthy backends are
unaffected, and each faulty backend is named once in the log, not once per call."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _reliability import file_lines, wait_delivered

import trackmux

FAULTY = ("rel-raising", "rel-hanging", "rel-hanging-open")


def test_raising_and_hanging_plugins_leave_training_and_other_backends_alone(
        faulty_backends: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="trackmux")
    out = tmp_path / "out.jsonl"
    run = trackmux.init(project="faulty", backends=[*FAULTY, "memory", "file"],
                        dir=tmp_path / "spool", config={"lr": 0.1},
                        backend_options={"file": {"path": str(out)}})
    assert isinstance(run, trackmux.Run)
    for step in range(1500):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
        if step % 100 == 0:
            run.log_table("samples", ["prompt", "reward"], [["p", step]], step=step)
            run.log_image("img", np.zeros((4, 4), dtype=np.uint8), step=step)
    wait_delivered(run, ["memory", "file"])  # while the faulty ones are stuck
    summary = run.finish(timeout=3)
    received = faulty_backends[run.id]
    assert [s for s, _ in received.metrics()["loss"]] == list(range(1500))
    assert len(received.of_kind("table")) == 15 and len(received.of_kind("image")) == 15
    assert received.closed == "finished"
    assert [r["step"] for r in file_lines(out)] == list(range(1500))
    assert set(summary.pending) == set(FAULTY)
    messages = [r.getMessage() for r in caplog.records]
    for name in FAULTY:
        naming = [m for m in messages if repr(name) in m or f"'{name}':" in m]
        assert 1 <= len(naming) <= 2, (name, naming)  # its problem and/or the finish summary
    raising = [m for m in messages if "backend 'rel-raising'" in m]
    assert len(raising) == 1 and "open exploded" in raising[0]
    assert [p.backend for p in summary.problems] == ["rel-raising"]
    assert summary.problems[0].count >= 1


def test_plugin_raising_only_in_write_is_reported_once_over_many_batches(
        faulty_backends: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="trackmux")
    run = trackmux.init(project="faulty", backends=["rel-raising", "memory"],
                        dir=tmp_path / "spool",
                        backend_options={"rel-raising": {"where": "write"}})
    for step in range(300):
        run.log({"x": step}, step=step)
    wait_delivered(run, ["memory"])
    summary = run.finish(timeout=2)
    reports = [r.getMessage() for r in caplog.records if "backend 'rel-raising'" in r.getMessage()]
    assert len(reports) == 1 and "write exploded" in reports[0]
    assert len(faulty_backends[run.id].metrics()["x"]) == 300
    assert summary.pending == {"rel-raising": summary.events}
