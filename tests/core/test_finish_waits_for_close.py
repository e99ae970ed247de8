"""``finish()`` returns after every backend closed and, in process mode, after the
delivery process exited.

A backend writes its last bytes at close: wandb its exit record, mlflow the run's end
status, the file backend removes its empty side files. The delivery process reports an
event as delivered before it closes the backend, so a ``finish()`` that stops waiting at the
last acknowledgement returns while the backend is still closing (seen in CI: the file
backend's empty side files still there right after ``finish()``; then the delivery
process's spool connection closing, and SQLite removing ``spool.db-wal``, while a test
read the run's files).

The backend here is a real third-party plugin (entry point in a dist-info folder on
PYTHONPATH), so the delivery process builds it as it builds any plugin.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CLOSE_SECONDS = 1.5

PLUGIN = f'''
import time
from pathlib import Path

from trackmux.core.backends.contract import Backend
from trackmux.hookspecs import hookimpl


class SlowCloseBackend(Backend):
    """Takes {CLOSE_SECONDS} s to close, then leaves a marker: the close really ran."""

    capabilities = frozenset({{"metrics"}})

    def open(self, run, resume):
        self.marker = Path(self.options["marker"])

    def write(self, events):
        pass

    def close(self, status):
        time.sleep({CLOSE_SECONDS})
        self.marker.write_text(status)


@hookimpl
def trackmux_register_backends(register):
    register("slowclose", SlowCloseBackend)
'''


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A distribution with a ``trackmux`` entry point, as pip would leave it."""
    site = tmp_path / "site"
    info = site / "slowclose_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "slowclose_plugin.py").write_text(PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: slowclose-plugin\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text("[trackmux]\nslowclose = slowclose_plugin\n")
    return site


@pytest.mark.parametrize("delivery", ["process", "thread"])
def test_finish_returns_after_the_backend_closed(site: Path, tmp_path: Path,
                                                 delivery: str) -> None:
    marker = tmp_path / "closed"
    code = textwrap.dedent(f"""
        import trackmux
        run = trackmux.init(project="p", backends=["slowclose"], dir={str(tmp_path / "spool")!r},
                            delivery={delivery!r},
                            backend_options={{"slowclose": {{"marker": {str(marker)!r}}}}})
        for step in range(20):
            run.log({{"loss": step / 10}}, step=step)
        pid = run.delivery_pid
        summary = run.finish(timeout=60)
        import os, pathlib
        try:
            os.kill(pid or os.getpid() + 10**6, 0)
            gone = False
        except ProcessLookupError:
            gone = True
        print(summary.complete, pid is not None, gone,
              pathlib.Path({str(marker)!r}).read_text())
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(site)}, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    # when finish() returned, the marker was there and the delivery process (if any) had
    # exited and been reaped: nothing of trackmux touches the run's files any more
    assert done.stdout.split() == ["True", str(delivery == "process"), "True", "finished"]
