"""Issue 25: wandb's own git and program fields come from trackmux's provenance, read back
from the offline run's transaction log with wandb's own reader (``wandb leet inspect``):
the run record (``git.commit``, ``git.remote_url``) and the environment record that becomes
``wandb-metadata.json`` (``program``, ``code_path``, ``args``, ``git``, ``host``)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from test_wandb import all_run_files, deliver_wandb, leet_records, wandb_offline  # noqa: F401

from trackmux.testing.provenance import COMMIT, REMOTE, git, git_tree, provenance_spool

pytest.importorskip("wandb")

TOKEN = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
SCRIPT = """
import os, sys, trackmux
from trackmux.provenance.record import wait_recorded
# provenance_wait: open() waits for the event (by default 10 s, which a loaded machine
# exceeds); wait_recorded: the probe's answer before finish() (which gives it 5 s at most)
run = trackmux.init(project="p", name="wb", backends=["wandb"], dir=os.environ["SPOOL"],
                    delivery=os.environ["DELIVERY"],
                    backend_options={"wandb": {"provenance_wait": 600}})
run.log({"loss": 1.0}, step=0)
wait_recorded(run, 600)
run.finish(timeout=120)
"""


def records(tmp_path: Path, kind: str) -> list[dict[str, Any]]:
    """The records of one type (without wandb's bare ``writer_id`` markers)."""
    return [r[kind] for path in all_run_files(tmp_path) for r in leet_records(path)
            if r.get("type") == kind and set(r[kind]) != {"writer_id"}]


def test_a_synced_spool_fills_wandbs_run_and_environment_records(tmp_path: Path) -> None:
    """``trackmux sync`` (any process but the trainer's): git in the run record, and
    program, code path, the trainer's redacted argv, git and host in wandb's metadata."""
    argv = list(sys.argv)
    deliver_wandb(provenance_spool(tmp_path))
    assert sys.argv == argv  # set to the trainer's only while wandb.init read it
    (run,) = {r["run_id"]: r for r in records(tmp_path, "run")}.values()
    assert run["git"] == {"commit": COMMIT, "remote_url": REMOTE}
    assert run["host"] == "node-1"
    (environment,) = records(tmp_path, "environment")
    assert environment["git"] == {"commit": COMMIT, "remote_url": REMOTE}
    assert environment["program"] == "/work/train.py"
    assert environment["code_path"] == "train.py"
    assert environment["args"] == ["--lr=0.1", "--api_key=***REDACTED***"]
    assert environment["executable"] == "/usr/bin/python3"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    git_tree(root, {"train.py": SCRIPT})
    git(root, "remote", "add", "origin", f"https://bot:{TOKEN}@github.com/o/train.git")
    (root / "train.py").write_text(SCRIPT + "\n# dirty\n")
    return root


def run_trainer(repo: Path, tmp_path: Path, delivery: str) -> None:
    env = {**os.environ, "SPOOL": str(tmp_path / "spool"), "DELIVERY": delivery,
           "TRACKMUX_PROVENANCE": "1", "WANDB_DIR": str(tmp_path / "wandb_dir")}
    done = subprocess.run([sys.executable, "train.py", "--lr", "0.1", "--token", TOKEN],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("delivery", ["process", "thread"])
def test_a_live_run_waits_for_provenance_before_opening_wandb(
        repo: Path, tmp_path: Path, delivery: str) -> None:
    """The provenance event is written by the trainer's thread after ``init()``; the
    backend's open waits for it, so the run's first and only run record has the commit and
    the remote (token removed). In the delivery process wandb's environment record carries
    the trainer's argv (token redacted); in the trainer's own process it stays off."""
    run_trainer(repo, tmp_path, delivery)
    head = git(repo, "rev-parse", "HEAD")
    runs = records(tmp_path, "run")
    assert runs and all(r["git"] == {"commit": head,
                                     "remote_url": "https://github.com/o/train.git"}
                        for r in runs), runs
    environments = records(tmp_path, "environment")
    if delivery == "process":
        (environment,) = environments
        assert environment["program"] == str(repo / "train.py")
        assert environment["code_path"] == "train.py"
        assert environment["args"] == ["--lr", "0.1", "--token", "***REDACTED***"]
        assert environment["git"]["commit"] == head
    else:
        assert environments == []
    for path in (tmp_path / "wandb_dir").rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def late_provenance_spool(tmp_path: Path, after: threading.Event
                          ) -> tuple[Path, threading.Thread]:
    """A running run whose meta says provenance is being collected; the event is appended
    by a thread (as the trainer's provenance thread does) once ``after`` is set."""
    from trackmux.core.events import MetricsEvent
    from trackmux.core.spool.writer import SpoolWriter
    from trackmux.testing.provenance import provenance_event

    run_dir = tmp_path / "spool" / "proj" / "late"
    writer = SpoolWriter(run_dir)
    writer.set_meta(run_id="late", project="proj", name="late", state="running", attempt=1,
                    pid=-1, started_at=1_700_000_000.0, provenance=True)
    writer.append(MetricsEvent({"loss": 1.0}, 0, 1_700_000_000.0))
    writer.flush(10)

    def later() -> None:
        assert after.wait(120), "the wandb backend never looked for the provenance"
        writer.append(provenance_event())
        writer.set_meta(state="finished")
        writer.close()

    thread = threading.Thread(target=later)
    thread.start()
    return run_dir, thread


@pytest.mark.parametrize("wait", [10.0, 0.0])
def test_open_waits_for_provenance_still_being_collected(
        tmp_path: Path, wait: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """The order problem itself: the event lands after delivery started. With the default
    wait it lands while ``open`` waits for it, and wandb's run record gets the commit; with
    ``provenance_wait=0`` it lands after ``open`` looked once, and wandb's git fields stay
    empty (the config still gets ``_provenance``). The event is appended on those moments,
    not after a sleep: a slow start of the delivery on a loaded machine let a fixed delay
    put it first either way."""
    from trackmux.plugins import wandb_provenance

    looking, looked = threading.Event(), threading.Event()
    real_wait = wandb_provenance.wait

    def noted_wait(run_dir: Path, timeout: float) -> Any:
        looking.set()
        try:
            return real_wait(run_dir, timeout)
        finally:
            looked.set()

    monkeypatch.setattr(wandb_provenance, "wait", noted_wait)
    run_dir, thread = late_provenance_spool(tmp_path, looking if wait else looked)
    try:
        deliver_wandb(run_dir, provenance_wait=wait)
    finally:
        thread.join()
    deliver_wandb(run_dir, provenance_wait=wait)  # the rest, as a later sync would
    first = records(tmp_path, "run")[0]
    if wait:
        assert first["git"] == {"commit": COMMIT, "remote_url": REMOTE}
    else:
        assert "git" not in first


def test_bad_provenance_wait_names_the_option() -> None:
    from trackmux.plugins.wandb import WandbBackend

    with pytest.raises(ValueError, match="provenance_wait"):
        WandbBackend({"provenance_wait": -1})


def test_settings_from_a_record_never_carry_credentials_or_a_path_outside_the_tree() -> None:
    from trackmux.plugins.wandb_provenance import settings
    from trackmux.testing.provenance import provenance_event

    event = provenance_event(entry="/elsewhere/train.py")
    event.data["git"]["remote"] = f"https://bot:{TOKEN}@github.com/o/train.git"
    got = settings(event, in_trainer=True)
    assert got["git_remote_url"] == "https://github.com/o/train.git"
    assert got["program_relpath"] == "train.py"  # not ../elsewhere/train.py
    assert "x_disable_meta" not in got  # the trainer's own process: wandb's metadata stays off
    event.data["git"] = {"available": False, "error": "not a git repository"}
    assert not {"git_commit", "git_remote_url", "git_root"} & set(settings(event, False))
