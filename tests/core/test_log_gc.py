"""What ``log()`` leaves for the garbage collector (issue 43 item 17): nothing it keeps
tracking. A queued ``MetricsEvent`` stayed in the collector's lists until the writer
stored it, so at a million calls a second the queue was promoted to the oldest generation
and died there; full collections of the whole heap then ran every few thousand calls,
each holding the GIL for its whole length (12 ms with mlflow imported), inside a
``log()`` or in the writer."""

from __future__ import annotations

import gc
import math
from pathlib import Path
from typing import Any

import pytest

import trackmux
from trackmux.core.events import MetricsEvent
from trackmux.core.spool.reader import SpoolReader


def test_queued_metrics_leave_the_collectors_lists_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path, provenance=False,
                        doctor=False)
    queued: list[Any] = []  # what log() hands the writer, whenever the writer takes it
    append = run._spool.append

    def keep(item: Any) -> None:
        queued.append(item)
        append(item)

    monkeypatch.setattr(run._spool, "append", keep)
    try:
        for step in range(500):
            run.log({"loss": 1 / (step + 1), "acc": step, "ok": True}, step=step)
        assert len(queued) == 500
        gc.collect(0)  # one young collection, as the loop's own allocations make
        assert not [q for q in queued if gc.is_tracked(q)][:3]
        assert run.flush(timeout=60)
    finally:
        run.finish(timeout=60)
    reader = SpoolReader(run.dir)
    try:
        events = [e for e in reader.read(0, 10_000).events if isinstance(e, MetricsEvent)]
    finally:
        reader.close()
    assert [e.step for e in events] == list(range(500))
    assert events[7].data == {"loss": 1 / 8, "acc": 7, "ok": True}
    assert math.isclose(events[-1].data["loss"], 1 / 500)

