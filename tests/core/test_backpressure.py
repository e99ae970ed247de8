"""A caller faster than the disk costs bounded memory, not gigabytes (benchmark B3)."""

from __future__ import annotations

from pathlib import Path

import trackmux
from trackmux.core.spool import writer as spool


def test_queue_stays_bounded_when_the_caller_outruns_the_writer(tmp_path: Path) -> None:
    run = trackmux.init(project="bp", backends=[], dir=tmp_path)
    assert isinstance(run, trackmux.Run)
    data = {f"k{j}": j * 0.5 for j in range(100)}
    deepest = 0
    for step in range(30_000):
        run.log(data, step=step)
        deepest = max(deepest, len(run._spool._queue))
    summary = run.finish(timeout=60)
    assert deepest <= spool.HIGH_WATER + 1, deepest
    assert summary.events == 30_000 and summary.dropped == 0
