"""``trackmux plugins``: every plugin, its distribution and version, its backends, and
whether each backend's library can be imported."""

from __future__ import annotations

import click

from trackmux.core.backends.registry import get_registry


@click.command()
def plugins() -> None:
    """List installed plugins and the backends they provide."""
    registry = get_registry()
    for info in registry.plugins:
        where = f"{info.distribution or '?'} {info.version or ''}".strip()
        if info.error:
            click.echo(f"{info.name} ({where}): FAILED TO LOAD: {info.error}")
            continue
        click.echo(f"{info.name} ({where})")
        for name in info.backends:
            spec = registry.backends.get(name)
            if spec is None or spec.plugin != info.name:
                continue
            missing = spec.missing_modules()
            state = (f"library not installed ({', '.join(missing)}): {spec.install_hint()}"
                     if missing else "ready")
            description = f" - {spec.description}" if spec.description else ""
            click.echo(f"  backend {name}: {state}{description}")
