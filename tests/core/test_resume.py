"""Resume (issue 13): a restarted run is the same run, and the steps it re-does are reconciled.

Attempts and superseded events are read back from the spool itself; delivery is checked on
the in-memory backend (which replaces what it shows on ``Backend.rewind``) and on the real
file backend through ``trackmux sync`` into a fresh destination.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import trackmux
from trackmux.cli.main import cli
from trackmux.core.spool.reader import SpoolReader
from trackmux.testing.memory import MemoryStore


def first_attempt(root: Path, steps: int = 10, backends: list[str] | None = None,
                  run_id: str = "r1") -> trackmux.Run:
    run = trackmux.init(project="p", name="exp", backends=backends or [], dir=root,
                        run_id=run_id, config={"lr": 0.1})
    assert isinstance(run, trackmux.Run)
    for step in range(1, steps + 1):
        run.log({"loss": float(step), "attempt": 1.0}, step=step)
    run.log_table("samples", ["x"], [["first"]], step=steps)
    return run


def resumed(root: Path, rewind_to: int | None, backends: list[str] | None = None,
            run_id: str = "r1", resume: str = "must") -> trackmux.Run:
    run = trackmux.init(project="p", backends=backends or [], dir=root, run_id=run_id,
                        resume=resume, rewind_to=rewind_to, config={"lr": 0.1})
    assert isinstance(run, trackmux.Run)
    return run


def live_series(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    reader = SpoolReader(run_dir)
    try:
        out: dict[str, list[tuple[int, float]]] = {}
        for event in reader.iter_events():
            if event.kind == "metrics":
                for key, value in event.data.items():
                    out.setdefault(key, []).append((event.step, value))
        return out
    finally:
        reader.close()


def test_resume_continues_the_same_spool_with_a_new_attempt(memory_backend: Any,
                                                            tmp_path: Path) -> None:
    run = first_attempt(tmp_path, backends=["memory"])
    run.finish()
    again = resumed(tmp_path, None, backends=["memory"])
    assert again.dir == run.dir and again.id == "r1" and again.name == "exp"
    assert again.step == 10 and again.started_at == run.started_at
    again.log({"loss": 11.0})  # default step continues after the last one
    again.finish()
    reader = SpoolReader(run.dir)
    attempts = reader.attempts()
    cursor = reader.cursor("memory")
    reader.close()
    assert [a.number for a in attempts] == [1, 2]
    assert all(a.pid == os.getpid() and a.host == socket.gethostname() for a in attempts)
    assert attempts[0].first_seq == 1 and attempts[1].first_seq == 13  # config+10+table
    assert attempts[0].started_at <= attempts[1].started_at <= time.time()
    assert cursor.remote_id == "memory-r1" and memory_backend["r1"].opened == 2
    assert memory_backend["r1"].metrics()["loss"][-1] == (11, 11.0)


def test_rewind_supersedes_later_steps_and_backends_replace_them(memory_backend: Any,
                                                                 tmp_path: Path) -> None:
    run = first_attempt(tmp_path, backends=["memory"])
    run.finish()
    again = resumed(tmp_path, 4, backends=["memory"])
    assert again.step == 4 and again.attempt.number == 2 and again.attempt.rewind_to == 4
    for step in range(5, 13):
        again.log({"loss": step + 0.5, "attempt": 2.0}, step=step)
    again.finish()
    got = memory_backend["r1"]
    assert got.rewinds == [4]
    assert got.metrics()["loss"] == [(s, float(s)) for s in range(1, 5)] + [
        (s, s + 0.5) for s in range(5, 13)]
    assert [e.kind for e in got.events].count("config") == 2  # config is never superseded
    assert got.of_kind("table") == []  # the table at step 10 was superseded
    reader = SpoolReader(run.dir)
    attempts = reader.attempts()
    superseded = reader._conn.execute("SELECT seq, attempt FROM superseded").fetchall()
    reader.close()
    assert attempts[1].superseded == 7 and {a for _, a in superseded} == {2}  # steps 5..10+table
    assert live_series(run.dir)["loss"] == got.metrics()["loss"]


def test_rewind_is_told_only_to_backends_that_hold_superseded_events(
        memory_backend: Any, tmp_path: Path) -> None:
    run = first_attempt(tmp_path, backends=[])  # nothing delivered anywhere
    run.finish()
    again = resumed(tmp_path, 4, backends=["memory"])
    again.log({"loss": 5.5}, step=5)
    again.finish()
    got = memory_backend["r1"]
    assert got.rewinds == []
    assert got.metrics()["loss"] == [(s, float(s)) for s in range(1, 5)] + [(5, 5.5)]


def test_sync_into_a_fresh_destination_delivers_only_live_events_once(tmp_path: Path) -> None:
    run = first_attempt(tmp_path, backends=[])
    run.finish()
    again = resumed(tmp_path, 4)
    for step in range(5, 8):
        again.log({"loss": step + 0.5}, step=step)
    again.finish()
    third = resumed(tmp_path, 6)  # a second crash and rewind
    third.log({"loss": 7.25}, step=7)
    third.finish()
    out = tmp_path / "fresh" / "m.jsonl"
    result = CliRunner().invoke(cli, ["sync", str(run.dir), "--to", "file", "-o",
                                      f"file.path={out}", "--no-progress"])
    assert result.exit_code == 0, result.output
    lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [(r["step"], r["data"]["loss"]) for r in lines] == [
        (1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0), (5, 5.5), (6, 6.5), (7, 7.25)]
    assert not out.with_name("m.tables.jsonl").exists()  # superseded table not sent


def test_show_and_runs_list_attempts(tmp_path: Path) -> None:
    first_attempt(tmp_path).finish()
    again = resumed(tmp_path, 4)
    again.log({"loss": 5.5}, step=5)
    again.finish()
    shown = CliRunner().invoke(cli, ["show", str(again.dir)])
    assert shown.exit_code == 0, shown.output
    assert "attempts (2):" in shown.output
    assert "attempt 2: started" in shown.output and f"pid {os.getpid()}" in shown.output
    assert "rewound to step 4 (7 earlier events superseded)" in shown.output
    assert "loss: last 5.5 at step 5; steps 1..5, 5 points" in shown.output
    listed = CliRunner().invoke(cli, ["runs", str(tmp_path)])
    assert listed.exit_code == 0, listed.output
    assert "attempt 1: started" in listed.output and "attempt 2: started" in listed.output


def test_report_plots_the_live_series(tmp_path: Path) -> None:
    from trackmux.report.load import load_run

    first_attempt(tmp_path).finish()
    again = resumed(tmp_path, 2)
    again.log({"loss": 3.5}, step=3)
    again.finish()
    assert load_run(again.dir).metrics["loss"] == [(1, 1.0), (2, 2.0), (3, 3.5)]


def test_allow_starts_a_run_that_does_not_exist(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path, run_id="new-1",
                        resume="allow", rewind_to=3)
    assert isinstance(run, trackmux.Run)
    assert run.id == "new-1" and run.step == -1 and run.attempt.number == 1
    assert run.attempt.rewind_to is None  # nothing to rewind in a new run
    run.finish()


def test_bad_input_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    first_attempt(tmp_path).finish()
    with pytest.raises(ValueError, match="rewind_to must be >= 0, got -1"):
        trackmux.init(project="p", dir=tmp_path, run_id="r1", resume="must", rewind_to=-1)
    with pytest.raises(ValueError, match=r"rewind_to=11 is beyond the last step .*\(10\)"):
        trackmux.init(project="p", dir=tmp_path, run_id="r1", resume="must", rewind_to=11)
    with pytest.raises(ValueError, match="rewind_to needs resume='allow' or 'must'"):
        trackmux.init(project="p", dir=tmp_path, run_id="r1", rewind_to=3)
    with pytest.raises(TypeError, match="rewind_to must be an int"):
        trackmux.init(project="p", dir=tmp_path, run_id="r1", resume="must", rewind_to=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="resume must be one of"):
        trackmux.init(project="p", dir=tmp_path, run_id="r1", resume="yes")
    with pytest.raises(ValueError, match="resume='must' needs the run_id"):
        trackmux.init(project="p", dir=tmp_path, resume="must")
    for unsafe in ("../r1", "a/b", "..", ".hidden", "", "x" * 101, "r 1"):
        with pytest.raises(ValueError, match="is not a safe folder name"):
            trackmux.init(project="p", dir=tmp_path, run_id=unsafe)
    with pytest.raises(TypeError, match="run_id must be str"):
        trackmux.init(project="p", dir=tmp_path, run_id=7)  # type: ignore[arg-type]
    with pytest.raises(FileExistsError, match="run 'r1' already exists"):
        trackmux.init(project="p", dir=tmp_path, run_id="r1")
    with pytest.raises(FileNotFoundError) as missing:
        trackmux.init(project="p", dir=tmp_path, run_id="nope", resume="must")
    assert "'nope'" in str(missing.value) and str(tmp_path / "p") in str(missing.value)
    assert not (tmp_path / "p" / "nope").exists()


def test_a_run_live_in_another_process_is_refused_naming_its_pid(tmp_path: Path) -> None:
    code = f"""
