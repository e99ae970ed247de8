"""``trackmux ui postgresql://...``: the UI over the team store, with a read-only role:
runs of every machine with host and user, and a step logged on one machine appears."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from store_support import train

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def test_ui_serves_the_store_live_with_a_read_only_role(
        pg: Any, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from trackmux.cli.main import cli
    from trackmux.ui.app import Server
    from trackmux.ui.mirror import StoreMirror

    database = dsn.rsplit("/", 1)[1]
    reader = f"ui_{database}"
    pg.sql(f"CREATE ROLE {reader} LOGIN PASSWORD 'ro'")
    assert CliRunner().invoke(cli, ["store", "init", dsn, "--reader", reader]).exit_code == 0
    done = train(tmp_path / "a", "node-a", dsn, name="finished-one", steps=10,
                 monkeypatch=monkeypatch)
    done.finish(timeout=60)
    live = train(tmp_path / "b", "node-b", dsn, name="live-one", steps=5,
                 monkeypatch=monkeypatch)

    assert CliRunner().invoke(cli, ["goals", "set", "team", "loss <= 0.2", "--store", dsn]
                              ).exit_code == 0
    reader_dsn = pg.dsn_for(reader, "ro", database)
    mirror = StoreMirror(reader_dsn, tmp_path / "replicas", poll=0.2)
    mirror.start()
    server = Server([mirror.root], warm=False, boards=[reader_dsn]).start()
    try:
        deadline = time.monotonic() + 60
        while True:
            listed = {r["name"]: r for r in get(server.url + "api/runs")["runs"]}
            if {"finished-one", "live-one"} <= set(listed) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert listed["finished-one"]["host"] == "node-a"
        assert listed["live-one"]["host"] == "node-b"
        assert listed["finished-one"]["user"] and listed["finished-one"]["state"] == "finished"
        assert listed["live-one"]["state"] == "running"
        rid = listed["live-one"]["id"]

        live.log({"loss": 123.0, "reward": 1.0}, step=77)
        logged = time.monotonic()
        seen_after = None
        while time.monotonic() < logged + 60:
            answer = get(server.url + f"api/series?key=loss&runs={rid}")
            if "77" in json.dumps(answer):
                seen_after = time.monotonic() - logged
                break
            time.sleep(0.1)
        assert seen_after is not None, "the step never reached the UI"
        print(f"step on node-b reached the UI after {seen_after:.2f} s")
        assert mirror.error is None

        (board,) = get(server.url + "api/goals")["boards"]
        (project,) = board["projects"]
        (goal,) = project["goals"]
        assert goal["goal"] == "loss <= 0.2" and goal["met"] is True
        assert goal["best"]["name"] == "finished-one" and goal["best"]["step"] == 9
        assert goal["curve"]["steps"] == list(range(10))
        assert [r["name"] for r in project["live"]] == ["live-one"]
        with urllib.request.urlopen(server.url + "board", timeout=30) as response:
            assert b"board.js" in response.read()
    finally:
        server.stop()
        mirror.stop()
        live.finish(timeout=60)


def _fill(dsn: str, sizes: list[int], first_seq: int = 1, runs: list[int] | None = None
          ) -> list[int]:
    """Runs of ``sizes`` metrics events written straight into the store (as many
    machines' deliveries would); more events to ``runs`` when given. The store ids."""
    from trackmux.core.events import MetricsEvent
    from trackmux.store import schema
    from trackmux.store.connect import connect
    from trackmux.store.ingest import StoreWriter

    conn = connect(dsn, autocommit=True)
    schema.migrate(conn)
    writer = StoreWriter(conn)
    out = []
    for r, size in enumerate(sizes):
        if runs is None:
            run = writer.register({"run_id": f"run-{r:02d}", "project": "cold",
                                   "name": f"run-{r:02d}", "started_at": 1.7e9 + r},
                                  host=f"node-{r % 3}", user="alice")
            writer.status(run, "finished", 1.7e9 + r, {"run_id": f"run-{r:02d}"})
        else:
            run = runs[r]
        writer.write(run, [MetricsEvent({"loss": float(s)}, s, 1.7e9 + s, s)
                           for s in range(first_seq, first_seq + size)])
        out.append(run)
    conn.close()
    return out


def test_the_run_list_has_every_run_with_its_first_chunk_at_once(
        dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold start over a store of many runs: the first /api/runs lists them all, with
    host, user and state, and each with its first chunk of events (copied with its meta,
    for all runs at once); then events come in bounded chunks per run (a huge run does
    not hold the others back), and the UI picks up the growth."""
    from trackmux.ui import mirror as mirror_module
    from trackmux.ui.app import Server
    from trackmux.ui.mirror import StoreMirror

    sizes = [20] * 24 + [400]  # the newest run is huge
    _fill(dsn, sizes)
    monkeypatch.setattr(mirror_module, "FIRST_CHUNK", 5)
    monkeypatch.setattr(mirror_module, "CHUNK", 10)
    mirror = StoreMirror(dsn, tmp_path / "replicas")
    mirror.sync_once(budget=0.0)  # what start() does before the server starts
    server = Server([mirror.root], warm=False).start()
    try:
        listed = get(server.url + "api/runs")["runs"]
        assert sorted(r["name"] for r in listed) == [f"run-{r:02d}" for r in range(25)]
        assert all(r["host"] == f"node-{int(r['name'][4:]) % 3}" for r in listed)
        assert all(r["user"] == "alice" and r["state"] == "finished" for r in listed)
        # every run's first chunk came with its meta (two queries for all runs), so the
        # first list and the first chart have a beginning of every run
        assert [r["events"] for r in listed] == [5] * 25
        rids = ",".join(r["id"] for r in listed)
        first = get(server.url + f"api/series?key=loss&runs={rids}")
        assert len(first["runs"]) == 25 and first["x"] == [1, 2, 3, 4, 5]
        assert all(r["cursor"] == 5 and r["y"] == [1, 2, 3, 4, 5] for r in first["runs"])

        mirror.sync_once(budget=600)  # a round: one bounded chunk for every run
        assert [r["events"] for r in get(server.url + "api/runs")["runs"]] == [15] * 25

        rounds = 0
        while mirror.pending:
            mirror.sync_once(budget=600)
            rounds += 1
            assert rounds < 100
        chart = get(server.url + f"api/series?key=loss&runs={rids}")
        by_events = {r["id"]: r["events"] for r in get(server.url + "api/runs")["runs"]}
        assert sorted(by_events.values()) == sorted(sizes)
        assert all(r["cursor"] == by_events[r["id"]] for r in chart["runs"])
        assert mirror.behind == 0
    finally:
        server.stop()
        mirror.stop()


def test_a_live_run_is_copied_before_the_backlog(dsn: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose replica caught up gets its new steps in the next round, even when
    the round has no time left for the backlog of other runs."""
    from trackmux.core.spool.reader import SpoolReader
    from trackmux.store.read import replica_folder
    from trackmux.ui import mirror as mirror_module
    from trackmux.ui.mirror import StoreMirror

    small, big = _fill(dsn, [3, 200])
    monkeypatch.setattr(mirror_module, "FIRST_CHUNK", 5)
    monkeypatch.setattr(mirror_module, "CHUNK", 5)
    mirror = StoreMirror(dsn, tmp_path / "replicas")
    mirror.sync_once(budget=600)
    assert mirror.behind == 1 and mirror.pending  # the small run caught up, not the big
    _fill(dsn, [4], first_seq=4, runs=[small])
    mirror.sync_once(budget=0.0)  # no time for the backlog
    entries = {e.ref: e for e in mirror.source.runs()}

    def copied(ref: int) -> int:
        reader = SpoolReader(replica_folder(entries[str(ref)], mirror.root))
        try:
            return reader.last_seq()
        finally:
            reader.close()

    assert copied(small) == 7
    assert copied(big) == 10  # its first chunk with its meta, one more in the round
    mirror.stop()
