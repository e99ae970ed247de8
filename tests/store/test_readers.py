"""Reading the team store: runs/show/doctor/samples/diff/goals --store, runs --json, the
reader interface, a read-only role, and an older schema read by this trackmux."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from store_support import rows, train

import trackmux
from trackmux.cli.main import cli


@pytest.fixture
def team(dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Three machines' runs in one store: a healthy one, one that diverges (NaN loss: the
    live doctor adds a finding), one with samples."""
    made = {}
    for host, name in (("node-a", "healthy"), ("node-b", "diverged"), ("node-c", "sampled")):
        run = train(tmp_path / host, host, dsn, name=name, steps=30, monkeypatch=monkeypatch)
        if name == "diverged":
            for step in range(30, 40):
                run.log({"loss": math.nan, "reward": 0.0}, step=step)
        if name == "sampled":
            run.log_samples("rollouts", {"prompt": ["2+2", "3+3"], "response": ["4", "7"],
                                         "reward": [1.0, 0.0]}, step=29)
        assert run.finish(timeout=60).pending == {}
        made[name] = run
    return made


def invoke(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result


def test_runs_lists_every_machine_with_host_and_user(dsn: str, team: dict[str, Any]) -> None:
    result = invoke("runs", "--store", dsn)
    assert result.exit_code == 0, result.output
    for host, name in (("node-a", "healthy"), ("node-b", "diverged"), ("node-c", "sampled")):
        line = next(x for x in result.output.splitlines() if f"name={name}" in x)
        assert f"@{host}" in line and "finished" in line
    listed = json.loads(invoke("runs", "--store", dsn, "--json").output)
    # each run's steps, the diverged run's nonfinite finding, the sampled run's samples,
    # and the doctor's coverage notes (text events): one at the 5th logged step, and the
    # sampled run's second at its end (its samples let more rules run)
    assert sorted((r["name"], r["host"], r["events"], r["last_step"]) for r in listed) == [
        ("diverged", "node-b", 42, 39), ("healthy", "node-a", 31, 29),
        ("sampled", "node-c", 33, 29)]
    assert all(r["user"] for r in listed)
    assert dsn.split("@")[0].split(":")[-1] not in result.output  # no password printed


def test_show_doctor_samples_diff_read_a_store_run(dsn: str, team: dict[str, Any],
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    diverged = team["diverged"].id
    shown = invoke("show", diverged, "--store", dsn)
    assert shown.exit_code == 0, shown.output
    assert "loss" in shown.output and "node-b" in shown.output

    doctor = invoke("doctor", diverged, "--store", dsn, "--json")
    found = json.loads(doctor.output)
    rules = {f["rule"] for entry in (found if isinstance(found, list) else [found])
             for f in (entry.get("findings", []) if isinstance(entry, dict) else [entry])}
    assert "nonfinite" in rules, doctor.output
    healthy = invoke("doctor", team["healthy"].id, "--store", dsn)
    assert "nonfinite" not in healthy.output

    samples = invoke("samples", team["sampled"].id, "--store", dsn, "--last", "--json")
    assert samples.exit_code == 0, samples.output
    assert "3+3" in samples.output and "2+2" in samples.output

    diff = invoke("diff", team["healthy"].id, diverged, "--store", dsn)
    assert diff.exit_code == 0, diff.output

    page = tmp_path / "report.html"
    report = invoke("report", diverged, "--store", dsn, "-o", str(page))
    assert report.exit_code == 0, report.output
    assert "nonfinite" in page.read_text()

    missing = invoke("show", "no-such-run", "--store", dsn)
    assert missing.exit_code != 0 and "no run 'no-such-run'" in missing.output


def test_a_read_only_role_reads_and_cannot_write(pg: Any, dsn: str,
                                                 team: dict[str, Any]) -> None:
    import psycopg

    from trackmux.store.read import StoreSource

    database = dsn.rsplit("/", 1)[1]
    reader = f"reader_{database}"
    pg.sql(f"CREATE ROLE {reader} LOGIN PASSWORD 'r'")
    init = invoke("store", "init", dsn, "--reader", reader)
    assert init.exit_code == 0, init.output
    reader_dsn = pg.dsn_for(reader, "r", database)
    source = StoreSource(reader_dsn)
    assert len(source.runs()) == 3
    entry = source.find(team["healthy"].id)
    assert source.series(entry, "loss").steps == list(range(30))
    source.close()
    with psycopg.connect(reader_dsn) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("INSERT INTO trackmux.goals (project, key, op, value) "
                     "VALUES ('x', 'y', '>', 1)")


def test_goals_give_the_best_run_so_far(dsn: str, team: dict[str, Any]) -> None:
    assert invoke("goals", "set", "team", "reward >= 0.9", "--store", dsn).exit_code == 0
    assert invoke("goals", "set", "team", "loss < 0.01", "--store", dsn).exit_code == 0
    bad = invoke("goals", "set", "team", "reward ~ 3", "--store", dsn)
    assert bad.exit_code == 2 and "KEY >= VALUE" in bad.output
    board = json.loads(invoke("goals", "team", "--store", dsn, "--json").output)
    by_goal = {row["goal"]: row for row in board}
    assert set(by_goal) == {"reward >= 0.9", "loss < 0.01"}, board
    reward = by_goal["reward >= 0.9"]
    assert reward["best"]["value"] == pytest.approx(29 / 30) and reward["met"] is True
    assert reward["best"]["step"] == 29
    loss = by_goal["loss < 0.01"]  # NaN never counts as the best loss
    assert loss["best"]["value"] == pytest.approx(1 / 30) and loss["met"] is False
    # changing a target keeps one goal
    invoke("goals", "set", "team", "loss < 0.05", "--store", dsn)
    board = json.loads(invoke("goals", "team", "--store", dsn, "--json").output)
    assert [r["goal"] for r in board] == ["reward >= 0.9", "loss < 0.05"]
    assert board[1]["met"] is True
    text = invoke("goals", "team", "--store", dsn).output
    assert "reward >= 0.9: met (2 of 3 runs now, by latest value); nearest: " in text
    assert " at 0.966667, step 29, " in text


def test_a_goal_is_judged_on_where_runs_are_now_not_on_a_lucky_point(
        dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43 item 1: KL 0.011 at step 0, then every run ends at 0.2-0.6."""
    ends = {"a": 0.2, "b": 0.6, "c": 0.3}
    for host, end in ends.items():
        monkeypatch.setenv("TRACKMUX_HOST", host)
        run = trackmux.init("grpo", host, backends=["postgres"], dir=tmp_path / host,
                            delivery="thread", backend_options={"postgres": {"dsn": dsn}})
        for step in range(10):
            run.log({"train/kl": 0.011 if step == 0 else end + 0.01 * (step % 2)}, step=step)
        assert run.finish(timeout=60).pending == {}
    assert invoke("goals", "set", "grpo", "train/kl < 0.05", "--store", dsn).exit_code == 0
    board = json.loads(invoke("goals", "grpo", "--store", dsn, "--json").output)
    assert len(board) == 1
    kl = board[0]
    assert kl["met"] is False and kl["meeting"] == 0 and kl["runs"] == 3
    assert kl["judged"] == "latest value" and kl["last"] == 1
    nearest = kl["best"]  # the run nearest the target now, at its latest point
    assert nearest["name"] == "a" and nearest["step"] == 9
    assert nearest["value"] == pytest.approx(0.21) and nearest["time"] > 0
    text = invoke("goals", "grpo", "--store", dsn).output
    assert text.startswith("train/kl < 0.05: not met (0 of 3 runs now, by latest value); "
                           "nearest: a at 0.21, step 9, "), text
    # the mean of the last N points: 0.2 and 0.21 alternate
    three = json.loads(invoke("goals", "grpo", "--store", dsn, "--json", "--last", "4")
                       .output)[0]
    assert three["judged"] == "mean of the last 4 points" and three["best"]["points"] == 4
    assert three["best"]["value"] == pytest.approx(0.205)
    bad = invoke("goals", "grpo", "--store", dsn, "--last", "0")
    assert bad.exit_code == 2 and "--last" in bad.output
    # a target the runs do reach now is met, by the count of runs that reach it
    invoke("goals", "set", "grpo", "train/kl < 0.4", "--store", dsn)
    board = json.loads(invoke("goals", "grpo", "--store", dsn, "--json").output)
    assert board[0]["met"] is True and board[0]["meeting"] == 2


def test_an_older_schema_is_read_and_upgraded(dsn: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    from trackmux.store import schema
    from trackmux.store.read import StoreSource

    with psycopg.connect(dsn) as conn:
        assert schema.migrate(conn, upto=1) == (0, 1)  # as an older trackmux left it
    run = train(tmp_path, "node-a", dsn, steps=5, monkeypatch=monkeypatch)
    assert run.finish(timeout=60).pending == {}
    assert rows(dsn, "SELECT max(version) FROM trackmux.schema_version")[0][0] == 2
    with psycopg.connect(dsn) as conn:  # back to version 1: the reader copes
        conn.execute("DROP TABLE trackmux.goals")
        conn.execute("DELETE FROM trackmux.schema_version WHERE version = 2")
    source = StoreSource(dsn)
    assert source.version == 1 and len(source.runs()) == 1
    assert source.goals("team") == []
    source.close()


def test_a_reader_opened_before_the_store_has_tables_sees_runs_later(
        dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trackmux.store.read import StoreSource

    source = StoreSource(dsn)
    assert source.runs() == [] and source.version == 0
    run = train(tmp_path, "node-a", dsn, steps=3, monkeypatch=monkeypatch)
    assert run.finish(timeout=60).pending == {}
    assert [e.run_id for e in source.runs()] == [run.id]
    source.close()
