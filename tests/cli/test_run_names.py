"""A run's name names it locally, as in the store commands (issue 43 item 9): ``doctor``,
``show``, ``samples``, ``report`` and ``diff`` take ``init(name=...)``; a name several runs
share is an error that lists them."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import trackmux
from trackmux.cli.main import cli


def _run(root: Path, name: str) -> str:
    run = trackmux.init(project="names", name=name, backends=[], dir=root, doctor=False)
    assert isinstance(run, trackmux.Run)
    for step in range(5):
        run.log({"loss": 1 / (step + 1)}, step=step)
    run.log_samples("rollouts", {"prompt": ["p"], "response": ["r"], "reward": [1.0]}, step=4)
    assert run.finish(timeout=30).complete
    return run.id


@pytest.fixture
def root(tmp_path: Path) -> Path:
    _run(tmp_path, "baseline")
    _run(tmp_path, "twin")
    _run(tmp_path, "twin")
    return tmp_path


@pytest.mark.parametrize("command", [
    ["show", "baseline"], ["doctor", "baseline"], ["samples", "baseline"],
    ["report", "baseline", "-o", "{tmp}/r.html"], ["diff", "baseline", "baseline"]])
def test_a_name_picks_its_run(root: Path, command: list[str]) -> None:
    args = [part.replace("{tmp}", str(root)) for part in command]
    result = CliRunner().invoke(cli, [*args, "--dir", str(root)])
    assert result.exit_code in (0, 3), result.output  # doctor: 3 is "not judged", not usage
    [baseline] = _ids_named(root, "baseline")
    if command[0] == "report":
        assert (root / "r.html").is_file()
    elif command[0] == "samples":
        assert "rollouts: 1 steps (4)" in result.output
    else:
        assert baseline in result.output, result.output


@pytest.mark.parametrize("command", [["show"], ["doctor"], ["samples"], ["report", "-o", "x"],
                                     ["diff", "baseline"]])
def test_a_shared_name_lists_the_candidates(root: Path, command: list[str]) -> None:
    ids = sorted(p.name for p in (root / "names").iterdir())
    twins = [i for i in ids if i not in _ids_named(root, "baseline")]
    result = CliRunner().invoke(cli, [*command, "twin", "--dir", str(root)])
    assert result.exit_code == 2, result.output
    assert "ambiguous" in result.output and "2 runs are named so" in result.output
    assert all(f"names/{i}" in result.output for i in twins), result.output


def _ids_named(root: Path, name: str) -> list[str]:
    from trackmux.core.spool.runs import run_named

    found = run_named(name, root)
    return [] if found is None else [found.name]