import sys, time, trackmux
run = trackmux.init(project="p", backends=[], dir={str(tmp_path)!r}, run_id="live")
run.log({{"x": 1.0}}, step=1)
run._spool.flush()
print("ready", flush=True)
sys.stdin.readline()
run.finish()
"""
    env = {**os.environ, "PYTHONPATH": str(Path(trackmux.__file__).parents[1])}
    env.pop("RANK", None)
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == b"ready"
        with pytest.raises(trackmux.SpoolLockedError, match=rf"live in another process "
                           rf"\(pid {child.pid} "):
            trackmux.init(project="p", backends=[], dir=tmp_path, run_id="live",
                          resume="allow")
        child.stdin.write(b"\n")
        child.stdin.flush()
        assert child.wait(30) == 0
    finally:
        child.kill()
    run = trackmux.init(project="p", backends=[], dir=tmp_path, run_id="live", resume="must")
    assert isinstance(run, trackmux.Run) and run.attempt.number == 2
    run.finish()


def test_rewind_after_a_partial_delivery_keeps_each_step_once(tmp_path: Path) -> None:
    """The backend delivered part of attempt 1 (cursor inside the superseded steps):
    it is told to rewind, and then gets each live step exactly once."""
    store = MemoryStore()
    run = first_attempt(tmp_path, backends=[])
    run.finish()
    from trackmux.core.delivery.sync import deliver
    from trackmux.testing.memory import MemoryBackend

    reader = SpoolReader(run.dir)
    reader.ack("memory", 8, "memory-r1", {})  # pretend seqs 1..8 (steps 1..7) were delivered
    reader.close()
    store.runs.clear()
    again = resumed(tmp_path, 5)
    for step in range(6, 9):
        again.log({"loss": step + 0.5}, step=step)
    again.finish()
    deliver(again.dir, {"memory": lambda: MemoryBackend({"store": store})})
    got = store["r1"]
    assert got.rewinds == [5]
    assert [s for s, _ in got.metrics()["loss"]] == [6, 7, 8]  # only what came after seq 8
