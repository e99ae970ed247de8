"""A run's spool read in bulk and in bounded pieces: the bulk read keeps every point where
the event-by-event read put it, a chart over runs not yet read answers with what is
read so far (flagged partial, not kept as an answer) and completes, and the warm-up
reads every run to its end a page at a time."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from trackmux.core.events import ConfigEvent, MetricsEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.writer import SpoolWriter

pytest.importorskip("numpy")
from trackmux.ui import queries
from trackmux.ui import store as store_mod
from trackmux.ui.runcache import RunCache
from trackmux.ui.store import Store, run_id_of


def write_spool(run_dir: Path, steps: int, *, mixed: bool = False) -> Path:
    """A finished spool of ``steps`` metrics events; ``mixed``: keys that come and go,
    change order, and non-finite and integer values."""
    writer = SpoolWriter(run_dir, max_buffered=steps + 10)
    writer.set_meta(run_id=run_dir.name, project="bounded", name=run_dir.name,
                    state="running", started_at=1000.0, backends=[], pid=0, host="test")
    writer.append(ConfigEvent({"lr": 0.1}, 0, 1000.0))
    for step in range(steps):
        data: dict[str, float | int] = {"loss": 1.0 / (step + 1), "reward": step * 0.5}
        if mixed:
            if step % 3 == 0:
                data["rare"] = step  # an int, on every third step only
            if step % 5 == 0:
                data = dict(reversed(list(data.items())))  # the same keys, another order
            if step == 7:
                data["loss"] = math.nan
            if step == 8:
                data["reward"] = -math.inf
        writer.append(MetricsEvent(data, step, 1000.0 + step))
        if mixed and step == 4:
            writer.append(ConfigEvent({"lr": 0.2}, step, 1000.0 + step))
    writer.set_meta(state="finished", finished_at=1000.0 + steps)
    writer.close(timeout=60)
    return run_dir


def one_by_one(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every key's (step, value) points, read event by event (the reference)."""
    reader = SpoolReader(run_dir)
    out: dict[str, list[tuple[int, float]]] = {}
    try:
        for event in reader.iter_events():
            if isinstance(event, MetricsEvent):
                for key, value in event.data.items():
                    out.setdefault(key, []).append((event.step, float(value)))
    finally:
        reader.close()
    return out


def cached(cache: RunCache) -> dict[str, list[tuple[int, float]]]:
    return {key: [(cache.row_step[row], value)
                  for row, value in zip(series.rows, series.values, strict=True)]
            for key, series in cache.keys.items()}


def same(a: dict[str, list[tuple[int, float]]], b: dict[str, list[tuple[int, float]]]) -> bool:
    def norm(points: list[tuple[int, float]]) -> list[tuple[int, str]]:
        return [(step, repr(value)) for step, value in points]  # nan == nan here
    return a.keys() == b.keys() and all(norm(a[k]) == norm(b[k]) for k in a)


def test_the_bulk_read_puts_every_point_where_the_event_read_does(tmp_path: Path) -> None:
    run_dir = write_spool(tmp_path / "mixed", 200, mixed=True)
    cache = RunCache(run_dir)
    assert cache.refresh() > 200
    expected = one_by_one(run_dir)
    assert same(cached(cache), expected)
    assert len(expected["rare"]) == 67 and expected["rare"][1] == (3, 3.0)
    assert cache.config == {"lr": 0.2}
    assert cache.points == sum(len(v) for v in expected.values())
    assert not cache.partial and cache.error is None


def test_a_limited_refresh_reads_on_where_it_stopped(tmp_path: Path) -> None:
    run_dir = write_spool(tmp_path / "mixed", 300, mixed=True)
    cache = RunCache(run_dir)
    cache.refresh(limit=50)
    assert cache.partial and 45 <= len(cache.row_seq) <= 50  # events: config ones too
    rounds = 1
    while cache.partial:
        cache.refresh(limit=50)
        rounds += 1
        assert rounds < 20, "the limited reads never reached the end"
    assert rounds >= 5
    assert same(cached(cache), one_by_one(run_dir))
    assert cache.refresh(limit=50) == 0 and not cache.partial  # nothing new: no read


