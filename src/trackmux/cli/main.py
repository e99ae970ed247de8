"""The ``trackmux`` command. Each subcommand lives in its own module, imported on use."""

from __future__ import annotations

import importlib
import logging
from typing import Any

import click

# name -> "module:attribute"; modules are imported only when their command runs.
COMMANDS = {
    "plugins": "trackmux.cli.plugins:plugins",
    "runs": "trackmux.cli.runs:runs",
    "show": "trackmux.cli.show:show",
    "sync": "trackmux.cli.sync:sync",
    "demo": "trackmux.cli.demo:demo",
    "report": "trackmux.cli.report:report",
    "ui": "trackmux.cli.ui:ui",
    "diff": "trackmux.cli.diff:diff",
    "doctor": "trackmux.cli.doctor:doctor",
    "samples": "trackmux.cli.samples:samples",
    "sweep": "trackmux.cli.sweep:sweep",
    "agent": "trackmux.cli.agent:agent",
    "goals": "trackmux.cli.goals:goals",
    "store": "trackmux.cli.store:store",
    "import": "trackmux.cli.import_:import_",
}


#: commands that read runs and take ``--store URI`` (trackmux/readers/): added here so each
#: command module stays as it is; ``runs`` and ``ui`` take it themselves
STORE_READERS = ("show", "doctor", "samples", "diff", "report")


def _select_store(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """Checks the store once (a bad DSN is a usage error) and selects it for resolve_run
    for this command only: a process that runs the CLI in-process (a test, a notebook)
    and then reads runs itself must not keep reading a store it no longer names."""
    from trackmux.cli.store import check_store, reach_or_fail
    from trackmux.readers import is_store_uri, select_store

    if value and is_store_uri(value):
        reach_or_fail(value).close()  # one line and exit status 3 when it cannot
    elif value:
        check_store(value)  # a mistyped DSN, a folder that is not there
    select_store(value)
    if value:
        ctx.call_on_close(lambda: select_store(None))


def store_option() -> click.Option:
    return click.Option(["--store"], envvar="TRACKMUX_STORE", expose_value=False,
                        is_eager=True, callback=_select_store, metavar="URI",
                        help="Read runs from this store: a postgresql:// DSN (the team "
                             "store) or a spool folder (default: TRACKMUX_STORE).")


class LazyGroup(click.Group):
    """A click group whose built-in commands load lazily and whose plugins can add more."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *super().list_commands(ctx)})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return super().get_command(ctx, name)
        module, _, attribute = target.partition(":")
        command: Any = getattr(importlib.import_module(module), attribute)
        if name in STORE_READERS and not any(p.name == "store" for p in command.params):
            command.params.append(store_option())
        return command  # type: ignore[no-any-return]


@click.group(cls=LazyGroup)
@click.version_option(package_name="trackmux")
@click.option("-v", "--verbose", is_flag=True, help="Show trackmux's INFO log lines.")
def cli(verbose: bool) -> None:
    """trackmux: one tracking layer between training loops and every tracker."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(message)s")


def _add_plugin_commands() -> None:
    from trackmux.core.backends.registry import get_registry

    get_registry().manager.hook.trackmux_register_commands(cli=cli)


def main() -> None:
    _add_plugin_commands()
    cli()
