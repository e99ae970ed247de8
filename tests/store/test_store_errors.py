"""A store that cannot be reached or used, as a newcomer meets it (issue 43 items 2-4):
one clear line and exit status 3 for a malformed DSN, a wrong database or password and a
refused or silent server; `trackmux sync` says so within seconds instead of retrying in
silence; `-o postgres.dsn=` fixes a bad DSN in place (no phantom "pending"); `runs` and
`show` name why a backend's events are pending."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from store_support import rows, train

import trackmux
from trackmux.cli.main import cli


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def closed_port() -> int:
    """A loopback port nothing listens on (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts TCP connections and never says a word (a hung server)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


def one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("Error: "), output
    return lines[0]


def test_each_way_of_not_reaching_the_store_is_one_line_and_exit_3(pg: Any, dsn: str) -> None:
    base = dsn.rsplit("/", 1)[0]
    cases = {
        "malformed": ("postgresql//user@host/db", "malformed store URL"),
        "database": (f"{base}/no_such_db", 'database "no_such_db" does not exist'),
        "password": (dsn.replace(pg.password, "wrong-pw"), "password authentication failed"),
        "refused": (f"postgresql://{pg.user}:{pg.password}@127.0.0.1:{closed_port()}/x",
                    "cannot reach the store"),
    }
    for case, (store, says) in cases.items():
        for command in (["runs", "--store", store], ["goals", "team", "--store", store],
                        ["show", "some-run", "--store", store]):
            result = invoke(*command)
            assert result.exit_code == 3, (case, command, result.output)
            line = one_error_line(result.output)
            assert says in line, (case, command, line)
            assert pg.password not in line and "wrong-pw" not in line
    for store, says in (cases["malformed"], cases["refused"]):  # trackmux ui DSN too
        pytest.importorskip("starlette")
        result = invoke("ui", store, "--port", "0")
        assert result.exit_code == 3 and says in one_error_line(result.output), result.output
    missing = invoke("runs", "--store", "/no/such/folder")  # nor a folder that is not there
    assert missing.exit_code == 3 and "no store at /no/such/folder" in missing.output
    ok = invoke("runs", "--store", dsn)
    assert ok.exit_code == 0, ok.output


def _sync(root: Path, *args: str, env: dict[str, str] | None = None,
          timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "TRACKMUX_DIR": str(root), **(env or {})}
    full.pop("TRACKMUX_POSTGRES_DSN", None)
    return subprocess.run([sys.executable, "-m", "trackmux", "sync", *args], env=full,
                          capture_output=True, text=True, timeout=timeout)


def test_sync_after_a_bad_dsn_fails_fast_then_o_dsn_delivers_that_backends_events(
        pg: Any, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        silent_server: int) -> None:
    database = dsn.rsplit("/", 1)[1]
    no_password = pg.dsn_for(pg.user, None, database)  # the role, no password: refused
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))
    run = train(tmp_path, "node-a", no_password, steps=20, monkeypatch=monkeypatch)
    summary = run.finish(timeout=60)
    events = summary.events
    assert summary.pending == {"postgres": events}
    env = {"PGPASSFILE": str(tmp_path / "no-pgpass"), "PGPASSWORD": ""}

    again = _sync(tmp_path, run.id, "--to", "postgres", env=env)
    assert again.returncode == 3, again.stdout + again.stderr
    assert "no password supplied" in again.stderr
    assert "held a secret" not in again.stderr  # the stored DSN had none
    silent = _sync(tmp_path, run.id, "--to", "postgres", "-o",
                   f"postgres.dsn=postgresql://u@127.0.0.1:{silent_server}/x", env=env)
    assert silent.returncode == 3, silent.stdout + silent.stderr  # connect_timeout, no hang
    assert "cannot reach the store" in silent.stderr and "timeout" in silent.stderr

    fixed = _sync(tmp_path, run.id, "--to", "postgres", "-o", f"postgres.dsn={dsn}", env=env)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "new destination" not in fixed.stdout
    assert f"delivered {events} events now" in fixed.stdout
    assert rows(dsn, "SELECT count(*) FROM trackmux.events")[0][0] == events
    listed = invoke("runs", str(tmp_path))
    lines = [line.strip() for line in listed.output.splitlines()]
    assert (f"postgres: delivered (acknowledged up to event {events} of {events})"
            in lines), listed.output
    assert "pending" not in listed.output and "@dsn" not in listed.output
    assert pg.password not in listed.output
    places = (run.dir / "sync-destinations.json").read_text()
    assert pg.password not in places  # no secret on disk either
    assert json.loads(places)["postgres"]["dsn"].endswith(f"/{database}")


def test_a_dsn_with_a_password_held_a_secret_and_one_without_did_not(
        pg: Any, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trackmux.core.spool.reader import SpoolReader

    run = train(tmp_path, "node-a", dsn, steps=3, monkeypatch=monkeypatch)
    assert run.finish(timeout=60).pending == {}
    reader = SpoolReader(run.dir)
    stored = reader.meta()["backend_options"]["postgres"]["dsn"]
    reader.close()
    assert "***" in stored  # with a password: redacted, and sync says so
    moved = _sync(tmp_path, run.id, "--to", "postgres")
    assert "held a secret" in moved.stderr
    # the password from libpq's PGPASSWORD, the DSN names the role only: kept as it is
    plain = pg.dsn_for(pg.user, None, dsn.rsplit("/", 1)[1])
    monkeypatch.setenv("PGPASSWORD", pg.password)
    other = train(tmp_path / "b", "node-b", plain, steps=3, monkeypatch=monkeypatch)
    assert other.finish(timeout=60).pending == {}
    reader = SpoolReader(other.dir)
    assert reader.meta()["backend_options"]["postgres"]["dsn"] == plain
    reader.close()
    again = _sync(tmp_path / "b", other.id, "--to", "postgres",
                  env={"PGPASSWORD": pg.password})
    assert again.returncode == 0, again.stdout + again.stderr
    assert "held a secret" not in again.stderr
    assert "nothing to do: all" in again.stdout


def test_runs_and_show_say_why_a_backends_events_are_pending(
        pg: Any, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = dsn.replace(pg.password, "wrong-pw")
    refused = f"postgresql://{pg.user}@127.0.0.1:{closed_port()}/x"
    made = {}
    for case, target in (("password", bad), ("refused", refused)):
        monkeypatch.setenv("TRACKMUX_HOST", case)
        run = trackmux.init("team", case, backends=["postgres"], dir=tmp_path,
                            backend_options={"postgres": {"dsn": target}},
                            delivery="process", orphan_timeout=0)
        for step in range(3):
            run.log({"loss": 1.0}, step=step)
        run.finish(timeout=3)
        made[case] = run
    log_of = {case: run.dir / "delivery.log" for case, run in made.items()}
    deadline = time.monotonic() + 60  # the delivery process writes its log as it goes
    while time.monotonic() < deadline and not all(
            p.exists() and "backend 'postgres'" in p.read_text() for p in log_of.values()):
        time.sleep(0.1)
    listed = invoke("runs", str(tmp_path)).output
    why = [line.strip() for line in listed.splitlines() if line.strip().startswith("why:")]
    assert len(why) == 2, listed
    assert any("failed: open: cannot use the store" in w and
               "password authentication failed" in w for w in why), why
    assert any("cannot reach the store" in w and "refused" in w for w in why), why
    assert "wrong-pw" not in listed
    shown = invoke("show", str(made["password"].dir)).output
    assert "why: failed: open: cannot use the store" in shown, shown
