"""The Sweeps tab's API: a real sweep made with trackmux's sweeps module, read back
without writing a byte of its storage; without Optuna the tab says so."""

from __future__ import annotations

import hashlib
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from sweep_ui_support import FAILED, REASON, STDERR, make_sweep_in, refused_write

from trackmux.ui.app import build_app
from trackmux.ui.store import run_id_of


def client(root: Path) -> TestClient:
    return TestClient(build_app([root], warm=False), base_url="http://127.0.0.1")


def fingerprint(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``folder``: its bytes' hash and mtime (ns)."""
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def made(tmp_path: Path) -> dict[str, Any]:
    return make_sweep_in(tmp_path)


def test_the_sweep_reads_back_with_runs_reasons_and_importance(made: dict[str, Any]) -> None:
    root = made["root"]
    sweeps_dir = root / ".sweeps"
    before = fingerprint(sweeps_dir)
    assert "sweeps.db" in before
    with client(root) as http:
        listed = http.get("/api/sweeps").json()
        assert listed["available"] is True
        [entry] = listed["sweeps"]
        assert entry["sweep"] == made["id"] and entry["method"] == "random"
        assert entry["metric"] == "reward/mean" and entry["goal"] == "maximize"
        assert entry["counts"] == {"complete": 4, "pruned": 1, "failed": 1}
        body = http.get(f"/api/sweep/{entry['id']}").json()
        assert http.get("/api/sweep/nosuchsweep").status_code == 404
    assert fingerprint(sweeps_dir) == before  # not a byte, not an mtime, no journal file

    trials = {t["number"]: t for t in body["trials"]}
    pruned_n, failed_n, *complete_n = made["by_lr"]
    pruned, failed = trials[pruned_n], trials[failed_n]
    assert pruned["state"] == "pruned" and pruned["reason"] == REASON
    assert pruned["steps"] == 13 and pruned["pruned_by"] == "doctor"
    assert failed["state"] == "failed" and failed["run"] is None
    assert failed["reason"] == FAILED and failed["stderr"] == STDERR
    # a run among the served runs is linked by its UI id; the one served elsewhere is not
    for number in (pruned_n, *complete_n[:-1]):
        assert trials[number]["run"] == run_id_of(made["runs"][number].resolve())
    assert trials[complete_n[-1]]["run"] is None
    for number in complete_n:
        t = trials[number]
        assert t["state"] == "complete"
        assert math.isclose(t["value"], 10 * t["params"]["lr"])
    assert body["best"]["number"] == complete_n[-1]  # the largest lr: 10 * lr is largest
    # importance: value rises with lr and the pruned trial (lowest lr) ranks below every
    # complete one, so Spearman's rho over the 5 trials with a target is exactly 1
    imp = {i["key"]: i for i in body["importance"]}
    assert imp["lr"]["n"] == 5 and math.isclose(imp["lr"]["value"], 1.0)
    assert body["importance"][0]["key"] == "lr"
    assert "pruned trial counts as worse" in body["importance_method"]


def test_a_folder_without_sweeps_lists_none(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    with client(tmp_path) as http:
        assert http.get("/api/sweeps").json() == {"available": True, "message": "",
                                                  "sweeps": [], "errors": []}
    assert not (tmp_path / ".sweeps").exists()  # nothing created


def test_without_optuna_the_tab_says_not_available(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "optuna", None)  # `import optuna` raises ImportError
    with client(tmp_path) as http:
        listed = http.get("/api/sweeps").json()
        one = http.get("/api/sweep/abc")
    assert listed["available"] is False and listed["sweeps"] == []
    assert "not available in this install" in listed["message"]
    assert one.status_code == 404 and "not available in this install" in one.json()["error"]


def test_the_ui_storage_cannot_write(made: dict[str, Any]) -> None:
    """The UI's connection is read-only in SQLite itself: a write Optuna tries fails."""
    from trackmux.ui import sweepview

    [db] = sweepview.databases([made["root"]])
    with sweepview.read_only(db) as storage:
        causes = refused_write(storage)
        assert any("attempt to write a readonly database" in c for c in causes), causes


def test_a_damaged_storage_is_named_and_the_other_roots_still_list(
        made: dict[str, Any], tmp_path: Path) -> None:
    damaged = tmp_path / "damaged"
    (damaged / ".sweeps").mkdir(parents=True)
    (damaged / ".sweeps" / "sweeps.db").write_bytes(b"not a database" * 100)
    app = build_app([damaged, made["root"]], warm=False)
    with TestClient(app, base_url="http://127.0.0.1") as http:
        listed = http.get("/api/sweeps").json()
        one = http.get(f"/api/sweep/{listed['sweeps'][0]['id']}")
    assert [s["sweep"] for s in listed["sweeps"]] == [made["id"]]
    assert one.status_code == 200 and len(one.json()["trials"]) == 6
    [error] = listed["errors"]
    assert error.startswith(str((damaged / ".sweeps" / "sweeps.db").resolve()))
    assert "DatabaseError: file is not a database" in error
