"""``trackmux plugins``: every plugin, its distribution and version, its backends, and
whether each backend's library can be imported. A name two plugins provide is listed
under both, each saying whether it serves the name and how to pick the other."""

from __future__ import annotations

import click

from trackmux.cli.output import echo
from trackmux.core.backends.registry import BackendSpec, Registry, get_registry
from trackmux.core.errors import UnknownBackendError


@click.command()
def plugins() -> None:
    """List installed plugins and the backends they provide."""
    registry = get_registry()
    for info in registry.plugins:
        where = f"{info.distribution or '?'} {info.version or ''}".strip()
        if info.error:
            echo(f"{info.name} ({where}): FAILED TO LOAD: {info.error}")
            continue
        echo(f"{info.name} ({where})")
        for name in info.backends:
            specs = [s for s in registry.candidates.get(name, []) if s.plugin == info.name]
            if not specs:
                continue
            spec = specs[0]
            missing = spec.missing_modules()
            state = (f"library not installed ({', '.join(missing)}): {spec.install_hint()}"
                     if missing else "ready")
            description = f" - {spec.description}" if spec.description else ""
            echo(f"  backend {name}: {state}{description}")
            if len(registry.candidates.get(name, [])) > 1:
                echo(f"    {_serving(registry, name, spec)}")


def _serving(registry: Registry, name: str, spec: BackendSpec) -> str:
    """Whether ``spec`` serves the shared ``name``, and how to pick another provider."""
    try:
        served = registry.serving(name)
    except UnknownBackendError as exc:
        return f"shared name; {exc}"
    if served is spec:
        others = [s for s in registry.candidates[name] if s is not spec]
        pick = ", ".join(s.distribution or s.plugin for s in others)
        return (f"SERVES {name!r} (also provided by {pick}; pick another with the backend "
                f"option provider or TRACKMUX_BACKEND_PROVIDERS={name}=<provider>)")
    assert served is not None
    mine = spec.distribution or spec.plugin
    return (f"does not serve {name!r}: {served.distribution or served.plugin} does (use "
            f"this one with backend_options={{{name!r}: {{'provider': {mine!r}}}}} or "
            f"TRACKMUX_BACKEND_PROVIDERS={name}={mine})")
