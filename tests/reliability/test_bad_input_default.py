"""Bad input in the default mode (issue 27, item 1): a tracker never kills training.

A value, key, row, image, histogram or text that cannot be kept is dropped, the rest of
the call arrives at the backend, each (kind, name) is named once in a warning and counted
in the run's problems (FinishSummary, the spool's meta for ``trackmux show`` and the
report). ``strict=True`` / ``TRACKMUX_STRICT=1`` raise instead (test_bad_input.py holds the
strict corpus); a call after ``finish()`` raises either way."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trackmux
from spool_support import spool_meta
from trackmux.cli.main import cli
from trackmux.core.lifecycle.run import DisabledRun
from trackmux.core.values.normalize import normalize_metrics


class FloatRaises:
    def __float__(self) -> float:
        raise RuntimeError("no float for you")


def _warnings(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and text in r.getMessage()]


def test_a_none_metric_is_dropped_and_the_rest_arrives(
        memory_backend: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The issue's own line: loss arrives, val/acc is named once and counted."""
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="trackmux"):
        run.log({"loss": 1.0, "val/acc": None}, step=5)
        for step in range(6, 10):
            run.log({"loss": float(step), "val/acc": None}, step=step)
        summary = run.finish(timeout=30)
    assert summary.complete and summary.input_dropped == 5
    assert [(p.backend, p.kind, p.count) for p in summary.problems] == [
        ("input", "metric 'val/acc'", 5)]
    assert "NoneType" in summary.problems[0].message
    metrics = memory_backend[run.id].metrics()
    assert metrics["loss"] == [(5, 1.0)] + [(s, float(s)) for s in range(6, 10)]
    assert "val/acc" not in metrics
    assert len(_warnings(caplog, "bad metric 'val/acc'")) == 1
    assert spool_meta(run.dir)["input_dropped"] == [
        {"what": "metric", "name": "'val/acc'", "count": 5,
         "reason": summary.problems[0].message}]


@pytest.mark.parametrize(("data", "bad"), [
    ({"s": "0.5"}, "metric 's'"),
    ({"nested": [[1.0, 2.0]]}, "metric 'nested'"),
    ({"f": FloatRaises()}, "metric 'f'"),
    ({"v": np.zeros(3)}, "metric 'v'"),
    ({"big": 10**400}, "metric 'big'"),
    ({5: 1.0}, "metric 5 (int)"),
    ({None: 1.0}, "metric None (NoneType)"),
    ({"": 1.0}, "metric ''"),
    ({"tab\there": 1.0}, "metric 'tab\\there'"),
    ({"x" * 1001: 1.0}, "metric '" + "x" * 199),
    ({"a": {3: 1.0}}, "metric 3 (int)"),
    ({"a/b": 1.0, "a": {"b": 2.0}}, "metric 'a/b'"),
], ids=["str", "nested-list", "float-raises", "array", "beyond-float", "int-key", "none-key",
        "empty-key", "control-key", "long-key", "nested-int-key", "collision"])
def test_each_kind_of_bad_metric_is_named_and_the_rest_kept(
        memory_backend: Any, tmp_path: Path, data: dict[Any, Any], bad: str) -> None:
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    run.log({**data, "good": 1.0}, step=0)
    summary = run.finish(timeout=30)
    [problem] = summary.problems
    assert problem.backend == "input" and problem.kind.startswith(bad) and problem.count == 1
    assert memory_backend[run.id].metrics()["good"] == [(0, 1.0)]


