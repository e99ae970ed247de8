"""attach() without a run id in a process with two unfinished runs (a notebook or a
sweep that started a run before it finished the last) attaches to the newest, every
time: the live runs were a WeakSet, whose order is arbitrary, and a handle cached for the
older run kept being returned (a full suite once sent a test's samples to a run an
earlier failed test had left open)."""

from __future__ import annotations

from pathlib import Path

import trackmux
from trackmux.core.events import MetricsEvent
from trackmux.core.spool.reader import SpoolReader


def _metrics(run_dir: Path) -> list[dict[str, float]]:
    reader = SpoolReader(run_dir)
    try:
        return [e.data for e in reader.iter_events() if isinstance(e, MetricsEvent)]
    finally:
        reader.close()


def test_attach_goes_to_the_newest_unfinished_run_of_the_process(tmp_path: Path) -> None:
    runs = [trackmux.init(project="p", backends=[], dir=tmp_path / str(i))
            for i in range(6)]
    older = runs[:-1]
    first = trackmux.attach(role="rollout")  # cached, then a newer run starts
    first.log({"x": 1.0}, step=0)
    first.flush(30)
    newest = trackmux.init(project="p", backends=[], dir=tmp_path / "new")
    handle = trackmux.attach(role="rollout")
    assert handle is not first
    handle.log({"x": 2.0}, step=0)
    assert handle.flush(30)
    assert trackmux.attach(role="rollout") is handle  # still the newest: same handle
    newest.finish()
    for run in runs:
        run.finish()
    assert _metrics(newest.dir) == [{"rollout/x": 2.0}]
    assert _metrics(runs[-1].dir) == [{"rollout/x": 1.0}]
    assert all(_metrics(run.dir) == [] for run in older)
