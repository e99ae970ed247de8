"""What every command prints goes through :func:`echo`: ``click.echo`` with logged text
made inert (control characters, escape sequences and bidi overrides shown as escapes,
core/terminal.py), so a model's output cannot drive the reader's terminal."""

from __future__ import annotations

from typing import Any

import click

from trackmux.core.terminal import for_terminal


def echo(message: Any = None, err: bool = False, nl: bool = True) -> None:
    """``click.echo`` of ``message`` (text, or anything ``str()`` prints) made inert."""
    click.echo(None if message is None else for_terminal(str(message)), err=err, nl=nl)
