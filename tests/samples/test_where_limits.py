"""``--where`` past its limits (deep nesting, long literals, a huge expression) is refused
with exit 2 and a message naming the limit, never a traceback (issue 34.14)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import trackmux
from trackmux.cli.samples import samples
from trackmux.samples import where as where_mod
from trackmux.samples.where import WhereError, compile_where


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = trackmux.init(project="p", backends=[], dir=tmp_path_factory.mktemp("where"))
    run.log_samples("rollouts", {"reward": [0.1, 0.9], "response": ["a", "b"]}, step=1)
    run.finish(timeout=30)
    return run.dir


ATTACKS = {
    "parentheses": ("(" * 2000 + "reward > 0" + ")" * 2000, "nests deeper than"),
    "nots": ("not " * 3000 + "reward > 0", "nests deeper than"),
    "mixed": ("(not " * 1000 + "reward" + ")" * 1000, "nests deeper than"),
    "long number": ("reward < " + "9" * 5000, "characters, more than"),
    "long exponent": ("reward < 1e" + "9" * 5000, "characters, more than"),
    "long text": ('response == "' + "x" * 20_000 + '"', "characters, more than"),
    "huge expression": (" or ".join(["reward > 0"] * 20_000), "characters, more than"),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_cli_refuses_with_exit_2_and_a_message(run_dir: Path, name: str) -> None:
    text, message = ATTACKS[name]
    result = CliRunner().invoke(samples, [str(run_dir), "-k", "rollouts", "-s", "1",
                                          "--where", text])
    assert result.exit_code == 2, result.output
    assert "--where:" in result.output and message in result.output
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)  # click's usage exit, nothing raised


def test_within_the_limits_still_works() -> None:
    depth = where_mod.MAX_DEPTH
    deep = "(" * (depth // 2) + "not " * (depth // 2) + "reward > 0.5" + ")" * (depth // 2)
    expected = (depth // 2) % 2 == 0  # an even number of nots keeps the comparison
    assert compile_where(deep, ["reward"])({"reward": 0.9}) is expected
    number = "9" * (where_mod.MAX_NUMBER_CHARS - 1)
    assert compile_where(f"reward < {number}", ["reward"])({"reward": 0.9}) is True
    with pytest.raises(WhereError, match="nests deeper"):
        compile_where("(" * (depth + 1) + "reward" + ")" * (depth + 1), ["reward"])