def test_a_chart_answer_is_partial_and_flagged_then_completes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = [write_spool(tmp_path / "bounded" / f"run-{i}", 1500) for i in range(3)]
    monkeypatch.setattr(queries, "REQUEST_BUDGET", 0.0)  # every request: REQUEST_FIRST a run
    monkeypatch.setattr(queries, "REQUEST_FIRST", 200)
    store = Store([tmp_path])
    rids = [run_id_of(d.resolve()) for d in dirs]
    first = queries.series(store, "loss", rids, width=100000)
    assert first["partial"] is True
    assert all(run["partial"] for run in first["runs"])
    assert first["x"][-1] < 1499  # a beginning of each run, not all of it
    assert not store.answers  # a partial answer is not kept
    asks = 1
    answer = first
    while answer["partial"]:
        answer = queries.series(store, "loss", rids, width=100000)
        asks += 1
        assert asks < 50, "the chart never completed"
    assert asks >= 3
    assert answer["x"][0] == 0 and answer["x"][-1] == 1499 and len(answer["x"]) == 1500
    assert not any(run["partial"] for run in answer["runs"])
    assert len(store.answers) == 1  # the complete answer is kept
    assert queries.series(store, "loss", rids, width=100000) is next(iter(store.answers.values()))


def test_a_tail_over_a_run_read_in_part_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = write_spool(tmp_path / "bounded" / "run-0", 1000)
    monkeypatch.setattr(queries, "REQUEST_BUDGET", 0.0)
    monkeypatch.setattr(queries, "REQUEST_FIRST", 300)
    store = Store([tmp_path])
    rid = run_id_of(run_dir.resolve())
    seen, cursor, partial = [], 0, True
    while partial:
        got = queries.tail(store, "reward", {rid: cursor})
        (run,) = got["runs"]
        seen += run["x"]
        cursor, partial = run["cursor"], run["partial"]
        assert got["partial"] is partial
        assert len(seen) <= 1000
    assert seen == list(range(1000))


def test_the_warm_up_reads_every_run_to_its_end_a_page_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = [write_spool(tmp_path / "bounded" / f"run-{i}", 700 + 100 * i) for i in range(3)]
    monkeypatch.setattr(store_mod, "WARM_PAGE", 128)
    store = Store([tmp_path])
    store.warm()
    for run_dir in dirs:
        cache = store.caches[run_id_of(run_dir.resolve())]
        assert not cache.partial
        assert same(cached(cache), one_by_one(run_dir))


def test_the_warm_up_steps_aside_while_a_request_is_served(tmp_path: Path) -> None:
    store = Store([tmp_path])
    with store.serving():
        began = time.monotonic()
        store.step_aside(longest=0.3)
        assert time.monotonic() - began >= 0.3  # waited for the request (up to its cap)
    began = time.monotonic()
    store.step_aside(longest=600)
    assert time.monotonic() - began < 60  # nothing in flight: at once (only a wait for
    # the 600 s cap would pass 60 s: a hang bound, not a speed claim)
    assert store.inflight == 0


def test_the_report_asks_for_whole_runs_never_a_partial_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = [write_spool(tmp_path / "bounded" / f"run-{i}", 800) for i in range(2)]
    monkeypatch.setattr(queries, "REQUEST_BUDGET", 0.0)
    monkeypatch.setattr(queries, "REQUEST_FIRST", 50)
    store = Store([tmp_path])  # no warm-up: the caches are empty
    rids = [run_id_of(d.resolve()) for d in dirs]
    answer = queries.series(store, "reward", rids, width=100000, whole=True)
    assert answer["partial"] is False and len(answer["x"]) == 800
    assert queries.keys(store, rids, whole=True)["groups"] == {"other": ["loss", "reward"]}
