"""trackio's local database, written by real trackio in a child process: every run of a
project (or one run), values with NaN, config, exactly once, only new rows later."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("trackio")

from importhelp import events, meta, series

from trackmux.core.events import ConfigEvent

WRITER = textwrap.dedent("""
    import sys, trackio
    name, start, stop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    trackio.init(project="rlproj", name=name, config={"lr": 0.1, "algo": "grpo"},
                 resume="allow")
    for step in range(start, stop):
        trackio.log({"loss": 1 / (step + 1), "reward": float("nan") if step == 3 else step},
                    step=step)
    trackio.finish()
""")


def write(store: Path, name: str, start: int, stop: int) -> None:
    env = {**os.environ, "TRACKIO_DIR": str(store), "TRACKIO_STORAGE_MODE": "sqlite"}
    subprocess.run([sys.executable, "-c", WRITER, name, str(start), str(stop)], env=env,
                   check=True, timeout=300, capture_output=True, cwd=store)


def test_project_database_every_run_once_then_only_new_rows(tmp_path: Path, import_into,
                                                            monkeypatch) -> None:
    store = tmp_path / "trackio"
    store.mkdir()
    write(store, "run-a", 0, 10)
    write(store, "run-b", 0, 5)
    result = import_into(str(store / "rlproj.db"))
    assert result.code == 0, result.stderr
    by_name = {meta(r["dir"])["name"]: r for r in result.runs}
    assert set(by_name) == {"run-a", "run-b"}
    a = by_name["run-a"]
    assert a["points"] == 20 and a["steps"] == 10 and meta(a["dir"])["project"] == "rlproj"
    got = series(a["dir"])
    assert got["loss"] == [(s, 1 / (s + 1)) for s in range(10)]
    assert math.isnan(dict(got["reward"])[3])
    (config,) = [e.config for e in events(a["dir"]) if isinstance(e, ConfigEvent)]
    assert config["lr"] == 0.1 and config["algo"] == "grpo"

    assert all(r["new_points"] == 0 for r in import_into(str(store / "rlproj.db")).runs)
    write(store, "run-a", 10, 13)
    monkeypatch.setenv("TRACKIO_DIR", str(store))
    again = import_into("trackio:rlproj/run-a").run  # the same run, named by project/run
    assert again["run"] == a["run"] and again["new_points"] == 6
    assert [s for s, _ in series(a["dir"])["loss"]] == list(range(13))
    missing = import_into("trackio:rlproj/nope")
    assert missing.code == 1 and "no run 'nope'" in missing.stderr
