"""``trackmux doctor`` tells the truth about a spool: what the live doctor found (a stall,
judged only while the trainer lived) is reported after the trainer died (issue 33.13), and
a spool that cannot be read is never a healthy verdict, in the doctor or any reading
command (issue 34.10)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import trackmux
from trackmux.cli.main import cli
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.runs import lock_is_held
from trackmux.doctor.offline import diagnose

STALLING_TRAINER = """
import sys, time, trackmux
run = trackmux.init(project="p", backends=["file"], dir=sys.argv[1], doctor=sys.argv[2])
for step in range(12):
    run.log({"loss": 1.0 / (step + 1)}, step=step)
    time.sleep(0.05)
print(run.dir, flush=True)
time.sleep(600)  # alive, and no step: a hang
"""


def _stored_rules(run_dir: Path) -> list[str]:
    reader = SpoolReader(run_dir)
    try:
        return [e.rule for e in reader.events_of_kind("finding")]  # type: ignore[attr-defined]
    finally:
        reader.close()


def _wait(check: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what} after {seconds} s")
        time.sleep(0.2)


def test_a_live_stall_is_reported_after_the_trainer_crashed(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"  # docs/doctor.md: a rules file lowering the stall bound
    rules.write_text("[stall]\nmin_seconds = 1\nfactor = 2\n")
    env = {**os.environ, "PYTHONPATH": str(Path(trackmux.__file__).parents[1])}
    env.pop("RANK", None)
    child = subprocess.Popen([sys.executable, "-c", STALLING_TRAINER, str(tmp_path / "root"),
                              str(rules)], stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout is not None
        run_dir = Path(child.stdout.readline().decode().strip())
        _wait(lambda: "stall" in _stored_rules(run_dir), 120, "the live doctor's stall")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    _wait(lambda: not lock_is_held(run_dir), 60, "the trainer's lock to be free")
    # the re-run alone cannot see it: no later step shows the gap, and nobody is alive
    assert "stall" not in [f.rule for f in diagnose(run_dir, str(rules))]
    result = CliRunner().invoke(cli, ["doctor", "--json", str(run_dir)])
    [line] = [json.loads(x) for x in result.output.splitlines()]
    stalls = [f for f in line["findings"] if f["rule"] == "stall"]
    assert len(stalls) == 1 and stalls[0]["step"] == 11, line
    assert result.exit_code == 1  # a stall is a warning
    text = CliRunner().invoke(cli, ["doctor", str(run_dir), "--rules", str(rules)])
    assert text.output.count("stall @ step 11") == 1  # stored and re-run: said once


@pytest.fixture
def damaged(tmp_path: Path) -> dict[str, Path]:
    """A healthy finished run and copies of it: garbage, truncated, empty."""
    run = trackmux.init(project="p", backends=[], dir=tmp_path / "root", doctor=False)
    for step in range(300):
        run.log({"reward/mean": 0.5, "x": float(step)}, step=step)
    run.log_samples("rollouts", {"reward": [1.0, 0.0]}, step=3)
    run.finish(timeout=30)
    runs = {"healthy": run.dir}
    data = (run.dir / "spool.db").read_bytes()
    for name, content in [("garbage", os.urandom(50_000)), ("truncated", data[:len(data) // 3]),
                          ("empty", b"")]:
        runs[name] = run.dir.parent / name
        shutil.copytree(run.dir, runs[name])
        (runs[name] / "spool.db").write_bytes(content)
    return runs


@pytest.mark.parametrize("which", ["garbage", "truncated", "empty"])
def test_an_unreadable_spool_exits_2_in_every_reading_command(
        damaged: dict[str, Path], which: str, tmp_path: Path) -> None:
    bad, good = str(damaged[which]), str(damaged["healthy"])
    for args in (["doctor", "--json", bad], ["doctor", good, bad], ["show", bad],
                 ["samples", bad], ["samples", bad, "--where", "reward > 0"],
                 ["report", bad, "-o", str(tmp_path / "r.html")], ["diff", good, bad],
                 ["sync", bad, "--to", "file", "--no-progress"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        assert "cannot be read" in result.output or "holds no run" in result.output, args
        assert '"findings": []' not in result.output and '"findings":[]' not in result.output
    assert not (tmp_path / "r.html").exists()
    listed = CliRunner().invoke(cli, ["runs", str(damaged["healthy"].parent)])
    assert listed.exit_code == 0, listed.output  # a listing: the others still show
    [line] = [x for x in listed.output.splitlines() if x.startswith(f"p/{which} ")]
    assert "unreadable  the spool cannot be read" in line, listed.output
