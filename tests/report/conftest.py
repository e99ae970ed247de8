"""Fixtures for the demo and report tests: one real demo run shared by the session."""

from __future__ import annotations

import os
import time

# The demo's matrices are tiny; BLAS threads only contend for the 2 cores. This must be
# set before numpy is first imported to take effect.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
from click.testing import CliRunner
from report_support import DemoRun

from trackmux.cli.main import cli


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """``trackmux demo`` as a user runs it: default steps, backends (console and file) and
    report; only the spool root is a temporary directory."""
    root = tmp_path_factory.mktemp("demo-root")
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["demo", "--dir", str(root)])
    seconds = time.monotonic() - started
    assert result.exit_code == 0, result.output + repr(result.exception)
    run_dirs = [p.parent for p in root.glob("*/*/spool.db")]
    assert len(run_dirs) == 1, run_dirs
    return DemoRun(root, run_dirs[0], result.output, seconds)
