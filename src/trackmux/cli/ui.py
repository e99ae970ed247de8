"""``trackmux ui [DIR...]``: serve a live dashboard of every run under the folders."""

from __future__ import annotations

from pathlib import Path

import click

from trackmux.cli.output import echo
from trackmux.core import settings


@click.command()
@click.argument("directories", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; any other than loopback requires a token, "
                   "printed in the URL.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="Port (0: any free port).")
@click.option("--token", "use_token", is_flag=True,
              help="Require an access token on loopback too (printed in the URL): on a "
                   "shared login node every local user can reach 127.0.0.1. Always on "
                   "for other addresses.")
@click.option("--cache-mb", default=768, show_default=True, type=click.IntRange(16, 1 << 20),
              help="Memory for cached run data; least recently viewed runs are dropped "
                   "beyond it.")
def ui(directories: tuple[Path, ...], host: str, port: int, use_token: bool,
       cache_mb: int) -> None:
    """Open a live dashboard of the runs under DIRECTORIES (default: $TRACKMUX_DIR or
    ./trackmux). Read-only: it never writes to or slows a run."""
    try:
        from trackmux.ui.app import Server
    except ImportError as exc:
        raise click.ClickException(
            "trackmux ui needs the extra 'ui' (in the trackmux checkout: "
            f"pip install -e '.[ui]'): {exc}") from None
    roots = [settings.spool_root(d) for d in directories] or [settings.spool_root(None)]
    for root in roots:
        if not root.is_dir():
            raise click.BadParameter(f"no directory {root}", param_hint="DIR")
    from trackmux.ui.security import new_token

    server = Server(roots, host=host, port=port, budget_mb=cache_mb,
                    token=new_token() if use_token else None)
    echo(f"trackmux ui: serving {', '.join(str(r) for r in roots)}")
    echo(f"open {server.url}")
    if server.token:
        echo("(the URL carries the access token; opening it trades it for a cookie "
                   "and drops it from the address bar)")
    server.start()
    try:
        assert server.thread is not None
        while server.thread.is_alive():
            server.thread.join(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
