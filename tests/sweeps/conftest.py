"""tests/sweeps needs the extra ``sweeps`` (Optuna, PyYAML)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("optuna")
pytest.importorskip("yaml")

from sweep_support import PROGRAM


@pytest.fixture
def root(tmp_path: Path) -> Path:
    out = tmp_path / "root"
    out.mkdir()
    return out


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    return path


