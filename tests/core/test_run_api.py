"""The training loop's API: steps, defaults, events as delivered, config handling."""

from __future__ import annotations

import math
import stat
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trackmux
from trackmux.core.spool.reader import SpoolReader
from trackmux.testing.pacer import HeldCommits


def test_events_keep_step_and_time_and_step_none_continues(memory_backend: Any,
                                                           tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    run.log({"a": 1.0})            # step 0
    run.log({"a": 2.0})            # step 1
    run.log({"a": 3.0}, step=10)
    run.log({"a": 4.0})            # step 11
    run.log_table("t", ["x"], [[1]])  # attaches to the last step: 11
    logged_by = time.time()
    run.finish()
    got = memory_backend[run.id]
    assert got.metrics()["a"] == [(0, 1.0), (1, 2.0), (10, 3.0), (11, 4.0)]
    assert got.of_kind("table")[0].step == 11
    times = [e.time for e in got.of_kind("metrics")]
    # stamped at the call: after the run started (1 s for its rounding), before it returned
    assert times == sorted(times) and run.started_at - 1 <= times[0] <= logged_by
    seqs = [e.seq for e in got.events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_values_are_converted_at_the_door(memory_backend: Any, tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path, strict=True)
    run.log({"np32": np.float32(0.5), "np_int": np.int64(7), "flag": True, "zero_d":
             np.array(2.5), "nan": math.nan, "inf": -math.inf, "big": 2**70,
             "nested": {"inner": 1}}, step=3)
    with pytest.raises(TypeError, match=r"'text'.*str"):
        run.log({"text": "hello"})
    with pytest.raises(TypeError, match=r"'vec'.*1 dimensions"):
        run.log({"vec": np.zeros(3)})
    with pytest.raises(TypeError, match="'none'"):
        run.log({"none": None})
    with pytest.raises(ValueError, match="step must be >= 0"):
        run.log({"a": 1}, step=-1)
    run.finish()
    data = memory_backend[run.id].of_kind("metrics")[0].data
    assert data["np32"] == 0.5 and type(data["np32"]) is float
    assert data["np_int"] == 7 and type(data["np_int"]) is int
    assert data["flag"] == 1 and type(data["flag"]) is int
    assert data["zero_d"] == 2.5 and math.isnan(data["nan"]) and data["inf"] == -math.inf
    assert data["big"] == float(2**70) and data["nested/inner"] == 1


def test_backends_default_from_environment(memory_backend: Any, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKMUX_BACKENDS", "memory, file")
    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(tmp_path / "files"))
    run = trackmux.init(project="p", dir=tmp_path)
    assert run.backends == ["memory", "file"]
    run.finish()
    monkeypatch.delenv("TRACKMUX_BACKENDS")
    run = trackmux.init(project="p", dir=tmp_path)
    assert run.backends == ["console"]
    run.finish()


def test_config_is_redacted_before_the_spool(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_API_KEY", "wandb-env-secret-123456")
    run = trackmux.init(project="p", backends=[], dir=tmp_path, config={
        "trainer": {"api_key": "sk-live-abcdef", "max_new_tokens": 512},
        "uri": "https://bob:pa55word@mlflow.internal/",
        "note": "key is wandb-env-secret-123456",
    })
    run.finish()
    raw = b"".join(p.read_bytes() for p in run.dir.iterdir() if p.is_file())
    for secret in (b"sk-live-abcdef", b"pa55word", b"wandb-env-secret-123456"):
        assert secret not in raw
    reader = SpoolReader(run.dir)
    config = next(reader.iter_events()).config  # type: ignore[union-attr]
    reader.close()
    assert config["trainer"]["max_new_tokens"] == 512
    assert config["uri"] == "https://***@mlflow.internal/"


def test_spool_is_private(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    run.log({"a": 1})
    run.finish()
    assert stat.S_IMODE(run.dir.stat().st_mode) == 0o700
    for path in run.dir.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_other_ranks_get_a_disabled_run(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "3")
    run = trackmux.init(project="p", backends=["console"], dir=tmp_path, strict=True)
    assert isinstance(run, trackmux.DisabledRun)
    run.log({"a": 1.0}, step=1)
    with pytest.raises(TypeError):
        run.log({"a": "x"})
    run.finish()
    lenient = trackmux.init(project="p", backends=["console"], dir=tmp_path)
    lenient.log({"a": "x", "b": 1.0})  # by default dropped, named and counted on every rank
    summary = lenient.finish()
    assert summary.input_dropped == 1 and summary.problems[0].kind == "metric 'a'"
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
    ranked = trackmux.init(project="p", name="exp", backends=[], dir=tmp_path, all_ranks=True)
    assert isinstance(ranked, trackmux.Run) and ranked.name == "exp"
    ranked.finish()


def test_strict_durability_commits_before_log_returns(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path, durability="strict")
    for step in range(20):
        run.log({"a": step}, step=step)
        reader = SpoolReader(run.dir)
        assert reader.count() >= step + 1
        reader.close()
    run.finish()


def _metric_steps(run_dir: Path) -> list[int]:
    reader = SpoolReader(run_dir)
    try:
        return [e.step for e in reader.iter_events() if isinstance(e, trackmux.MetricsEvent)]
    finally:
        reader.close()


def test_flush_commits_what_log_took_without_waiting_for_the_commit_interval(
        tmp_path: Path, held_commits: HeldCommits) -> None:
    """flush() is what a trainer calls before its own checkpoint: afterwards a SIGKILL
    cannot take the steps logged so far (by default they wait up to the commit interval)."""
    # process delivery: in thread mode the in-process doctor commits to read what it judges
    run = trackmux.init(project="p", backends=[], dir=tmp_path, delivery="process")
    try:
        # Only a wake commits now (the held writer's clock never runs), and none is
        # pending: init's meta and any wake that came while it was committed are behind it.
        # (A 60 s COMMIT_INTERVAL was not enough: a flush's wake that arrived during the
        # commit it waited for was taken later, with steps 1 and 2; issue 46.)
        held_commits.settle()
        run.log({"a": 1.0}, step=1)
        run.log({"a": 2.0}, step=2)
        assert _metric_steps(run.dir) == []  # still in memory: what a kill now would lose
        assert run.flush() is True
        assert _metric_steps(run.dir) == [1, 2]
        for bad in (-1, math.nan, "5"):
            with pytest.raises(ValueError, match="timeout"):
                run.flush(timeout=bad)  # type: ignore[arg-type]
        run.log({"a": 3.0}, step=3)
        assert run.flush(timeout=None) is True and _metric_steps(run.dir) == [1, 2, 3]
    finally:
        run.finish()
    assert run.flush() is True  # nothing left to commit


def test_flush_on_another_rank_keeps_nothing_and_checks_its_timeout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    assert isinstance(run, trackmux.DisabledRun)
    run.log({"a": 1.0}, step=1)
    assert run.flush() is True
    with pytest.raises(ValueError, match="timeout"):
        run.flush(timeout=-2)
    run.finish()


def test_a_second_live_init_warns_once_naming_both_runs(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33.15: two init() calls in one process, the first still live: said once."""
    from trackmux.core.lifecycle import run as run_module

    monkeypatch.setattr(run_module, "_concurrent_warned", False)
    caplog.set_level("WARNING", logger="trackmux")
    first = trackmux.init(project="p", name="first", backends=[], dir=tmp_path)
    try:
        assert not [r for r in caplog.records if "still live" in r.getMessage()]
        second = trackmux.init(project="p", name="second", backends=[], dir=tmp_path)
        third = trackmux.init(project="p", name="third", backends=[], dir=tmp_path)
        said = [r.getMessage() for r in caplog.records if "still live" in r.getMessage()]
        assert len(said) == 1, said
        assert f"p/{second.id} (second)" in said[0] and f"p/{first.id} (first)" in said[0]
        second.finish(timeout=10)
        third.finish(timeout=10)
    finally:
        first.finish(timeout=10)
    monkeypatch.setattr(run_module, "_concurrent_warned", False)
    caplog.clear()
    after = trackmux.init(project="p", backends=[], dir=tmp_path)  # nothing live: silent
    after.finish(timeout=10)
    assert not [r for r in caplog.records if "still live" in r.getMessage()]


def test_finish_with_an_infinite_timeout_waits_and_nan_is_refused(memory_backend: Any,
                                                                  tmp_path: Path) -> None:
    """``timeout=math.inf`` ("as long as it takes") raised OverflowError from a thread
    join inside finish(); NaN passed the ``>= 0`` check and made every deadline NaN."""
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path,
                        on_finding=lambda finding: None)
    for step in range(40):
        run.log({"loss": math.nan if step == 30 else 1.0}, step=step)
    with pytest.raises(ValueError, match="timeout must be a number >= 0, got nan"):
        run.finish(timeout=math.nan)
    run.log({"loss": 1.0}, step=40)  # the refusal ended nothing: the run goes on
    summary = run.finish(timeout=math.inf)
    assert summary.complete and summary.status == "finished"
    assert [e.step for e in memory_backend[run.id].of_kind("metrics")] == list(range(41))
