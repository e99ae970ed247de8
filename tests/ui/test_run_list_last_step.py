"""The run list's last step is the run's, not its chart cache's (issue 43 item 5): a run
that appears while the page is open, or moves and finishes while no chart reads it, shows
its latest step at once, in the folder UI and (over the same rows) the store UI."""

from __future__ import annotations

from pathlib import Path

import pytest

import trackmux
from trackmux.ui.store import Store, latest_step


def _row(store: Store, run: trackmux.Run) -> dict[str, object]:
    store.scan(force=True)  # the server looks for new runs every few seconds
    return next(r for r in store.rows() if r["dir"] == str(Path(run.dir).resolve()))


def _log(run: trackmux.Run, steps: range) -> None:
    for step in steps:
        run.log({"loss": 1.0 / (step + 1)}, step=step)
    assert run.flush(timeout=30)


def test_a_run_that_appears_or_moves_while_listed_shows_its_latest_step(
        tmp_path: Path) -> None:
    first = trackmux.init("p", "first", backends=[], dir=tmp_path, delivery="thread")
    assert isinstance(first, trackmux.Run)
    _log(first, range(5))
    store = Store([tmp_path])
    assert _row(store, first)["last_step"] == 4  # no chart has read it: not blank

    rid = str(_row(store, first)["id"])
    assert store.cache(rid) is not None  # a chart read it once (the run was ticked) ...
    _log(first, range(5, 10))
    first.finish(timeout=30)
    row = _row(store, first)
    assert row["state"] == "finished"
    assert row["last_step"] == 9  # ... and it moved on since: its step, not the cache's

    second = trackmux.init("p", "second", backends=[], dir=tmp_path, delivery="thread")
    assert isinstance(second, trackmux.Run)
    _log(second, range(3))
    assert _row(store, second)["last_step"] == 2  # appeared while the list was open
    second.finish(timeout=30)


def test_latest_step_leaves_out_config_and_a_missing_spool(tmp_path: Path) -> None:
    assert latest_step(tmp_path / "nothing-here") is None
    run = trackmux.init("p", "cfg", backends=[], dir=tmp_path, delivery="thread",
                        config={"lr": 0.1})
    assert isinstance(run, trackmux.Run)
    assert run.flush(timeout=30)
    assert latest_step(Path(run.dir)) is None  # only its config so far
    _log(run, range(7))
    assert latest_step(Path(run.dir)) == 6
    run.finish(timeout=30)


@pytest.fixture(autouse=True)
def _no_provenance(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKMUX_PROVENANCE", "0")
