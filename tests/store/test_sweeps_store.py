"""The Sweeps tab of ``trackmux ui postgresql://...``: sweeps kept in the store's database
(``sweep create --storage postgresql://...``) are listed with the reader role of
``trackmux store init``, read in read-only transactions; each trial links to its run's
replica; a database without sweeps is not written to."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from store_support import reader_dsn, rows, serve_store
from sweep_ui_support import FAILED, REASON, STDERR, make_sweep, refused_write, tell_one_more
from ui_support import open_ui

from trackmux.cli.main import cli

pytest.importorskip("optuna")
pytest.importorskip("starlette")

WAIT_MS = 60_000


def get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{url}: {exc.code} {exc.read().decode()}") from None


def optuna_tables(dsn: str) -> list[tuple[Any, ...]]:
    return rows(dsn, "SELECT to_regclass('studies'), to_regclass('version_info')")


def contents(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every Optuna table, wherever Optuna put them."""
    from trackmux.store.connect import connect
    from trackmux.store.sweeps import sweep_tables

    conn = connect(dsn, autocommit=True)
    try:
        tables = sweep_tables(conn)
    finally:
        conn.close()
    assert len(tables) == 13
    return {f"{schema}.{table}": sorted(rows(dsn, f'SELECT * FROM "{schema}"."{table}"'),
                                        key=repr) for schema, table in tables}


