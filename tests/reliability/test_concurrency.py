"""Threads, forks and ranks: 8 threads logging at once lose nothing; a forked child's calls
are ignored with one warning; only rank 0 creates a run unless ``all_ranks=True``."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

import pytest

import trackmux


def test_eight_threads_logging_at_once_lose_nothing(tmp_path: Path, memory_backend: Any) -> None:
    run = trackmux.init(project="threads", backends=["memory"], dir=tmp_path)
    assert isinstance(run, trackmux.Run)
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def worker(n: int) -> None:
        try:
            start.wait()
            for i in range(2000):
                run.log({f"t{n}/value": i, "shared": n * 10_000 + i}, step=i)
                if i % 500 == 0:
                    run.log_table(f"t{n}/table", ["i"], [[i]], step=i)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    summary = run.finish(timeout=20)
    assert not errors, errors
    assert summary.complete and summary.events == 8 * 2000 + 8 * 4
    got = memory_backend[run.id].metrics()
    for n in range(8):
        assert sorted(v for _, v in got[f"t{n}/value"]) == list(range(2000))
    assert sorted(v for _, v in got["shared"]) == sorted(
        n * 10_000 + i for n in range(8) for i in range(2000))
    seqs = [e.seq for e in memory_backend[run.id].events]
    assert seqs == sorted(set(seqs))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_is_ignored_with_one_warning_and_parent_unaffected(
        tmp_path: Path, memory_backend: Any) -> None:
    run = trackmux.init(project="fork", backends=["memory"], dir=tmp_path)
    assert isinstance(run, trackmux.Run)
    run.log({"x": 0.0}, step=0)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: log, then report what happened through the pipe
        status = 1
        try:
            records: list[str] = []
            handler = logging.Handler()
            handler.emit = lambda r: records.append(r.getMessage())  # type: ignore[method-assign]
            logging.getLogger("trackmux").addHandler(handler)
            for step in range(1, 50):
                run.log({"x": float(step)}, step=step)
            run.log_table("t", ["a"], [[1]])
            summary = run.finish(timeout=1)
            warned = [m for m in records if "forked process" in m]
            os.write(write_end, f"{len(warned)} {summary.status}".encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    report = os.read(read_end, 100).decode()
    os.close(read_end)
    assert status == 0 and report == "1 forked", report
    for step in range(1, 5):
        run.log({"x": float(step * 100)}, step=step)
    summary = run.finish(timeout=10)
    assert summary.complete and summary.status == "finished"
    assert memory_backend[run.id].metrics()["x"] == [(0, 0.0), (1, 100.0), (2, 200.0),
                                                     (3, 300.0), (4, 400.0)]


@pytest.mark.parametrize("variable", ["RANK", "LOCAL_RANK"])
def test_only_rank_zero_creates_a_run_by_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str,
        memory_backend: Any, strict: None) -> None:
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setenv(variable, "3")
    run = trackmux.init(project="ranks", name="exp", backends=["memory"], dir=tmp_path)
    assert isinstance(run, trackmux.DisabledRun) and "rank 3" in run.reason
    run.log({"x": 1.0})
    with pytest.raises(TypeError, match="'bad'"):
        run.log({"bad": "text"})  # input is still checked on every rank
    assert run.finish().status == "disabled"
    assert not list(tmp_path.rglob("spool.db"))
    monkeypatch.setenv(variable, "0")
    zero = trackmux.init(project="ranks", name="exp", backends=["memory"], dir=tmp_path)
    assert isinstance(zero, trackmux.Run)
    zero.finish(timeout=5)


def test_all_ranks_gives_each_rank_its_own_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory_backend: Any) -> None:
    runs = []
    for rank in range(3):
        monkeypatch.setenv("RANK", str(rank))
        run = trackmux.init(project="ranks", name="exp", backends=["memory"], dir=tmp_path,
                            all_ranks=True)
        assert isinstance(run, trackmux.Run)
        run.log({"rank": float(rank)})
        runs.append(run)
    for run in runs:
        assert run.finish(timeout=60).complete  # returns once delivered
    assert [r.name for r in runs] == ["exp", "exp", "exp"]
    assert len({r.id for r in runs}) == 3 and len({r.dir for r in runs}) == 3
    assert len({r.dir for r in runs}) == 3
    assert [memory_backend[r.id].metrics()["rank"][0][1] for r in runs] == [0.0, 1.0, 2.0]
