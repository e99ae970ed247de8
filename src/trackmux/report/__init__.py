"""``trackmux report``: one self-contained HTML file from one or more runs' spools."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from trackmux.report.load import RunData, RunNotFound, load_run, load_runs, resolve_run
from trackmux.report.page import render
from trackmux.report.table_pages import write_table_pages

__all__ = ["RunData", "RunNotFound", "build_report", "load_run", "load_runs", "render",
           "resolve_run"]


def build_report(runs: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str],
                 *, root: str | os.PathLike[str] | None = None, title: str | None = None
                 ) -> Path:
    """Write the report for ``runs`` (directories or run ids) to ``output``; return its path."""
    data = load_runs([str(r) for r in runs], root)
    path = Path(output).expanduser().absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pages = write_table_pages(data, path)
    tmp.write_text(render(data, title, pages), encoding="utf-8")
    os.replace(tmp, path)
    return path
