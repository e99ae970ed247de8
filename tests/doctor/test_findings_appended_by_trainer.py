"""The doctor runs in the idle-class delivery process, but while the trainer lives its
findings are appended to spool.db by the trainer (core/delivery/appends.py): the delivery
process never holds the spool's write lock, so it cannot hold the trainer's writer (and a
log() through backpressure) while the OS keeps it off the CPU (issue 43 item 17)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import trackmux
from trackmux.core.delivery import appends
from trackmux.core.delivery.watch import identity
from trackmux.core.events import FindingEvent
from trackmux.core.spool.reader import SpoolReader

DEADLINE = 120.0


def test_the_trainer_appends_the_delivery_process_findings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answers: list[dict[str, Any]] = []
    real = appends.append_requested

    def recording(run_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
        answer = real(run_dir, request)
        answers.append({**answer, "events": appends.decode(request["events"])})
        return answer

    monkeypatch.setattr(appends, "append_requested", recording)
    run = trackmux.init(project="p", backends=[], dir=tmp_path, delivery="process",
                        provenance=False, system_metrics=False)
    assert isinstance(run, trackmux.Run)
    for step in range(5):
        run.log({"loss": 1.0}, step=step)
    run.log({"loss": float("nan")}, step=5)
    deadline = time.monotonic() + DEADLINE
    while not any(f["rule"] == "nonfinite" for f in run.findings()):
        assert time.monotonic() < deadline, "the doctor never reported the NaN"
        run.flush(timeout=10)
        time.sleep(0.05)
    run.finish(timeout=30)

    reader = SpoolReader(Path(run.dir))
    try:
        stored = [e for e in reader.events_of_kind("finding") if isinstance(e, FindingEvent)]
    finally:
        reader.close()
    nonfinite = [f for f in stored if f.rule == "nonfinite"]
    assert nonfinite and nonfinite[0].evidence[0] == ("loss", 5, "nan")
    sent = [identity(f) for answer in answers for f in answer["events"]]
    assert identity(nonfinite[0]) in sent  # the trainer appended it ...
    assert all("seq" in a for a in answers), answers  # ... with no failure
    assert len({identity(f) for f in stored}) == len(stored)  # each finding once


def test_with_no_answer_the_delivery_process_appends_only_what_is_missing(
        tmp_path: Path) -> None:
    """The trainer finished or died with a request in flight (it may have appended it
    after all): the delivery process appends the findings the spool lacks, once."""
    from trackmux.core.spool.writer import append_events

    run = trackmux.init(project="p", backends=[], dir=tmp_path, delivery="thread",
                        doctor=False, provenance=False, system_metrics=False)
    run.log({"loss": 1.0}, step=0)
    run.finish(timeout=30)
    run_dir = Path(run.dir)
    first = FindingEvent("nonfinite", "critical", ("loss",), "first", 0, 1.0)
    second = FindingEvent("nonfinite", "critical", ("loss",), "second", 1, 2.0)
    append_events(run_dir, [first])  # the trainer's late append of the first
    listening = [True]

    def send(message: dict[str, Any]) -> bool:
        listening[0] = False  # sent; then the trainer is gone, no answer comes
        return True

    last = appends.TrainerAppender(run_dir, send, lambda: listening[0])([first, second])
    reader = SpoolReader(run_dir)
    try:
        stored = [identity(e) for e in reader.events_of_kind("finding")
                  if isinstance(e, FindingEvent)]
        assert last == reader.last_seq()
    finally:
        reader.close()
    assert stored == [identity(first), identity(second)]
