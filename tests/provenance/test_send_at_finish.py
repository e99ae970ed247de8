"""The provenance event is not lost when finish()'s wait for its collector runs out while
the collector is appending it (seen by the lead of issue 42's coverage work, 2026-12-07)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import trackmux
from trackmux.core.events import ProvenanceEvent
from trackmux.core.spool.reader import SpoolReader


def _provenance_events(run_dir: Path) -> list[Any]:
    reader = SpoolReader(run_dir)
    try:
        return list(reader.events_of_kind("provenance"))
    finally:
        reader.close()


def test_an_append_under_way_when_finish_stops_waiting_still_lands(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path, provenance=True)
    assert isinstance(run, trackmux.Run)
    entered, release = threading.Event(), threading.Event()
    real_append = run._append

    def slow_append(event: Any) -> None:
        if isinstance(event, ProvenanceEvent):  # the collector's send, on its thread
            entered.set()
            release.wait(600)
        real_append(event)

    run._append = slow_append  # type: ignore[method-assign]
    run.log({"a": 1.0}, step=1)
    assert entered.wait(600)  # the collector finished and is inside its append
    finishing = threading.Thread(target=run.finish, kwargs={"timeout": 2.0}, daemon=True)
    finishing.start()  # its provenance hook waits 1 s for the collector, then sends
    finishing.join(3.0)  # long enough for the old code to return and stop taking events
    release.set()
    finishing.join(120)
    assert not finishing.is_alive()
    assert run.dir is not None
    deadline = time.monotonic() + 60  # a commit after finish()'s budget lands a moment later
    while not _provenance_events(Path(run.dir)) and time.monotonic() < deadline:
        time.sleep(0.05)
    (event,) = _provenance_events(Path(run.dir))
    assert "python" in event.data
