"""``trackmux demo`` prints its ``[provenance]`` line above the step lines, not among them
(issue 43 item 13): the demo lets the run's provenance reach the spool before its first
step, and the console prints in spool order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_the_provenance_line_comes_before_the_steps(tmp_path: Path) -> None:
    env = {**os.environ, "TRACKMUX_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("TRACKMUX_PROVENANCE", None)
    done = subprocess.run([sys.executable, "-m", "trackmux", "demo", "--steps", "40",
                           "--no-report", "--backends", "", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    provenance = [i for i, line in enumerate(lines) if line.startswith("[provenance]")]
    steps = [i for i, line in enumerate(lines) if line.startswith("step:")]
    assert len(provenance) == 1 and steps, done.stdout
    assert provenance[0] < steps[0], done.stdout
