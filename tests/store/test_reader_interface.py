"""One reader interface, two implementations: the same run read from its spool folder
and from the store gives the same answers."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from store_support import train

from trackmux.readers import RunSource, open_source


def test_spool_and_store_answer_alike(dsn: str, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    run = train(tmp_path / "node-a", "node-a", dsn, steps=12, monkeypatch=monkeypatch,
                config={"lr": 0.1, "model": {"name": "qwen"}})
    run.log_config({"model": {"size": "7b"}})
    run.log({"loss": math.nan}, step=12)  # the live doctor adds a finding
    run.log_samples("gen", {"prompt": ["a", "b"], "reward": [1.0, 0.0]}, step=5)
    assert run.finish(timeout=60).pending == {}

    spool = open_source(tmp_path / "node-a")
    store = open_source(dsn)
    assert isinstance(spool, RunSource) and isinstance(store, RunSource)
    a, b = spool.find(run.id), store.find(run.id)
    for field in ("run_id", "project", "name", "host", "user", "state", "events",
                  "last_seq", "last_step"):
        assert getattr(a, field) == getattr(b, field), field
    assert a.host == "node-a" and a.last_step == 12
    assert [e.run_id for e in spool.runs()] == [e.run_id for e in store.runs()] == [run.id]
    assert spool.keys(a) == store.keys(b) == ["loss", "reward"]
    sa, sb = spool.series(a, "reward"), store.series(b, "reward")
    assert (sa.seqs, sa.steps, sa.values) == (sb.seqs, sb.steps, sb.values)
    tail_a, tail_b = spool.series(a, "loss", after=5), store.series(b, "loss", after=5)
    assert tail_a.steps == tail_b.steps and tail_a.cursor == tail_b.cursor
    assert math.isnan(tail_b.values[-1])
    assert spool.config(a) == store.config(b) == {"lr": 0.1,
                                                   "model": {"name": "qwen", "size": "7b"}}
    assert spool.findings(a) == store.findings(b) and spool.findings(a)[0]["rule"] == "nonfinite"
    (sample_a,), (sample_b,) = spool.samples(a, "gen", 5), store.samples(b, "gen", 5)
    assert sample_a.values == sample_b.values
    assert [e.seq for e in spool.events(a, "config")] == [e.seq for e in store.events(b, "config")]
    assert spool.provenance(a) == store.provenance(b) is None  # provenance is off in tests
    replica = store.replica(b, tmp_path / "replicas")
    assert open_source(tmp_path / "replicas").find(run.id).events == a.events
    assert replica.name == f"node-a--{run.id}"
    assert spool.replica(a, tmp_path) == Path(a.ref)
    spool.close()
    store.close()

    from click.testing import CliRunner

    from trackmux.cli.main import cli

    for where in (str(tmp_path / "node-a"), dsn):  # --store is a folder or the store
        shown = CliRunner().invoke(cli, ["show", run.id, "--store", where])
        assert shown.exit_code == 0 and "reward" in shown.output, shown.output
