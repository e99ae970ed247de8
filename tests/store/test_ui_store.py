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
