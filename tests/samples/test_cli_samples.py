"""``trackmux samples`` and its --where language: filters, sorting, groups, JSON, and bad
usage named with exit status 2."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import trackmux
from trackmux.cli.samples import samples
from trackmux.samples.where import WhereError, compile_where


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    for step in (0, 1, 2, 10):
        run.log_samples("rollouts", {
            "uid": [f"g{i // 4}" for i in range(8)],
            "reward": [0.1 * i for i in range(8)],
            "response": ["sorry" if i % 3 == 0 else f"x = {i} " * i for i in range(8)]},
            step=step, tokens={"lp": [[-1.0] * (i * 30) for i in range(8)]})
    run.log_samples("val", {"reward": [1.0]}, step=2)
    run.finish(timeout=30)
    return run.dir


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(samples, [*args])
    return result.exit_code, result.output


def test_lists_keys_and_steps(run_dir: Path) -> None:
    code, out = _run(str(run_dir))
    assert code == 0
    assert "rollouts: 4 steps (0-2, 10)" in out and "val: 1 steps (2)" in out


def test_where_sort_group_and_json(run_dir: Path) -> None:
    code, out = _run(str(run_dir), "--key", "rollouts", "--step", "1", "--json",
                     "--where", "reward < 0.65 and length > 100", "--sort", "-reward")
    assert code == 0, out
    data = orjson.loads(out)
    assert data["count"] == 8 and [r["sample"] for r in data["rows"]] == [6, 5, 4]
    code, out = _run(str(run_dir), "-k", "rollouts", "-s", "2", "--group", "g1", "--json",
                     "--where", 'not (response contains "sorry")')
    assert [r["sample"] for r in orjson.loads(out)["rows"]] == [4, 5, 7]
    code, out = _run(str(run_dir), "-k", "rollouts", "--last", "--sort", "reward",
                     "--limit", "2")
    assert code == 0 and "rollouts @ step 10: 8 of 8 samples (first 2)" in out


def test_bad_usage_exits_2_naming_the_problem(run_dir: Path) -> None:
    for args, message in [
            (["--step", "1"], "--key is needed"),
            (["-k", "nope", "-s", "1"], "no samples under --key 'nope'"),
            (["-k", "rollouts", "-s", "5"], "steps: 0-2, 10"),
            (["-k", "rollouts", "-s", "1", "--where", "reward <"], "ends too early"),
            (["-k", "rollouts", "-s", "1", "--where", "rewrd > 1"], "unknown column 'rewrd'"),
            (["-k", "rollouts", "-s", "1", "--where", "reward > 1 )"], "unexpected ')'"),
            (["-k", "rollouts", "-s", "1", "--sort", "nope"], "--sort: unknown column"),
            (["-k", "val", "-s", "2", "--group", "g1"], "no group column")]:
        code, out = _run(str(run_dir), *args)
        assert code == 2 and message in out, (args, out)
    code, out = _run(str(run_dir.parent / "missing"))
    assert code == 2


def test_where_language() -> None:
    rows = [{"a": 1, "b": "xyz", "c": None, "d/e": 2.5}, {"a": 5, "b": "q", "c": 3, "d/e": -1}]
    def pick(expr: str) -> list[int]:
        pred = compile_where(expr, ["a", "b", "c", "d/e"])
        return [i for i, r in enumerate(rows) if pred(r)]
    assert pick("a >= 1 and a < 5") == [0]
    assert pick("b contains 'y' or d/e < 0") == [0, 1]
    assert pick("c == null") == [0] and pick("c > 1") == [1] and pick("c") == [1]
    assert pick("not (a == 1)") == [1] and pick("b > 1") == []  # text vs number: false
    assert pick("a == 1e0 or `d/e` == -1") == [0, 1]
    for bad, message in [("", "empty"), ("a <", "ends too early"), ("a ! 1", "cannot read"),
                         ("(a > 1", "missing ')'"), ("zz == 1", "unknown column 'zz'")]:
        with pytest.raises(WhereError, match=re.escape(message)):
            compile_where(bad, ["a"])


def test_show_lists_samples_keys_without_decoding_them(run_dir: Path) -> None:
    from trackmux.cli.show import show

    result = CliRunner().invoke(show, [str(run_dir)])
    assert result.exit_code == 0, result.output
    assert "samples (2 keys" in result.output
    assert "rollouts: 4 at steps 0..10" in result.output


def test_where_without_step_searches_every_step_and_names_them(run_dir: Path) -> None:
    """Issue 33.12: --where without --step used to list the keys and drop the filter."""
    code, out = _run(str(run_dir), "--where", "reward > 0.65", "--json")
    assert code == 0, out
    data = orjson.loads(out)
    # reward 0.7 (sample 7) at every rollouts step; val's reward 1.0 at step 2
    assert data["matched_steps"] == {"rollouts": [0, 1, 2, 10], "val": [2]}
    assert sorted((r["key"], r["step"], r["sample"]) for r in data["rows"]) == [
        ("rollouts", 0, 7), ("rollouts", 1, 7), ("rollouts", 2, 7), ("rollouts", 10, 7),
        ("val", 2, 0)]
    code, out = _run(str(run_dir), "-k", "rollouts", "--where", "reward > 0.65")
    assert code == 0 and "4 samples matched" in out and "rollouts: steps 0-2, 10" in out
    code, out = _run(str(run_dir), "--group", "g1", "--where", "reward < 0.5", "--json")
    data = orjson.loads(out)  # val has no group column: skipped, and said so
    assert data["matched"] == 4 and data["skipped_steps"] == {"val": [2]}
    code, out = _run(str(run_dir), "--where", "rewrd > 1")
    assert code == 2 and "unknown column 'rewrd'" in out
    code, out = _run(str(run_dir), "--where", "reward > 5")
    assert code == 0 and "0 samples matched" in out
    code, out = _run(str(run_dir), "--sort", "reward")  # no step, nothing to sort: refused
    assert code == 2 and "--sort orders the samples of one step" in out
