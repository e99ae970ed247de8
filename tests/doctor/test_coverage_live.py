"""Issue 42, coverage always said, live: every run watched by the doctor is told what it
reads (which keys fed which signal, which rules could not run) as a note, a text event of
key ``doctor/coverage``: the console prints it as its own line, and it is no finding (the
trainer's ``run.findings()``, the UI's findings, a webhook at ``min_severity`` info and the
file backend's findings do not see it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from synthetic import rerun_adds_nothing

import trackmux
from spool_support import wait_quiet
from trackmux.core.events import TextEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.doctor.coverage import NOTE_KEY
from trackmux.doctor.read import load_findings
from trackmux.plugins.console import COVERAGE_NOTE, ConsoleBackend

PREFIX = "[trackmux doctor] coverage @ step "


def _notes(run_dir: Path) -> list[TextEvent]:
    reader = SpoolReader(run_dir)
    try:
        return [e for e in reader.events_of_kind("text")
                if isinstance(e, TextEvent) and e.key == NOTE_KEY]
    finally:
        reader.close()


def _said(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(PREFIX)]


@pytest.mark.parametrize("delivery", ["process", "thread"])
def test_a_judged_run_of_custom_keys_is_told_what_was_read_and_no_finding_counts_it(
        tmp_path: Path, capsys: Any, webhook: tuple[str, list[dict[str, Any]]],
        delivery: str) -> None:
    url, bodies = webhook
    run = trackmux.init(project="p", backends=["console", "file", "webhook"], dir=tmp_path,
                        delivery=delivery, doctor=True,
                        backend_options={"file": {"root": str(tmp_path / "out")},
                                         "console": {"interval": 60, "every": 10},
                                         "webhook": {"url": url, "min_severity": "info"}})
    assert isinstance(run, trackmux.Run)
    for step in range(30):
        run.log({"train/score": 0.2 + 0.01 * step, "kl_to_ref": 0.01, "gen_len": 300.0},
                step=step)
    assert run.finish(timeout=60).complete
    wait_quiet(run)  # the delivery process (or the watch thread) is gone: nothing appends
    [line] = _said(capsys.readouterr().out)
    assert line.startswith(PREFIX + "4: judged: read reward and kl; read "), line
    assert "kl <- kl_to_ref" in line and "reward <- train/score" in line
    assert "response_length <- gen_len" in line
    assert "not run: " in line and "entropy_collapse (no key for entropy)" in line
    [note] = _notes(run.dir)
    assert line == f"{PREFIX}{note.step}: {note.text}"
    # no finding: not the trainer's, not the readers', not a webhook's, not the file's
    assert run.findings() == [] and load_findings(run.dir) == []
    assert bodies == []
    out = tmp_path / "out" / "p"
    assert list(out.glob("*.findings.jsonl")) == []
    [texts] = out.glob("*.text.jsonl")
    assert [json.loads(x)["key"] for x in texts.read_text().splitlines()] == [NOTE_KEY]
    # the UI's findings column: none, and the run's coverage beside it
    import httpx

    from trackmux.ui.app import Server

    server = Server([tmp_path], port=0).start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        [rid] = [r["id"] for r in httpx.get(f"{base}/api/runs", timeout=30).json()["runs"]]
        for query in ("", "&stored=1"):
            [entry] = httpx.get(f"{base}/api/findings?runs={rid}{query}",
                                timeout=30).json()["runs"]
            assert entry["findings"] == [], entry
        assert entry["diagnosed"] is True
    finally:
        server.stop()


def test_the_coverage_is_said_again_at_close_when_it_changed(tmp_path: Path,
                                                             capsys: Any) -> None:
    run = trackmux.init(project="p", backends=["console"], dir=tmp_path, doctor=True,
                        delivery="thread", backend_options={"console": {"interval": 60}})
    assert isinstance(run, trackmux.Run)
    for step in range(20):
        data = {"avg_reward": 0.1 + 0.01 * step, "mean_kl": 0.01}
        if step >= 10:  # an entropy logged from step 10 on
            data["policy_entropy"] = 1.0
        run.log(data, step=step)
    assert run.finish(timeout=60).complete
    wait_quiet(run)
    first, last = _said(capsys.readouterr().out)
    assert first.startswith(PREFIX + "4: ") and "entropy" not in first.split("; not run")[0]
    assert "entropy_collapse (no key for entropy)" in first
    assert last.startswith(PREFIX + "19: ") and "entropy <- policy_entropy" in last
    assert "entropy_collapse" not in last
    assert [n.step for n in _notes(run.dir)] == [4, 19]
    assert run.findings() == []


def test_a_short_run_is_told_at_close_and_a_rerun_adds_no_second_note(tmp_path: Path,
                                                                      capsys: Any) -> None:

    # The spool's last seq is read before and after a second watcher: nothing else may
    # append meanwhile (wait_quiet: the run's watch thread has ended). A second note came
    # when the first watcher was ticked "trainer gone" before it read the last steps (the
    # note's text then named frozen_start as not run): test_watch_final_tick.py forces it.
    # Provenance is off, as in every suite here (tests/conftest.py): 3 steps and a note.
    run = trackmux.init(project="p", backends=["console"], dir=tmp_path, doctor=True,
                        delivery="thread", provenance=False)
    assert isinstance(run, trackmux.Run)
    for step in range(3):
        run.log({"score_mean": 0.5, "kl_to_ref": 0.01}, step=step)
    assert run.finish(timeout=60).complete
    wait_quiet(run)
    [line] = _said(capsys.readouterr().out)
    assert line.startswith(PREFIX + "2: judged: read reward and kl")
    # a restarted delivery process reads the run again: the note is in the spool already
    rerun_adds_nothing(run)
    assert len(_notes(run.dir)) == 1


def test_a_run_of_no_rl_signal_is_not_told(tmp_path: Path, capsys: Any) -> None:
    """A supervised loop's loss (or keys the doctor reads nothing of): no line on every
    script that logs anything; ``trackmux doctor`` says its coverage."""
    run = trackmux.init(project="p", backends=["console"], dir=tmp_path, doctor=True,
                        delivery="thread")
    assert isinstance(run, trackmux.Run)
    for step in range(10):
        run.log({"loss": 1.0 / (step + 1), "lr": 1e-5}, step=step)
    assert run.finish(timeout=60).complete  # delivered and watched to the end
    wait_quiet(run)  # "no note" is read once nothing can still say one
    assert _said(capsys.readouterr().out) == [] and _notes(run.dir) == []
    assert run.findings() == []


def test_the_console_knows_the_doctors_note_key_and_never_holds_it_back(
        capsys: Any) -> None:
    assert COVERAGE_NOTE == NOTE_KEY
    console = ConsoleBackend({"every": 100, "interval": 60})
    console.write([TextEvent("notes", "a", 1, 0.0), TextEvent("notes", "b", 2, 0.0),
                   TextEvent(NOTE_KEY, "judged: read reward", 3, 0.0),
                   TextEvent(NOTE_KEY, "judged: read reward and kl", 4, 0.0)])
    out = capsys.readouterr().out.splitlines()
    assert out == ["[notes @ step 1]", "a", f"{PREFIX}3: judged: read reward",
                   f"{PREFIX}4: judged: read reward and kl"]
