"""``trackmux report RUN [RUN...] -o report.html``: one self-contained HTML page with the
runs' charts (overlaid), tables, images, config and delivery state."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("runs", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("report.html"), show_default=True, help="The HTML file to write.")
@click.option("--dir", "root", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Spool root to find run ids in (default: TRACKMUX_DIR, else ./trackmux).")
@click.option("--title", default=None, help="Page title (default: the run names).")
@click.option("--interactive", is_flag=True,
              help="Write the frozen export of `trackmux ui` instead: the UI's data and "
                   "drawing scripts in one file (zoom, hover; needs the extra 'ui').")
def report(runs: tuple[str, ...], output: Path, root: Path | None, title: str | None,
           interactive: bool) -> None:
    """Write an HTML report of RUNS (run directories, run ids or PROJECT/RUN_ID).

    Several runs are overlaid on the same charts. The file needs no server and no network.
    """
    from trackmux.report import RunNotFound, build_report

    try:
        if interactive:
            from trackmux.report.load import resolve_run
            from trackmux.ui.export import export_html

            path = export_html([resolve_run(r, root) for r in runs], output, title)
        else:
            path = build_report(list(runs), output, root=root, title=title)
    except RunNotFound as exc:
        raise click.BadParameter(str(exc), param_hint="RUN") from exc
    click.echo(f"report written to {path}")
    click.echo(f"open it: {path.as_uri()}")
