"""How a command's RUN argument names a run under the spool root: a run id, a unique
prefix of one, or ``PROJECT/RUN_ID`` (what ``trackmux runs`` prints), from any working
directory. ``PROJECT/RUN_ID`` only worked when the working directory was the root."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import trackmux
from trackmux.core.spool.runs import resolve_run


def _run(root: Path, project: str, run_id: str) -> Path:
    run = trackmux.init(project=project, run_id=run_id, backends=[], dir=root)
    assert isinstance(run, trackmux.Run)
    run.log({"loss": 1.0}, step=0)
    assert run.finish(timeout=60).complete
    return run.dir


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # not the root: relative paths must not be what resolves
    base = tmp_path / "spools"
    _run(base, "alpha", "run-1")
    _run(base, "alpha", "run-10")
    _run(base, "beta", "run-2")
    return base


def test_project_slash_run_id_resolves_from_another_directory(root: Path) -> None:
    assert resolve_run("beta/run-2", root) == root / "beta" / "run-2"
    assert resolve_run("beta/run", root) == root / "beta" / "run-2"  # a unique prefix


def test_an_exact_name_wins_over_the_runs_it_is_a_prefix_of(root: Path) -> None:
    assert resolve_run("run-1", root) == root / "alpha" / "run-1"
    assert resolve_run("alpha/run-1", root) == root / "alpha" / "run-1"


def test_ambiguous_and_unknown_names_are_refused_with_the_root(root: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"ambiguous.*run-1, run-10"):
        resolve_run("alpha/run-", root)
    with pytest.raises(FileNotFoundError, match=rf"no run 'gamma/run-2'.*{re.escape(str(root))}"):
        resolve_run("gamma/run-2", root)
