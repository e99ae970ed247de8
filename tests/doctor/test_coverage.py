"""Issue 42, coverage always said: every doctor result says which signals it read from
which keys and which rules could not run; a run with no reward and no KL read is "not
judged" (exit 3 for ``trackmux doctor``), never healthy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import trackmux
from spool_support import wait_quiet
from trackmux.cli.main import cli
from trackmux.doctor.coverage import RULE


def _spool(root: Path, rows: list[dict[str, float]], doctor: Any = False,
           **options: Any) -> Path:
    run = trackmux.init(project="p", backends=[], dir=root, doctor=doctor, **options)
    assert isinstance(run, trackmux.Run)
    for step, data in enumerate(rows):
        run.log(data, step=step)
    assert run.finish(timeout=60).complete
    wait_quiet(run)  # its events are counted: nothing of the run may still append
    return run.dir


def _judged(n: int = 30) -> list[dict[str, float]]:
    return [{"score_mean": 0.2 + 0.01 * i, "kl_to_ref": 0.01, "gen_len": 300.0}
            for i in range(n)]


def test_a_run_without_reward_or_kl_is_not_judged_and_exits_3(tmp_path: Path) -> None:
    run_dir = _spool(tmp_path, [{"ent": 1.0, "throughput": 5.0} for _ in range(30)])
    result = CliRunner().invoke(cli, ["doctor", str(run_dir)])
    assert result.exit_code == 3, result.output
    assert f"{run_dir.name}: no findings; not judged: no key for the reward or the KL" \
        in result.output
    assert "read: entropy <- ent" in result.output
    assert "reward_collapse (no key for reward)" in result.output
    result = CliRunner().invoke(cli, ["doctor", "--json", str(run_dir)])
    assert result.exit_code == 3
    coverage = json.loads(result.output)["coverage"]
    assert coverage["judged"] is False and coverage["verdict"].startswith("not judged")
    assert coverage["signals"] == {"entropy": [{"key": "ent", "from": "words"}]}
    assert coverage["not_run"]["kl_blowup"] == "no key for kl"


def test_a_judged_run_says_what_it_read_and_what_could_not_run(tmp_path: Path) -> None:
    run_dir = _spool(tmp_path, _judged())
    result = CliRunner().invoke(cli, ["doctor", "--json", str(run_dir)])
    assert result.exit_code == 0, result.output
    coverage = json.loads(result.output)["coverage"]
    assert coverage["judged"] is True
    assert coverage["signals"]["reward"] == [{"key": "score_mean", "from": "words"}]
    assert coverage["signals"]["kl"] == [{"key": "kl_to_ref", "from": "words"}]
    assert coverage["not_run"]["entropy_collapse"] == "no key for entropy"
    assert "reward_collapse" not in coverage["not_run"]
    text = CliRunner().invoke(cli, ["doctor", str(run_dir)]).output
    assert "read: kl <- kl_to_ref, response_length <- gen_len, reward <- score_mean" in text


def test_one_unjudged_run_among_judged_ones_exits_3_a_warning_still_1(
        tmp_path: Path) -> None:
    judged = _spool(tmp_path / "a", _judged())
    unjudged = _spool(tmp_path / "b", [{"loss": 1.0} for _ in range(30)])
    assert CliRunner().invoke(cli, ["doctor", str(judged), str(unjudged)]).exit_code == 3
    kl = [0.01] * 60 + [0.01 * 1.3 ** i for i in range(40)]
    bad = _spool(tmp_path / "c", [{"kl_to_ref": v, "avg_reward": 0.5} for v in kl])
    assert CliRunner().invoke(cli, ["doctor", str(bad), str(unjudged)]).exit_code == 1


def test_a_declared_key_that_never_appears_is_named(tmp_path: Path) -> None:
    run_dir = _spool(tmp_path, _judged())
    rules = tmp_path / "rules.toml"
    rules.write_text('[signals]\nreward = ["my/return"]\n')
    result = CliRunner().invoke(cli, ["doctor", "--json", "--rules", str(rules), str(run_dir)])
    coverage = json.loads(result.output)["coverage"]
    assert coverage["declared_unseen"] == {"reward": ["my/return"]}
    assert "reward" not in coverage["signals"]  # declared: score_mean no longer counts
    text = CliRunner().invoke(cli, ["doctor", "--rules", str(rules), str(run_dir)]).output
    assert "declared reward <- my/return: never logged" in text


@pytest.mark.parametrize("delivery", ["thread", "process"])
def test_the_live_doctor_says_not_judged_once(tmp_path: Path, delivery: str) -> None:
    run_dir = _spool(tmp_path, [{"policy_entropy": 1.0, "gen_len": 200.0}
                                for _ in range(20)], doctor=True, delivery=delivery)
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run_dir)
    try:
        told = [e for e in reader.events_of_kind("finding")]
    finally:
        reader.close()
    assert [(f.rule, f.severity, f.step) for f in told] == [(RULE, "info", 4)]
    assert told[0].message.startswith("not judged: no key for the reward or the KL")
    assert "read entropy <- policy_entropy, response_length <- gen_len" in told[0].message
    result = CliRunner().invoke(cli, ["doctor", "--json", str(run_dir)])
    line = json.loads(result.output)
    assert line["findings"] == [] and line["coverage"]["judged"] is False  # said once


def test_a_judged_live_run_adds_a_note_and_a_run_of_other_keys_no_event(
        tmp_path: Path) -> None:
    """A judged run's coverage is said as a note (a text event,
    tests/doctor/test_coverage_live.py), not as a finding: nothing that counts findings
    counts it. A run of other keys (not taken for RL) is not told live."""
    from trackmux.core.spool.reader import SpoolReader
    from trackmux.core.spool.runs import summarize

    for name, rows, notes in (("a", _judged(20), 1), ("b", [{"x": 1.0, "loss": 0.5}] * 20, 0)):
        run_dir = _spool(tmp_path / name, rows, doctor=True, delivery="thread")
        assert summarize(run_dir).events == 20 + notes
        reader = SpoolReader(run_dir)
        try:
            assert reader.events_of_kind("finding") == []
            assert [e.key for e in reader.events_of_kind("text")] == ["doctor/coverage"] * notes
        finally:
            reader.close()


def test_the_ui_findings_panel_and_both_reports_say_the_coverage(tmp_path: Path) -> None:
    import httpx

    from trackmux.report import build_report
    from trackmux.ui.app import Server

    judged = _spool(tmp_path / "root", _judged())
    unjudged = _spool(tmp_path / "root", [{"policy_entropy": 1.0, "gen_len": 200.0}
                                          for _ in range(20)], doctor=True, delivery="thread")
    server = Server([tmp_path / "root"], port=0).start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        runs = {Path(r["ref"]).name if "ref" in r else r["name"]: r["id"]
                for r in httpx.get(f"{base}/api/runs", timeout=30).json()["runs"]}
        assert len(runs) == 2
        body = httpx.get(f"{base}/api/findings?runs={','.join(runs.values())}",
                         timeout=30).json()
        by_judged = {r["coverage"]["judged"]: r for r in body["runs"]}
        assert by_judged[True]["coverage"]["line"].startswith("judged: read reward and kl")
        assert "reward <- score_mean" in by_judged[True]["coverage"]["line"]
        assert by_judged[False]["coverage"]["line"].startswith("not judged")
        assert by_judged[False]["findings"] == []  # the live line is the coverage, not a row
        stored = httpx.get(f"{base}/api/findings?runs={','.join(runs.values())}&stored=1",
                           timeout=30).json()
        assert all("coverage" not in r for r in stored["runs"])  # stays cheap
    finally:
        server.stop()
    page = build_report([judged, unjudged], tmp_path / "r.html").read_text()
    assert '"line":"judged: read reward and kl; read kl \\u003c- kl_to_ref' in page
    assert "not judged: no key for the reward or the KL" in page
    static = build_report([judged, unjudged], tmp_path / "s.html", static=True).read_text()
    assert '<li class="coverage unjudged">' in static and "not judged: no key" in static
    assert "judged: read reward and kl; read kl &lt;- kl_to_ref" in static


def test_the_findings_tab_and_the_exported_report_draw_the_coverage(
        tmp_path: Path, browser: Any) -> None:
    from trackmux.report import build_report
    from trackmux.ui.app import Server

    run_dir = _spool(tmp_path / "root", [{"policy_entropy": 1.0, "gen_len": 200.0}
                                         for _ in range(20)], doctor=True, delivery="thread")
    server = Server([tmp_path / "root"], port=0).start()
    page = browser.new_page()
    try:
        page.goto(f"http://127.0.0.1:{server.port}/")
        page.wait_for_selector("#runs tbody tr")
        page.click("button[data-tab=findings]")
        said = page.wait_for_selector(".tm-coverage.unjudged").text_content()
        assert said.startswith("doctor coverage: not judged: no key for the reward or the KL")
        assert "not judged" in page.locator(".tm-finding-list").text_content()
        report = build_report([run_dir], tmp_path / "r.html")
        page.goto(report.as_uri())
        said = page.wait_for_selector(".tm-coverage.unjudged").text_content()
        assert "read entropy <- policy_entropy" in said
    finally:
        page.close()
        server.stop()