def test_the_sweeps_of_the_store_are_listed_with_the_reader_role(
        pg: Any, dsn: str, browser: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from trackmux.sweeps.storage import resolve_url

    ro = reader_dsn(pg, dsn)
    monkeypatch.setenv("TRACKMUX_HOST", "node-s")
    with serve_store(ro, tmp_path / "replicas") as server:
        # no sweep yet: nothing listed, no error, and Optuna did not create its tables
        listed = get(server.url + "api/sweeps")
        assert listed == {"available": True, "message": "", "sweeps": [], "errors": []}
        assert optuna_tables(dsn) == [(None, None)]

        root, elsewhere = tmp_path / "agent", tmp_path / "elsewhere"
        made = make_sweep(root, elsewhere, resolve_url(dsn), backends=["postgres"],
                          backend_options={"postgres": {"dsn": dsn}}, delivery="thread")
        # the tables came after `store init`: the reader may not read them yet, and the
        # error says what to do
        (error,) = get(server.url + "api/sweeps")["errors"]
        assert "InsufficientPrivilege" in error and "store init" in error
        assert ":ro@" not in error  # the reader's password is never shown
        result = CliRunner().invoke(cli, ["store", "init", dsn, "--reader", ro.split("//")[1]
                                          .split(":")[0]])
        assert result.exit_code == 0 and "13 Optuna tables" in result.output, result.output

        before = contents(dsn)
        listed = get(server.url + "api/sweeps")
        assert listed["errors"] == []
        (sweep,) = listed["sweeps"]
        assert sweep["sweep"] == made["id"] and sweep["trials"] == 6
        assert sweep["counts"] == {"pruned": 1, "failed": 1, "complete": 4}
        # named by the reader's DSN without its password, and the schema Optuna used (the
        # cluster's owner is called trackmux: its search path's "$user" is that schema)
        assert sweep["storage"] == (ro.replace(":ro@", ":***@") + " (schema trackmux)")
        assert ":ro@" not in json.dumps(listed)
        # every trial's run reached the store; the UI links each to its replica, once
        # the mirror has copied the five runs
        deadline = time.monotonic() + WAIT_MS / 1000
        while True:
            one = get(server.url + f"api/sweep/{sweep['id']}")
            linked = {t["number"]: t["run"] for t in one["trials"] if t["run"]}
            if len(linked) == 5 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        pruned_n, failed_n, *complete_n = made["by_lr"]
        states = {t["number"]: (t["state"], t["reason"]) for t in one["trials"]}
        assert states[pruned_n] == ("pruned", REASON)
        assert states[failed_n] == ("failed", FAILED)
        assert next(t for t in one["trials"] if t["number"] == failed_n)["stderr"] == STDERR
        assert set(linked) == {pruned_n, *complete_n}
        served = {r["id"]: r["name"] for r in get(server.url + "api/runs")["runs"]}
        assert {served[rid] for rid in linked.values()} == {
            f"trial-{n}" for n in (pruned_n, *complete_n)}
        assert one["best"]["number"] == complete_n[-1]
        assert [i["key"] for i in one["importance"]] != []
        assert contents(dsn) == before  # the UI wrote nothing

        # in the browser: the trials with the doctor's reason, a trial told meanwhile
        page, problems = open_ui(browser, server, "#tab=sweeps",
                                 ready="#sweep-trials tr[data-trial]")
        reasons = dict(page.eval_on_selector_all(
            "#sweep-trials tr[data-trial]",
            "trs => trs.map(t => [+t.dataset.trial, t.querySelector('td.reason').textContent])"))
        assert len(reasons) == 6 and reasons[pruned_n] == REASON
        assert page.locator("a.sweep-run").count() == 5
        number = tell_one_more(made, value=100.0)
        page.wait_for_selector(f'#sweep-trials tr[data-trial="{number}"][data-state=complete]',
                               timeout=WAIT_MS)
        assert problems == []


def test_the_ui_opens_a_store_sweep_read_only(pg: Any, dsn: str, tmp_path: Path) -> None:
    """A sweep created by another role (its tables in ``public``) is found; even as the
    owner, the UI's connection to it refuses writes."""
    from trackmux.sweeps.storage import resolve_url
    from trackmux.ui import sweepview

    database = dsn.rsplit("/", 1)[1]
    sweeper = f"sw_{database}"
    pg.sql(f"CREATE ROLE {sweeper} LOGIN PASSWORD 'sw'")
    pg.sql(f"GRANT CREATE ON SCHEMA public TO {sweeper}", database=database)
    assert sweepview.store_sweeps(dsn) == []
    made = make_sweep(tmp_path / "root", tmp_path / "elsewhere",
                      resolve_url(pg.dsn_for(sweeper, "sw", database)))
    (place,) = sweepview.store_sweeps(dsn)
    assert place.schema == "public" and sweepview.label(place) == dsn.replace(
        f":{pg.password}@", ":***@")
    with sweepview.read_only(place) as storage:
        (study,) = storage.get_all_studies()
        assert study.study_name == made["id"]
        causes = refused_write(storage)
        assert any("read-only transaction" in c for c in causes), causes


def test_store_init_grants_every_table_of_optunas_storage() -> None:
    """The tables `store init` lets readers read are those of the installed Optuna."""
    from optuna.storages._rdb import models

    from trackmux.store.sweeps import OPTUNA_TABLES

    assert sorted(OPTUNA_TABLES) == sorted([*models.BaseModel.metadata.tables,
                                            "alembic_version"])


def test_store_init_says_which_sweep_tables_it_could_not_grant(
        pg: Any, dsn: str, tmp_path: Path) -> None:
    """PostgreSQL only warns when a role grants on tables it does not own: a sweep made by
    another role stays unreadable, and `grant_read` names each such table and its owner."""
    from trackmux.store.connect import connect
    from trackmux.store.sweeps import grant_read
    from trackmux.sweeps.storage import resolve_url

    database = dsn.rsplit("/", 1)[1]
    sweeper, lead, reader = (f"{kind}_{database}" for kind in ("sw", "lead", "rd"))
    for role in (sweeper, lead, reader):
        pg.sql(f"CREATE ROLE {role} LOGIN PASSWORD 'pw'")
    pg.sql(f"GRANT CREATE ON SCHEMA public TO {sweeper}", database=database)
    make_sweep(tmp_path / "root", tmp_path / "elsewhere",
               resolve_url(pg.dsn_for(sweeper, "pw", database)))
    conn = connect(pg.dsn_for(lead, "pw", database), autocommit=True)
    try:
        tables, missing = grant_read(conn, [reader])
    finally:
        conn.close()
    assert len(tables) == 13 and len(missing) == 13
    assert all(m.startswith(f"{reader} may not read public.") and f"owned by {sweeper}" in m
               for m in missing)
    conn = connect(pg.dsn_for(sweeper, "pw", database), autocommit=True)
    try:  # the tables' owner can
        assert grant_read(conn, [reader]) == (tables, [])
    finally:
        conn.close()
    assert rows(pg.dsn_for(reader, "pw", database), "SELECT count(*) FROM public.trials") == [
        (6,)]