def test_data_that_is_not_a_mapping_and_bad_steps_drop_the_call(
        memory_backend: Any, tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    run.log([("a", 1.0)])  # type: ignore[arg-type]
    run.log({"a": 1.0}, step=-1)
    run.log({"a": 1.0}, step=1.5)  # type: ignore[arg-type]
    run.log_table("t", ["c"], [[1]], step=True)  # type: ignore[arg-type]
    run.log({"a": 2.0}, step=3)
    summary = run.finish(timeout=30)
    kinds = {p.kind: p.count for p in summary.problems}
    assert kinds == {"log() data 'list'": 1, "step -1 (int)": 1, "step 1.5 (float)": 1,
                     "step True (bool)": 1}
    assert memory_backend[run.id].metrics()["a"] == [(3, 2.0)]
    assert not memory_backend[run.id].of_kind("table")


def test_tables_keep_the_good_rows_and_name_the_bad(memory_backend: Any,
                                                   tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    rows: list[Any] = [[1, "a"], [2], "not a row", [3, "c"], None, {"n": 4, "s": "d"}]
    run.log_table("samples", ["n", "s"], rows, step=1)
    run.log_table("broken", ["n", "n"], [[1, 2]], step=1)   # bad columns: no row can be kept
    run.log_table(7, ["n"], [[1]], step=1)                   # type: ignore[arg-type]
    summary = run.finish(timeout=30)
    kinds = {p.kind: (p.count, p.message) for p in summary.problems}
    assert kinds["table row 'samples'"][0] == 3
    assert "rows[1]" in kinds["table row 'samples'"][1]      # the first bad row is named
    assert "columns must be unique" in kinds["table 'broken'"][1]
    assert "table 7 (int)" in kinds
    [table] = memory_backend[run.id].of_kind("table")
    assert table.key == "samples" and table.rows == ((1, "a"), (3, "c"), (4, "d"))


def test_images_histograms_text_and_config(memory_backend: Any, tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    run.log_image("img", None)
    run.log_image("img", np.zeros((0, 4)))
    run.log_image("ok", np.zeros((2, 2), dtype=np.uint8), caption=3)  # type: ignore[arg-type]
    run.log_histogram("h", "not values")
    run.log_histogram("h2", [1.0, 2.0], bins=0)
    run.log_text("t", 42)  # type: ignore[arg-type]
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    run.log_config(cyclic)
    run.log_text("fine", "arrives")
    summary = run.finish(timeout=30)
    kinds = {p.kind: p.count for p in summary.problems}
    assert kinds == {"image 'img'": 2, "caption 'ok'": 1, "histogram 'h'": 1,
                     "histogram 'h2'": 1, "text 't'": 1, "config 'config'": 1}
    got = memory_backend[run.id]
    [image] = got.of_kind("image")
    assert image.key == "ok" and image.caption is None       # kept without its caption
    assert [e.key for e in got.of_kind("text")] == ["fine"]


def test_show_and_the_report_list_the_bad_input(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    for step in range(3):
        run.log({"loss": 1.0, "val/acc": None}, step=step)
    run.finish()
    shown = CliRunner().invoke(cli, ["show", str(run.dir)])
    assert shown.exit_code == 0, shown.output
    assert "bad input dropped at the door" in shown.output
    assert "metric 'val/acc': 3x" in shown.output
    listed = CliRunner().invoke(cli, ["runs", str(tmp_path)])
    assert "3 bad values dropped at the door" in listed.output, listed.output
    out = tmp_path / "r.html"
    made = CliRunner().invoke(cli, ["report", str(run.dir), "-o", str(out)])
    assert made.exit_code == 0, made.output
    # the report embeds its text as JSON (drawn with textContent: no HTML entities)
    assert "bad input dropped at the door: metric 'val/acc': 3x" in out.read_text()


def test_strict_raises_and_names_the_variable(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path, strict=True)
    with pytest.raises(TypeError, match="'val/acc'"):
        run.log({"loss": 1.0, "val/acc": None})
    run.finish()
    monkeypatch.setenv("TRACKMUX_STRICT", "1")
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    with pytest.raises(TypeError, match="'val/acc'"):
        run.log({"loss": 1.0, "val/acc": None})
    run.finish()
    run = trackmux.init(project="p", backends=[], dir=tmp_path, strict=False)  # arg wins
    run.log({"val/acc": None})
    assert run.finish().input_dropped == 1
    monkeypatch.setenv("TRACKMUX_STRICT", "maybe")
    with pytest.raises(ValueError, match="TRACKMUX_STRICT"):
        trackmux.init(project="p", backends=[], dir=tmp_path)


def test_a_call_after_finish_still_raises(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    run.finish()
    for call in (lambda: run.log({"a": None}), lambda: run.log_text("k", 3),
                 lambda: run.log_table("t", ["a"], "x"), lambda: run.log_image("i", None),
                 lambda: run.log_histogram("h", None), lambda: run.log_config({})):
        with pytest.raises(trackmux.RunFinishedError):
            call()


def test_steps_going_back_warn_once_and_keep_the_data(
        memory_backend: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="trackmux"):
        for step in (5, 6, 2, 3, 1, 7):
            run.log({"x": float(step)}, step=step)
    summary = run.finish(timeout=30)
    assert len(_warnings(caplog, "went back from step 6 to step 2")) == 1
    assert len(_warnings(caplog, "went back")) == 1
    assert [s for s, _ in memory_backend[run.id].metrics()["x"]] == [5, 6, 2, 3, 1, 7]
    assert not summary.problems


def test_disabled_run_drops_and_counts_like_run(tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    disabled = DisabledRun("p", None, "rank 3: only rank 0 creates a run")
    with caplog.at_level(logging.WARNING, logger="trackmux"):
        for _ in range(2):
            disabled.log({"loss": 1.0, "val/acc": None})
        disabled.log_table("t", ["a"], [[1], [1, 2]])
        disabled.log_image("i", None)
    summary = disabled.finish()
    assert {(p.kind, p.count) for p in summary.problems} == {
        ("metric 'val/acc'", 2), ("table row 't'", 1), ("image 'i'", 1)}
    assert _warnings(caplog, "rank 3: bad metric 'val/acc'")


def test_many_distinct_bad_keys_are_bounded(tmp_path: Path) -> None:
    from trackmux.core.values.intake import MAX_NAMED

    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    logger = logging.getLogger("trackmux")
    level = logger.level
    logger.setLevel(logging.ERROR)  # 1000 first-time warnings are not this test's point
    try:
        for i in range(MAX_NAMED + 500):
            run.log({f"k{i}": None, "ok": 1.0})
    finally:
        logger.setLevel(level)
    summary = run.finish()
    assert len(summary.problems) == MAX_NAMED + 1 and summary.input_dropped == MAX_NAMED + 500
    assert summary.problems[-1].kind == "metric (other names)"


_keys = st.one_of(st.text(max_size=6), st.integers(), st.none(),
                  st.sampled_from(["", "a\x00b", "x" * 1001, "ok\ud800"]))
_values = st.recursive(
    st.one_of(st.floats(), st.integers(-(10**400), 10**400), st.text(max_size=3), st.none(),
              st.booleans(), st.builds(FloatRaises)),
    lambda inner: st.one_of(st.lists(inner, max_size=2),
                            st.dictionaries(_keys, inner, max_size=2)), max_leaves=5)


@pytest.fixture(scope="module")
def lenient(tmp_path_factory: pytest.TempPathFactory) -> Any:
    run = trackmux.init(project="p", backends=[], dir=tmp_path_factory.mktemp("lenient"))
    yield run
    run.finish()


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.dictionaries(_keys, _values, max_size=4))
def test_log_never_raises_and_keeps_exactly_the_good_entries(lenient: Any,
                                                             data: dict[Any, Any]) -> None:
    """Whatever the payload, log() returns; what it keeps is what each entry alone would
    give (a nested/flat collision keeps the first)."""
    dropped: list[object] = []
    kept = normalize_metrics(data, lambda name, exc: dropped.append(name))
    before = lenient._intake.total
    lenient.log(data)
    assert lenient._intake.total - before == len(dropped)
    for key, value in kept.items():
        assert isinstance(key, str) and isinstance(value, (int, float))
