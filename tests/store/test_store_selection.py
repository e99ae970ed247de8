"""``--store`` selects the store for one command: after it, a run is resolved as before
(in-process CLI calls, then the library's own reads, e.g. ``build_report``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner


def test_the_store_a_command_selected_is_forgotten_after_it(dsn: str, tmp_path: Path) -> None:
    import trackmux
    from trackmux.cli.main import cli
    from trackmux.core.spool.runs import resolve_run
    from trackmux.readers import selected_store

    run: Any = trackmux.init("p", "local", backends=[], dir=tmp_path)
    run.log({"loss": 1.0}, step=0)
    run.finish(timeout=30)
    result = CliRunner().invoke(cli, ["show", "no-such-run", "--store", dsn])
    assert result.exit_code != 0  # the store has no such run: it was read
    assert selected_store() is None
    assert resolve_run(str(run.dir)) == run.dir  # not looked up in the store
