"""A run ended by the trainer's exit status (issue 33.11): ``sys.exit(3)`` is ``failed``, as
an exception is; ``sys.exit(0)`` and a normal end are ``finished``. Real interpreters, since
what is checked is what Python does at exit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import trackmux
from trackmux.core.spool.reader import SpoolReader

PRELUDE = """
import sys, trackmux
root = sys.argv[1]
"""

BODIES = {
    "exit3": "run = trackmux.init(project='x', backends=[], dir=root)\nsys.exit(3)",
    "exit0": "run = trackmux.init(project='x', backends=[], dir=root)\nsys.exit(0)",
    "exit-message": "run = trackmux.init(project='x', backends=[], dir=root)\nsys.exit('bad')",
    "normal": "run = trackmux.init(project='x', backends=[], dir=root)",
    "exception": "run = trackmux.init(project='x', backends=[], dir=root)\nraise ValueError",
    "with-exit0": "with trackmux.init(project='x', backends=[], dir=root):\n    sys.exit(0)",
    "with-raise4": ("with trackmux.init(project='x', backends=[], dir=root):\n"
                    "    raise SystemExit(4)"),
    "caught-then-exit0": ("run = trackmux.init(project='x', backends=[], dir=root)\n"
                          "try:\n    sys.exit(5)\nexcept SystemExit:\n    pass\nsys.exit(0)"),
}
EXPECTED = {"exit3": ("failed", 3), "exit0": ("finished", 0), "exit-message": ("failed", 1),
            "normal": ("finished", 0), "exception": ("failed", 1),
            "with-exit0": ("finished", 0), "with-raise4": ("failed", 4),
            "caught-then-exit0": ("finished", 0)}


@pytest.mark.parametrize("case", sorted(BODIES))
def test_the_exit_status_decides_finished_or_failed(tmp_path: Path, case: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(trackmux.__file__).parents[1])}
    env.pop("RANK", None)
    done = subprocess.run([sys.executable, "-c", PRELUDE + BODIES[case], str(tmp_path)],
                          env=env, capture_output=True, timeout=120)
    state, code = EXPECTED[case]
    assert done.returncode == code, done.stderr.decode()
    [run_dir] = [p.parent for p in tmp_path.rglob("spool.db")]
    reader = SpoolReader(run_dir)
    try:
        meta = reader.meta()
    finally:
        reader.close()
    assert (meta["state"], meta["exit_code"]) == (state, code), done.stderr.decode()
