"""Plugin discovery: entry points of group ``trackmux``, loaded through pluggy, isolated.

Built-in backends are registered through trackmux's own entry points exactly like a
third party's. Loading one plugin can never break the others: a plugin that fails to
import or to register is recorded (entry point, distribution, version, exception) and
reported once per process.

Two providers of one name (a third party's entry point or backend called like a built-in)
are both kept, never dropped: the third party's serves the name by default (it was
installed on purpose), ``trackmux plugins`` lists both and says which serves, and the
backend option ``provider`` or ``TRACKMUX_BACKEND_PROVIDERS=name=provider,...`` picks the
other (a provider is named by its distribution, e.g. ``trackmux``, or its plugin name).

Environment:
- ``TRACKMUX_DISABLE_PLUGIN_AUTOLOAD=1``: load only trackmux's own entry points.
- ``TRACKMUX_PLUGINS=a,b``: of the third-party entry points, load only these names.
- ``TRACKMUX_BACKEND_PROVIDERS=mlflow=trackmux``: which provider serves a shared name.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import pluggy

from trackmux import hookspecs
from trackmux.core import settings
from trackmux.core.errors import PermanentBackendError, UnknownBackendError

log = logging.getLogger("trackmux")

ENTRY_POINT_GROUP = "trackmux"
OWN_DISTRIBUTION = "trackmux"


@dataclass(frozen=True)
class BackendSpec:
    """One registered backend and where it came from."""

    name: str
    factory: hookspecs.BackendFactory
    plugin: str
    distribution: str
    version: str
    requires: tuple[str, ...] = ()
    extra: str | None = None
    description: str = ""
    in_trainer: bool = False
    from_entry_point: bool = False

    @property
    def portable(self) -> bool:
        """Can a fresh interpreter (the delivery process) build this backend? Only plugins
        found through entry points are found there too; an object registered at run time
        with ``register_plugin`` exists only in this process."""
        return self.from_entry_point and not self.in_trainer

    def missing_modules(self) -> list[str]:
        """Required modules that cannot be found (checked without importing them)."""
        missing = []
        for module in self.requires:
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                missing.append(module)
        return missing

    def install_hint(self) -> str:
        """What to install. For a built-in backend, the library itself (trackmux is
        installed from a checkout, not the index, so ``pip install 'trackmux[extra]'`` would
        not find it) and the extra that pins it; for a third party's backend, the plugin's
        own distribution (with its extra)."""
        own = self.distribution in ("", OWN_DISTRIBUTION)
        if not own:
            target = f"{self.distribution}[{self.extra}]" if self.extra else self.distribution
            return f"pip install '{target}'"
        hint = f"pip install {' '.join(self.requires)}" if self.requires else "pip install"
        return hint + (f" (or, in the trackmux checkout, pip install -e '.[{self.extra}]')"
                       if self.extra else "")

    @property
    def builtin(self) -> bool:
        return self.distribution == OWN_DISTRIBUTION

    def provided_by(self, provider: str) -> bool:
        """Does ``provider`` (a distribution or plugin name) name this spec?"""
        wanted = provider.strip().lower().replace("_", "-")
        return wanted in {self.distribution.lower().replace("_", "-"),
                          self.plugin.lower().replace("_", "-")} or (
            self.builtin and wanted in ("builtin", "built-in"))

    def check_options(self, options: Mapping[str, Any]) -> None:
        """Build the backend once and drop it: constructors validate their options and do
        no I/O, so a bad option is a ValueError naming the backend here, at ``init()`` or
        at the start of ``trackmux sync``, not a failure the delivery would retry."""
        try:
            self.factory(dict(options))
        except (ValueError, TypeError, PermanentBackendError) as exc:
            raise ValueError(f"backend_options[{self.name!r}]: {exc}") from exc


@dataclass(frozen=True)
class PluginInfo:
    """A loaded (or failed) plugin, as ``trackmux plugins`` shows it."""

    name: str
    distribution: str
    version: str
    backends: tuple[str, ...] = ()
    error: str | None = None


@dataclass
class Registry:
    """The plugin manager plus what each plugin registered."""

    manager: pluggy.PluginManager
    #: the spec that serves each name by default (a third party's over a built-in)
    backends: dict[str, BackendSpec] = field(default_factory=dict)
    plugins: list[PluginInfo] = field(default_factory=list)
    #: every provider of each name, in load order (more than one: a shared name)
    candidates: dict[str, list[BackendSpec]] = field(default_factory=dict)

    def serving(self, name: str, provider: str | None = None) -> BackendSpec | None:
        """The spec that serves ``name``: the one ``provider`` names (the backend option),
        else the one ``TRACKMUX_BACKEND_PROVIDERS`` names, else the default."""
        choices = self.candidates.get(name) or []
        if provider is None:
            provider = settings.backend_providers().get(name)
        if provider is None or not choices:
            return self.backends.get(name)
        for spec in choices:
            if spec.provided_by(provider):
                return spec
        offered = ", ".join(f"{s.distribution or s.plugin}" for s in choices)
        raise UnknownBackendError(f"backend {name!r} has no provider {provider!r}; "
                                  f"installed providers: {offered}")

    def backend(self, name: str, options: Mapping[str, Any] | None = None) -> BackendSpec:
        """The spec for ``name`` (the provider the option ``provider`` or the settings
        pick), or an error listing what is installed and what to install."""
        provider = (options or {}).get("provider")
        if provider is not None and not isinstance(provider, str):
            raise ValueError(f"backend_options[{name!r}]['provider'] must be a str, got "
                             f"{type(provider).__name__}")
        spec = self.serving(name, provider)
        if spec is None:
            installed = ", ".join(sorted(self.backends)) or "none"
            hint = KNOWN_EXTRAS.get(name)
            advice = (f"; install its library with pip install {hint} (or, in the trackmux "
                      f"checkout, pip install -e '.[{hint}]')" if hint else "")
            raise UnknownBackendError(
                f"unknown backend {name!r}{advice}. Installed backends: {installed}"
            )
        missing = spec.missing_modules()
        if missing:
            usable = sorted(n for n, other in self.backends.items()
                            if n != name and not other.missing_modules())
            raise UnknownBackendError(
                f"backend {name!r} is registered, but the library it needs "
                f"({', '.join(missing)}) is not installed: {spec.install_hint()}. "
                f"Backends ready to use: {', '.join(usable) or 'none'}"
            )
        return spec

    def register_plugin(self, plugin: object, name: str, distribution: str = "",
                        version: str = "", *, from_entry_point: bool = False) -> None:
        """Register a plugin object (module or instance) and collect its backends."""
        collected: list[BackendSpec] = []

        def register(
            backend_name: str,
            factory: hookspecs.BackendFactory,
            *,
            requires: tuple[str, ...] = (),
            extra: str | None = None,
            description: str = "",
            in_trainer: bool = False,
        ) -> None:
            if not isinstance(backend_name, str) or not backend_name:
                raise ValueError(f"backend name must be a non-empty str, got {backend_name!r}")
            collected.append(BackendSpec(backend_name, factory, name, distribution, version,
                                         tuple(requires), extra, description,
                                         bool(in_trainer), from_entry_point))

        try:
            self.manager.register(plugin, name=name)
            impls = self.manager.hook.trackmux_register_backends.get_hookimpls()
            for impl in impls:
                if impl.plugin is plugin:
                    impl.function(register=register)
        except Exception as exc:  # a broken plugin must not break the others
            if self.manager.is_registered(plugin):
                self.manager.unregister(plugin)
            self._failed(name, distribution, version, exc)
            return
        for spec in collected:
            choices = self.candidates.setdefault(spec.name, [])
            choices.append(spec)
            current = self.backends.get(spec.name)
            if current is None or (current.builtin and not spec.builtin):
                self.backends[spec.name] = spec
            if len(choices) > 1:
                served = self.backends[spec.name]
                others = [c for c in choices if c is not served]
                log.warning("trackmux: backend %r is provided by %s; %s serves it (choose "
                            "with the backend option provider or TRACKMUX_BACKEND_PROVIDERS="
                            "%s=<provider>; trackmux plugins lists them)", spec.name,
                            " and ".join(_who(c) for c in [served, *others]), _who(served),
                            spec.name)
        self.plugins.append(PluginInfo(name, distribution, version,
                                       tuple(s.name for s in collected)))

    def _failed(self, name: str, distribution: str, version: str, exc: BaseException) -> None:
        error = f"{type(exc).__name__}: {exc}"
        self.plugins.append(PluginInfo(name, distribution, version, (), error))
        log.warning("trackmux: plugin %r (%s %s) failed to load and is skipped: %s",
                    name, distribution or "?", version or "?", error)


def _who(spec: BackendSpec) -> str:
    return (f"{spec.distribution} (plugin {spec.plugin!r})" if spec.distribution
            else f"plugin {spec.plugin!r}")


# Extras that provide well-known backends, for the "unknown backend" message.
KNOWN_EXTRAS = {"wandb": "wandb", "mlflow": "mlflow", "swanlab": "swanlab",
                "tensorboard": "tensorboard", "trackio": "trackio", "clearml": "clearml",
                "vemlp_wandb": "wandb", "postgres": "postgres"}

_registry: Registry | None = None
_lock = threading.Lock()


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _selected(ep: EntryPoint) -> bool:
    dist = ep.dist.name if ep.dist is not None else ""
    if dist == OWN_DISTRIBUTION:
        return True
    if _env_flag("TRACKMUX_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    allow = os.environ.get("TRACKMUX_PLUGINS")
    if allow is not None:
        return ep.name in {n.strip() for n in allow.split(",") if n.strip()}
    return True


def load_registry() -> Registry:
    """Build the registry from installed entry points (once per process)."""
    manager = pluggy.PluginManager("trackmux")
    manager.add_hookspecs(hookspecs)
    registry = Registry(manager)
    eps = sorted(entry_points(group=ENTRY_POINT_GROUP),
                 key=lambda ep: (ep.dist is None or ep.dist.name != OWN_DISTRIBUTION, ep.name))
    seen: set[tuple[str, str]] = set()
    names: set[str] = set()
    for ep in eps:
        dist = ep.dist.name if ep.dist is not None else ""
        if (ep.name, dist) in seen or not _selected(ep):
            continue  # the same distribution seen twice on sys.path: one copy is enough
        seen.add((ep.name, dist))
        # a second entry point of the same name (another distribution) is kept too,
        # under a plugin name that says whose it is
        name = f"{ep.name}@{dist}" if ep.name in names else ep.name
        names.add(ep.name)
        version = ep.dist.version if ep.dist is not None else ""
        try:
            plugin: Any = ep.load()
        except Exception as exc:
            registry._failed(name, dist, version, exc)
            continue
        registry.register_plugin(plugin, name, dist, version, from_entry_point=True)
    return registry


def get_registry() -> Registry:
    """The process-wide registry, loaded on first use."""
    global _registry
    with _lock:
        if _registry is None:
            _registry = load_registry()
        return _registry


def register_plugin(plugin: object, name: str | None = None) -> None:
    """Register a plugin object without an entry point (tests, notebooks, frameworks)."""
    get_registry().register_plugin(plugin, name or str(getattr(plugin, "__name__", repr(plugin))))


def reset_registry() -> None:
    """Forget loaded plugins; the next use loads entry points again (for tests)."""
    global _registry
    with _lock:
        _registry = None
