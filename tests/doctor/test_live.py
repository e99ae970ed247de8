"""The doctor on live runs: in the delivery process (and in thread mode), findings reach
the console in the trainer's terminal, the file backend, a webhook on 127.0.0.1, the
trainer (run.findings(), on_finding on a thread), the spool and a resync."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from synthetic import rerun_adds_nothing

import trackmux
from spool_support import wait_quiet
from trackmux.core.delivery.sync import deliver_by_name
from trackmux.core.events import FindingEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.doctor.read import load_findings


def _train(run: Any) -> None:
    for step in range(60):
        kl = 0.02 if step < 40 else 0.02 * 2 ** (step - 39)
        noise = 0.02 * ((step * 7) % 5 - 2)  # a batch's mean reward moves by sampling alone
        run.log({"kl/divergence": kl, "reward/mean": 0.5 + 0.001 * step + noise,
                 "loss": float("nan") if step == 30 else 1.0}, step=step)


@pytest.mark.parametrize("delivery", ["process", "thread"])
def test_findings_reach_console_file_webhook_and_the_trainer(
        tmp_path: Path, capsys: Any, webhook: tuple[str, list[dict[str, Any]]],
        delivery: str) -> None:
    url, bodies = webhook
    threads: list[str] = []
    called: list[dict[str, Any]] = []

    def on_finding(finding: dict[str, Any]) -> None:
        threads.append(threading.current_thread().name)
        called.append(finding)

    run = trackmux.init(project="p", backends=["console", "file", "webhook"], dir=tmp_path,
                        delivery=delivery, on_finding=on_finding,
                        backend_options={"file": {"root": str(tmp_path / "out")},
                                         "console": {"interval": 60},
                                         "webhook": {"url": url}})
    assert isinstance(run, trackmux.Run)
    _train(run)
    summary = run.finish(timeout=30)
    assert summary.complete, summary
    wait_quiet(run)  # what is counted below is all there will be
    rules = [f["rule"] for f in run.findings()]
    assert rules == ["nonfinite", "kl_blowup"]
    # on_finding has every event: the KL's finding, then its updates as it grew (issue 42)
    assert list({c["id"]: c for c in called}.values()) == run.findings()
    assert [c["revision"] for c in called if c["rule"] == "kl_blowup"][:2] == [0, 1]
    assert threads and all(name != threading.main_thread().name for name in threads)
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("[trackmux doctor]")
             and not line.startswith("[trackmux doctor] coverage @")]
    # what it read is said too, as a note, not a finding (tests/doctor/test_coverage_live.py)
    assert sum(line.startswith("[trackmux doctor] coverage @ step 4: judged: read reward "
                               "and kl") for line in out.splitlines()) == 1
    first_kl, rose = called[1], called[2]  # the console prints an update when it rose
    assert (first_kl["severity"], rose["severity"]) == ("warning", "critical")
    assert lines == [
        "[trackmux doctor] CRITICAL nonfinite @ step 30: first non-finite values at step 30 "
        "in 1 key: loss (nan)",
        f"[trackmux doctor] WARNING kl_blowup @ step 40: {first_kl['message']}",
        f"[trackmux doctor] CRITICAL kl_blowup @ step 40 (update 1): {rose['message']}"]
    [findings_file] = (tmp_path / "out" / "p").glob("*.findings.jsonl")
    written = [orjson.loads(line) for line in findings_file.read_bytes().splitlines()]
    assert [w["rule"] for w in written] == [c["rule"] for c in called]  # appended updates
    assert written[1]["keys"] == ["kl/divergence"]
    # min_severity warning: both are (the KL's updates fold into its alerts)
    assert list(dict.fromkeys(b["rule"] for b in bodies)) == rules
    assert bodies[0]["run"] == run.id and bodies[0]["text"] == lines[0]
    assert load_findings(run.dir) == run.findings()


def test_a_slow_on_finding_has_every_finding_before_finish_returns(tmp_path: Path) -> None:
    """finish() used to return while the callback's thread still had findings queued (a
    loaded CI machine showed it: none called yet); a script that exits next loses them."""
    called: list[str] = []

    def slow(finding: dict[str, Any]) -> None:
        time.sleep(0.5)
        called.append(finding["rule"])

    run = trackmux.init(project="p", backends=[], dir=tmp_path, on_finding=slow)
    assert isinstance(run, trackmux.Run)
    _train(run)
    assert run.finish(timeout=30).complete
    assert list(dict.fromkeys(called)) == ["nonfinite", "kl_blowup"]  # and its updates


def test_resync_delivers_findings_and_a_rerun_adds_none(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=["file"], dir=tmp_path,
                        backend_options={"file": {"root": str(tmp_path / "a")}})
    _train(run)
    run.finish(timeout=30)
    wait_quiet(run)  # its delivery process has exited: the last seq below stays put
    deliver_by_name(run.dir, ["file"], {"file": {"root": str(tmp_path / "b")}})
    [again] = (tmp_path / "b" / "p").glob("*.findings.jsonl")
    resent = [orjson.loads(x) for x in again.read_bytes().splitlines()]
    assert list(dict.fromkeys(f["rule"] for f in resent)) == ["nonfinite", "kl_blowup"]
    assert [f["id"] for f in resent] == [f.id for f in _stored(run.dir)]  # updates too
    # a restarted delivery process reads the run again: it finds the same, appends none

    rerun_adds_nothing(run)


def _stored(run_dir: Path) -> list[FindingEvent]:
    reader = SpoolReader(run_dir)
    try:
        return [e for e in reader.events_of_kind("finding") if isinstance(e, FindingEvent)]
    finally:
        reader.close()


def test_doctor_off_stores_nothing_and_readers_diagnose(tmp_path: Path,
                                                        monkeypatch: Any) -> None:
    monkeypatch.setenv("TRACKMUX_DOCTOR", "off")
    run = trackmux.init(project="p", backends=["file"], dir=tmp_path,
                        backend_options={"file": {"root": str(tmp_path / "a")}})
    _train(run)
    run.finish(timeout=30)
    assert run.findings() == []
    reader = SpoolReader(run.dir)
    assert reader.events_of_kind("finding") == []
    reader.close()
    assert [f["rule"] for f in load_findings(run.dir)] == ["nonfinite", "kl_blowup"]


def test_a_healthy_run_with_the_doctor_on_has_no_finding(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=["file"], dir=tmp_path, doctor=True,
                        backend_options={"file": {"root": str(tmp_path / "a")}})
    for step in range(50):
        run.log({"reward/mean": 0.1 + 0.01 * step, "kl/divergence": 0.02}, step=step)
    run.finish(timeout=30)
    assert run.findings() == [] and load_findings(run.dir) == []
