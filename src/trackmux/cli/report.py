"""``trackmux report RUN [RUN...] -o report.html``: one self-contained HTML page with the
runs' findings, charts (overlaid), histograms, tables, samples, images, config,
provenance and delivery state: the frozen export of ``trackmux ui``."""

from __future__ import annotations

from pathlib import Path

import click

from trackmux.cli.output import echo


@click.command()
@click.argument("runs", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("report.html"), show_default=True, help="The HTML file to write.")
@click.option("--dir", "root", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Spool root to find run ids in (default: TRACKMUX_DIR, else ./trackmux).")
@click.option("--title", default=None, help="Page title (default: the run names).")
@click.option("--static", "static", is_flag=True,
              help="Write a page without JavaScript (SVG charts, no zoom or hover) for "
                   "viewers that run no scripts; needs no numpy.")
@click.option("--interactive", is_flag=True, hidden=True,
              help="Accepted for older scripts: the interactive page is now the default.")
def report(runs: tuple[str, ...], output: Path, root: Path | None, title: str | None,
           static: bool, interactive: bool) -> None:
    """Write an HTML report of RUNS (run directories, run ids or PROJECT/RUN_ID).

    Several runs are overlaid on the same charts. The file needs no server and no network:
    the data and the drawing scripts of `trackmux ui` are inside it.
    """
    from trackmux.core.errors import SpoolUnreadableError
    from trackmux.report import MissingDependency, RunNotFound, build_report

    if static and interactive:
        raise click.UsageError("--static and --interactive exclude each other")
    try:
        path = build_report(list(runs), output, root=root, title=title, static=static)
    except (RunNotFound, SpoolUnreadableError) as exc:
        raise click.BadParameter(str(exc), param_hint="RUN") from exc
    except MissingDependency as exc:
        raise click.UsageError(str(exc)) from exc
    echo(f"report written to {path}")
    echo(f"open it: {path.as_uri()}")
