"""``trackmux report``: one self-contained HTML file from one or more runs' spools.

By default the file is the frozen export of ``trackmux ui`` (trackmux/ui/export.py): the
UI's own payloads and drawing scripts, so the report and the live page never disagree.
``static=True`` (``--static``) writes the script-free SVG page instead (report/page.py),
for viewers that run no JavaScript and installs without numpy.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from trackmux.report.load import RunData, RunNotFound, load_run, load_runs, resolve_run
from trackmux.report.page import render

__all__ = ["MissingDependency", "RunData", "RunNotFound", "build_report", "load_run",
           "load_runs", "render", "resolve_run"]


class MissingDependency(RuntimeError):
    """The interactive report needs numpy (the extra ``ui`` or ``demo`` brings it)."""


def build_report(runs: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str],
                 *, root: str | os.PathLike[str] | None = None, title: str | None = None,
                 static: bool = False) -> Path:
    """Write the report for ``runs`` (directories or run ids) to ``output``; return its path."""
    if not runs:
        raise ValueError("a report needs at least one run")
    if not static:
        dirs = [resolve_run(str(r), root) for r in runs]
        try:
            from trackmux.ui.export import export_html
        except ImportError as exc:
            raise MissingDependency(
                f"the report needs numpy ({exc}): pip install -e '.[ui]' in the trackmux "
                "checkout, or pass "
                "--static for the script-free page") from exc
        return export_html(dirs, output, title)
    data = load_runs([str(r) for r in runs], root)
    path = Path(output).expanduser().absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render(data, title), encoding="utf-8")
    os.replace(tmp, path)
    return path
