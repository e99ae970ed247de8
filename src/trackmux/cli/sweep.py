"""``trackmux sweep create SWEEP.yaml`` and ``trackmux sweep show SWEEP_ID`` (docs/sweeps.md).

Needs the extra ``sweeps`` (Optuna, PyYAML): ``pip install -e '.[sweeps]'`` in the trackmux
checkout."""

from __future__ import annotations

import json
from pathlib import Path

import click

from trackmux.cli.output import echo

STORAGE_HELP = ("Optuna storage: sqlite:///file.db or postgresql://user:pass@host/db "
                "(default: $TRACKMUX_SWEEP_STORAGE, else ROOT/.sweeps/sweeps.db).")


def _fail(exc: Exception) -> click.ClickException:
    return click.ClickException(str(exc).strip("'\""))


@click.group()
def sweep() -> None:
    """Create and inspect sweeps (run them with `trackmux agent SWEEP_ID`)."""


@sweep.command()
@click.argument("sweep_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--storage", default=None, help=STORAGE_HELP)
@click.option("--dir", "root", default=None, type=click.Path(file_okay=False),
              help="trackmux root (default: $TRACKMUX_DIR or ./trackmux).")
def create(sweep_file: Path, storage: str | None, root: str | None) -> None:
    """Create a sweep from a wandb-format SWEEP_FILE; prints its id on the last line."""
    from trackmux.sweeps import spec as spec_mod

    try:
        text = sweep_file.read_text(encoding="utf-8")
    except OSError as exc:
        raise click.BadParameter(f"cannot read {sweep_file}: {exc}",
                                 param_hint="SWEEP_FILE") from None
    try:
        spec = spec_mod.load(text, str(sweep_file))
    except spec_mod.SweepSpecError as exc:
        raise click.ClickException(f"{sweep_file}: {exc}") from None
    except spec_mod.MissingLibrary as exc:
        raise click.ClickException(str(exc)) from None
    from trackmux.sweeps import study
    from trackmux.sweeps.storage import resolve_url, safe_url

    try:
        url = resolve_url(storage, root)
        created = study.create(spec, url)
    except (ValueError, RuntimeError) as exc:
        raise _fail(exc) from None
    echo(f"created sweep ({spec.method}, {len(spec.params)} parameters) in "
               f"{safe_url(url)}")
    storage_arg = " --storage URL (the same)" if storage else ""
    echo(f"run it with: trackmux agent {created.id}{storage_arg}")
    echo(created.id)


@sweep.command()
@click.argument("sweep_id")
@click.option("--storage", default=None, help=STORAGE_HELP)
@click.option("--dir", "root", default=None, type=click.Path(file_okay=False),
              help="trackmux root (default: $TRACKMUX_DIR or ./trackmux).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
def show(sweep_id: str, storage: str | None, root: str | None, as_json: bool) -> None:
    """Each trial (number, params, state, value, run, steps, reason) and the best one."""
    from trackmux.sweeps import show as show_mod
    from trackmux.sweeps import study
    from trackmux.sweeps.storage import resolve_url

    try:
        loaded = study.load(sweep_id, resolve_url(storage, root))
    except (KeyError, ValueError, RuntimeError) as exc:
        raise _fail(exc) from None
    data = show_mod.summary(loaded)
    if as_json:
        echo(json.dumps(data, default=str))
        return
    for line in show_mod.text(data):
        echo(line)
