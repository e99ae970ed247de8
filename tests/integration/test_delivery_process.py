"""Issue 12: delivery runs in a process of its own beside the trainer.

Each test starts a real trainer (``_trainer.py``) that logs to the file backend and to
mlflow's SQLite store, ends it in one of the ways trainers end, and reads back what the
file and mlflow's own database hold, with no ``trackmux sync`` run in between.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _support import HERE, child_env, cursor, process_alive, spooled, wait_until

from trackmux.testing.signals import default_sigint

pytest.importorskip("mlflow")

STEPS = 300


_alive = process_alive


def _start(tmp_path: Path, end: str, steps: int = STEPS, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "_trainer.py"), str(tmp_path / "spool"),
         str(tmp_path / "mlflow.db"), str(steps), end],
        env=child_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=default_sigint)


def _logged(proc: subprocess.Popen[str]) -> tuple[Path, int | None]:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("LOGGED "):
            _, run_dir, pid = line.split()
            return Path(run_dir), None if pid == "None" else int(pid)
    raise AssertionError("trainer never logged: " + (proc.stderr.read() if proc.stderr else ""))


def _mlflow_rows(db: Path, run_dir: Path) -> list[tuple[str, int]]:
    remote = cursor(run_dir, "mlflow").remote_id
    if remote is None or not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return sorted(conn.execute("SELECT key, step FROM metrics WHERE run_uuid = ?",
                                   (remote,)).fetchall())
    except sqlite3.OperationalError:  # schema not created yet
        return []
    finally:
        conn.close()


def _file_steps(tmp_path: Path) -> list[int]:
    out = tmp_path / "spool" / "out.jsonl"
    if not out.exists():
        return []
    return [json.loads(line)["step"] for line in out.read_text().splitlines() if line]


def _assert_all_once(tmp_path: Path, run_dir: Path, steps: int, mlflow: bool = True,
                     table_steps: int | None = None) -> None:
    """Every metric point of every step, once, in mlflow and in the file."""
    assert _file_steps(tmp_path) == list(range(steps))
    tables = (tmp_path / "spool" / "out.tables.jsonl").read_text().splitlines()
    assert [json.loads(t)["step"] for t in tables] == list(range(0, table_steps or steps, 10))
    if not mlflow:
        return
    rows = _mlflow_rows(tmp_path / "mlflow.db", run_dir)
    expected = sorted((key, step) for step in range(steps)
                      for key in ("kl", "loss", "reward/mean"))
    assert rows == expected


def _delivered(tmp_path: Path, run_dir: Path, steps: int) -> bool:
    return (len(_file_steps(tmp_path)) >= steps
            and len(_mlflow_rows(tmp_path / "mlflow.db", run_dir)) >= 3 * steps)


def _state(run_dir: Path) -> Any:
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run_dir)
    try:
        return reader.meta().get("state")
    finally:
        reader.close()


def test_sigkill_of_the_trainer_is_delivered_by_the_delivery_process(tmp_path: Path) -> None:
    trainer = _start(tmp_path, "wait")
    run_dir, pid = _logged(trainer)
    assert pid is not None and _alive(pid)
    os.kill(trainer.pid, signal.SIGKILL)
    trainer.wait(10)
    # no command is run: the delivery process notices and delivers by itself
    assert wait_until(lambda: _delivered(tmp_path, run_dir, STEPS), 60), \
        (run_dir / "delivery.log").read_text()
    assert wait_until(lambda: not _alive(pid), 30), "delivery process did not exit"
    _assert_all_once(tmp_path, run_dir, STEPS)
    assert _state(run_dir) == "crashed"
    last = spooled(run_dir)[-1].seq
    assert cursor(run_dir, "mlflow").acked_seq == last
    assert cursor(run_dir, "file").acked_seq == last


@pytest.mark.parametrize("delivery", ["process", "thread"])
def test_exit_without_finish_delivers_everything(tmp_path: Path, delivery: str) -> None:
    # In thread mode mlflow is then first imported while the interpreter exits (the
    # worker had no time before): it used to fail there with "can't register atexit
    # after shutdown", losing every event.
    trainer = _start(tmp_path, "exit", TRAINER_DELIVERY=delivery)
    run_dir, pid = _logged(trainer)
    trainer.wait(120)
    assert trainer.returncode == 0, trainer.stderr.read() if trainer.stderr else ""
    if pid is not None:
        assert wait_until(lambda: not _alive(pid), 60)
    _assert_all_once(tmp_path, run_dir, STEPS)
    assert _state(run_dir) == "finished"


def test_os_exit_is_a_crash_and_still_delivered(tmp_path: Path) -> None:
    trainer = _start(tmp_path, "os-exit")
    run_dir, pid = _logged(trainer)
    trainer.wait(30)
    assert trainer.returncode == 3
    assert pid is not None and wait_until(lambda: not _alive(pid), 60)
    _assert_all_once(tmp_path, run_dir, STEPS)
    assert _state(run_dir) == "crashed"


def test_ctrl_c_to_the_process_group_does_not_cut_the_drain(tmp_path: Path) -> None:
    trainer = _start(tmp_path, "wait")
    run_dir, pid = _logged(trainer)
    os.killpg(trainer.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    trainer.wait(120)
    assert pid is not None and wait_until(lambda: not _alive(pid), 60)
    _assert_all_once(tmp_path, run_dir, STEPS)
    assert _state(run_dir) in ("failed", "finished")


def test_delivery_process_killed_mid_run_is_restarted(tmp_path: Path) -> None:
    steps = 400
    trainer = _start(tmp_path, "finish", steps, TRAINER_PACE="0.01")
    run_dir = tmp_path / "spool" / "delivery"
    assert wait_until(lambda: run_dir.exists() and any(run_dir.iterdir()), 30)
    run_dir = next(run_dir.iterdir())
    from trackmux.core.spool.reader import SpoolReader

    def delivery_pid() -> int | None:
        reader = SpoolReader(run_dir)
        try:
            value = reader.meta().get("delivery_pid")
        finally:
            reader.close()
        return int(value) if value else None

    assert wait_until(lambda: delivery_pid() is not None and len(_file_steps(tmp_path)) > 20,
                      60)
    first = delivery_pid()
    assert first is not None
    os.kill(first, signal.SIGKILL)
    out, err = trainer.communicate(timeout=180)
    assert trainer.returncode == 0, err
    assert "FINISHED pending={}" in out, out + err
    assert "exited with code -9" in err  # reported once, by the trainer
    _assert_all_once(tmp_path, run_dir, steps)


def test_fork_after_init_does_not_hang_or_duplicate(tmp_path: Path) -> None:
    trainer = _start(tmp_path, "fork")
    run_dir, _ = _logged(trainer)
    out, err = trainer.communicate(timeout=120)
    assert trainer.returncode == 0, err
    assert "FINISHED pending={}" in out
    assert "calls from forked process" in err
    _assert_all_once(tmp_path, run_dir, STEPS + 1, table_steps=STEPS)


def test_trainer_output_pipes_are_not_held_by_the_delivery_process(tmp_path: Path) -> None:
    """A harness that reads the trainer's stdout to EOF (Ray, a job runner, a test)
    must not wait for the delivery process, even when that one outlives the trainer
    (here: the mlflow store is unwritable, so delivery goes on retrying)."""
    blocked = tmp_path / "mlflow.db"
    blocked.mkdir()  # a directory where the SQLite file should be: every open fails
    trainer = subprocess.Popen(
        [sys.executable, str(HERE / "_trainer.py"), str(tmp_path / "spool"), str(blocked),
         "20", "finish"],
        env=child_env(TRAINER_FINISH_TIMEOUT="1", TRAINER_ORPHAN="60",
                      TRACKMUX_DELIVERY_GRACE="1"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # returns at the trainer's EOF; had the delivery process held the pipes, only at its
    # exit (60 s of retrying), and it would not be alive below
    out, err = trainer.communicate(timeout=60)
    run_dir = Path(next(line.split()[1] for line in out.splitlines()
                        if line.startswith("LOGGED")))
    pid = int(next(line.split()[2] for line in out.splitlines() if line.startswith("LOGGED")))
    try:
        assert _alive(pid), "the delivery process should still be retrying mlflow"
        [line] = [x for x in err.splitlines() if "goes on delivering them" in x]
        assert "after this script exits, for up to 60 s" in line  # one line: for how long
        assert f"tail -f {run_dir / 'delivery.log'}" in line      # and how to watch it
        assert (run_dir / "delivery.log").exists()
        assert "mlflow" in (run_dir / "delivery.log").read_text()
    finally:
        os.kill(pid, signal.SIGTERM)  # the grace period is short; then it exits
        assert wait_until(lambda: not _alive(pid), 30)


def test_two_runs_in_one_process_each_get_their_own_delivery(tmp_path: Path) -> None:
    import trackmux

    runs = [trackmux.init(project="two", name=f"r{i}", backends=["file"],
                          dir=tmp_path / "spool",
                          backend_options={"file": {"path": str(tmp_path / f"r{i}.jsonl")}})
            for i in range(2)]
    pids = [r.delivery_pid for r in runs]  # type: ignore[union-attr]
    assert None not in pids and pids[0] != pids[1]
    for step in range(50):
        for i, run in enumerate(runs):
            run.log({"x": step * (i + 1)}, step=step)
    for run in runs:
        assert run.finish(timeout=60).pending == {}
    for i in range(2):
        lines = [json.loads(x) for x in (tmp_path / f"r{i}.jsonl").read_text().splitlines()]
        assert [(d["step"], d["data"]["x"]) for d in lines] == \
            [(s, s * (i + 1)) for s in range(50)]
    for pid in pids:
        assert pid is not None and wait_until(lambda p=pid: not _alive(p), 30)


def test_backend_libraries_stay_out_of_the_trainer(tmp_path: Path) -> None:
    """In process mode the trainer never imports mlflow; its problems still reach it."""
    script = (
        "import sys, trackmux\n"
        f"run = trackmux.init(project='p', backends=['mlflow'], dir={str(tmp_path)!r},\n"
        "    backend_options={'mlflow': {'tracking_uri': 'http://127.0.0.1:9'}},\n"
        "    orphan_timeout=60)\n"
        "run.log({'a': 1.0})\n"
        "s = run.finish(timeout=15)\n"
        "print('PID', run.delivery_pid)\n"
        "print('MLFLOW_IMPORTED', 'mlflow' in sys.modules)\n"
        "print('PROBLEMS', sorted({p.backend for p in s.problems}))\n"
        "print('PENDING', s.pending)\n")
    done = subprocess.run([sys.executable, "-c", script],
                          env=child_env(TRACKMUX_DELIVERY_GRACE="1"),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split("PID ")[1].split()[0])
    if _alive(pid):  # still retrying the unreachable store: stop it (SIGTERM, short grace)
        os.kill(pid, signal.SIGTERM)
        assert wait_until(lambda: not _alive(pid), 30)
    assert "MLFLOW_IMPORTED False" in done.stdout
    assert "PROBLEMS ['mlflow']" in done.stdout
    assert "PENDING {'mlflow': 1}" in done.stdout
