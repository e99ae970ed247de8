"""``trackmux ui [DIR...]``: serve a live dashboard of every run under the folders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from trackmux.cli.output import echo
from trackmux.core import settings


@click.command()
@click.argument("directories", nargs=-1)
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
def ui(directories: tuple[str, ...], host: str, port: int, use_token: bool,
       cache_mb: int) -> None:
    """Open a live dashboard of the runs under DIRECTORIES (default: $TRACKMUX_DIR or
    ./trackmux), or of a team store (postgresql://...: serve it with a read-only role).
    Read-only: it never writes to or slows a run."""
    try:
        from trackmux.ui.app import Server
    except ImportError as exc:
        raise click.ClickException(
            "trackmux ui needs the extra 'ui' (in the trackmux checkout: "
            f"pip install -e '.[ui]'): {exc}") from None
    from trackmux.cli.store import StoreUnreachableError
    from trackmux.core.spool.runs import find_runs
    from trackmux.readers import is_store_uri
    from trackmux.store.connect import malformed

    for bad in filter(None, (malformed(d) for d in directories)):  # not a folder name
        raise StoreUnreachableError(bad)
    mirrors = [_mirror(d) for d in directories if is_store_uri(d)]
    roots = [settings.spool_root(d) for d in directories if not is_store_uri(d)]
    roots += [m.root for m in mirrors]
    roots = roots or [settings.spool_root(None)]
    for root in roots:
        if not root.is_dir():
            raise click.BadParameter(f"no directory {root}", param_hint="DIR")
    from trackmux.ui.security import new_token

    server = Server(roots, host=host, port=port, budget_mb=cache_mb,
                    token=new_token() if use_token else None,
                    boards=[m.dsn for m in mirrors])
    for mirror in mirrors:  # copying steps aside while a request is served
        mirror.step_aside = server.store.step_aside
    try:  # the URL is printed once it accepts connections: a request right after it works
        server.start()
    except RuntimeError as exc:
        raise click.ClickException(f"{exc} (is the port taken? --port 0 picks a free "
                                   "one)") from None
    echo(f"trackmux ui: serving {', '.join(str(r) for r in roots)}")
    if not mirrors and not any(find_runs(root) for root in roots):
        echo(empty_hint(roots))
    echo(f"open {server.url}")
    if mirrors:
        board = server.url.replace("/?", "/board?") if server.token else server.url + "board"
        echo(f"the team's goals: {board}")
    if server.token:
        echo("(the URL carries the access token; opening it trades it for a cookie "
                   "and drops it from the address bar)")
    try:
        assert server.thread is not None
        while server.thread.is_alive():
            server.thread.join(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        for mirror in mirrors:
            mirror.stop()


def empty_hint(roots: list[Path]) -> str:
    """What to do when the served folders hold no run yet (the page says it too)."""
    where = str(roots[0]) if len(roots) == 1 else ", ".join(str(r) for r in roots)
    return (f"no runs under {where} yet: log one with trackmux.init(project=..., "
            f"dir={str(roots[0])!r}) (or TRACKMUX_DIR={roots[0]}), or try `trackmux demo "
            f"--dir {roots[0]}`; the page shows runs as they appear")


def _mirror(dsn: str) -> Any:
    """A started mirror of the store (trackmux/ui/mirror.py); a store that cannot be
    reached or used is one line and exit status 3, as for every command (cli/store.py)."""
    from trackmux.cli.store import reach_or_fail
    from trackmux.store.connect import hide_password
    from trackmux.ui.mirror import StoreMirror

    reach_or_fail(dsn).close()
    try:
        mirror = StoreMirror(dsn).start(wait=False)  # runs appear as they are copied
    except Exception as exc:  # went away since: the same line
        reach_or_fail(dsn).close()
        raise click.ClickException(f"cannot read the store {hide_password(dsn)}: "
                                   f"{type(exc).__name__}: {exc}") from None
    click.echo(f"trackmux ui: team store {hide_password(dsn)} (replicas in {mirror.root})")
    return mirror
