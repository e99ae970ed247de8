"""Where run options come from when the caller does not pass them: environment variables.

Every variable is listed in docs/configuration.md with its default.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

DEFAULT_BACKENDS = ("console",)
DEFAULT_FINISH_TIMEOUT = 30.0
#: ``finish(timeout=math.inf)`` waits this long at most (about 115 days): "as long as it
#: takes", in a number every wait on the way accepts (an infinite one overflowed them)
MAX_FINISH_TIMEOUT = 1e7
_PROJECT_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def backends_from(value: object) -> list[str]:
    """``backends`` argument, then ``TRACKMUX_BACKENDS``, then ``["console"]``.

    A string is a comma list; "none" (or an empty list) means spool only."""
    if value is None:
        env = os.environ.get("TRACKMUX_BACKENDS")
        value = env if env is not None else list(DEFAULT_BACKENDS)
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",")]
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"backends must be a list of names or a comma string, got "
                        f"{type(value).__name__}")
    names: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise TypeError(f"backends must hold str names, got {type(item).__name__}")
        item = item.strip()
        if item and item.lower() != "none" and item not in names:
            names.append(item)
    return names


#: the default spool root, relative to the working directory
DEFAULT_ROOT = "trackmux"
#: the default when ``./trackmux`` is a source checkout (see :func:`default_root`)
CHECKOUT_ROOT = "trackmux-runs"
_checkout_said = False


def spool_root(value: str | os.PathLike[str] | None) -> Path:
    """``dir`` argument, then ``TRACKMUX_DIR``, then :func:`default_root`."""
    if value is None:
        value = os.environ.get("TRACKMUX_DIR") or default_root()
    return Path(value).expanduser().absolute()


def default_root() -> str:
    """``./trackmux``, unless that folder is a source checkout (``git clone ... trackmux``
    gives the checkout the default root's name): runs written there would land among its
    sources, from any script run in the folder above. Then ``./trackmux-runs``, said once
    per process. Writers and readers (``trackmux runs``, ``ui``, ...) agree, as both ask
    here."""
    global _checkout_said
    here = Path(DEFAULT_ROOT)
    if not ((here / ".git").exists() or (here / "pyproject.toml").exists()):
        return DEFAULT_ROOT
    if not _checkout_said:
        _checkout_said = True
        import logging

        logging.getLogger("trackmux").warning(
            "trackmux: ./%s is a source checkout (it has a .git or pyproject.toml), not a "
            "spool root; runs go to ./%s instead (set TRACKMUX_DIR or pass dir= to choose)",
            DEFAULT_ROOT, CHECKOUT_ROOT)
    return CHECKOUT_ROOT


def safe_dirname(name: str) -> str:
    """A project name usable as one directory level (no separators, no ``..``)."""
    cleaned = _PROJECT_UNSAFE.sub("_", name).strip("._")
    return cleaned[:100] or "default"


def finish_timeout(value: float | None) -> float:
    """``finish()``'s budget in seconds: ``value``, else ``TRACKMUX_FINISH_TIMEOUT``, else
    30; infinity (or anything longer) becomes ``MAX_FINISH_TIMEOUT``; NaN is refused."""
    if value is not None:
        if not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
            raise ValueError(f"timeout must be a number >= 0, got {value!r}")
        return min(float(value), MAX_FINISH_TIMEOUT)
    env = os.environ.get("TRACKMUX_FINISH_TIMEOUT")
    return min(float(env), MAX_FINISH_TIMEOUT) if env else DEFAULT_FINISH_TIMEOUT


def rank() -> int:
    """This process's rank from ``RANK`` (or ``LOCAL_RANK``); 0 when unset or unparsable."""
    for name in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(name)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value)
    return 0


def positive_int(argument: str, value: int | None, env: str, default: int) -> int:
    """``value``, else the environment variable ``env``, else ``default``; must be > 0."""
    if value is None:
        raw = os.environ.get(env)
        if not raw:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{env} must be an int, got {raw!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{argument} must be a positive int, got {value!r}")
    return value


DELIVERY_MODES = ("process", "thread")
DEFAULT_ORPHAN_TIMEOUT = 600.0


def delivery_mode(value: str | None) -> str:
    """``delivery`` argument, then ``TRACKMUX_DELIVERY``, then ``"process"``."""
    if value is None:
        value = os.environ.get("TRACKMUX_DELIVERY") or "process"
    if not isinstance(value, str) or value.strip().lower() not in DELIVERY_MODES:
        raise ValueError(f"delivery must be one of {', '.join(DELIVERY_MODES)}, got {value!r}")
    return value.strip().lower()


def orphan_timeout(value: float | None) -> float:
    """How long the delivery process keeps delivering after its trainer finished or died:
    ``orphan_timeout`` argument, then ``TRACKMUX_ORPHAN_TIMEOUT``, then 600 s."""
    if value is None:
        raw = os.environ.get("TRACKMUX_ORPHAN_TIMEOUT")
        if not raw:
            return DEFAULT_ORPHAN_TIMEOUT
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"TRACKMUX_ORPHAN_TIMEOUT must be a number, got {raw!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"orphan_timeout must be a number >= 0, got {value!r}")
    return float(value)


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def strict(value: bool | None) -> bool:
    """``strict`` argument, then ``TRACKMUX_STRICT`` (1/true/yes/on), then False: whether bad
    input raises (True) or is dropped, named once and counted (core/values/intake.py)."""
    if value is not None:
        if not isinstance(value, bool):
            raise TypeError(f"strict must be True, False or None, got {value!r}")
        return value
    raw = os.environ.get("TRACKMUX_STRICT", "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValueError(f"TRACKMUX_STRICT must be 1 or 0 (true/false), got "
                     f"{os.environ['TRACKMUX_STRICT']!r}")


def provenance(value: bool | None) -> bool:
    """Record what produced the run (issue 25): ``provenance`` argument, then
    ``TRACKMUX_PROVENANCE`` (0/false/no/off turn it off), then on."""
    if value is not None:
        if not isinstance(value, bool):
            raise TypeError(f"provenance must be True or False, got {type(value).__name__}")
        return value
    raw = os.environ.get("TRACKMUX_PROVENANCE")
    if raw is None or not raw.strip():
        return True
    flag = raw.strip().lower()
    if flag in ("1", "true", "yes", "on"):
        return True
    if flag in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"TRACKMUX_PROVENANCE must be 1/true/on or 0/false/off, got {raw!r}")


WATCH_MODES = ("gradients", "parameters", "all")


def watch_spec(raw: str | None = None) -> tuple[str, int] | None:
    """``TRACKMUX_WATCH=MODE[:EVERY]`` (gradients, parameters or all; every 100 by default):
    the verl drop-in's switch for models built in Ray workers. None when unset or "0"."""
    if raw is None:
        raw = os.environ.get("TRACKMUX_WATCH")
    if raw is None or raw.strip().lower() in ("", "0", "off", "false", "no"):
        return None
    mode, _, every = raw.strip().partition(":")
    if mode not in WATCH_MODES:
        raise ValueError(f"TRACKMUX_WATCH must be MODE[:EVERY] with MODE one of "
                         f"{', '.join(WATCH_MODES)}, got {raw!r}")
    try:
        steps = int(every) if every else 100
    except ValueError:
        raise ValueError(f"TRACKMUX_WATCH: EVERY must be an int, got {raw!r}") from None
    if steps < 1:
        raise ValueError(f"TRACKMUX_WATCH: EVERY must be >= 1, got {raw!r}")
    return mode, steps


def backend_providers(value: str | None = None) -> dict[str, str]:
    """Which provider serves a backend name two plugins provide:
    ``TRACKMUX_BACKEND_PROVIDERS="mlflow=trackmux,console=trackmux-csv"`` (a distribution
    or plugin name per backend). Unset: the third party's serves (core/backends/registry)."""
    raw = os.environ.get("TRACKMUX_BACKEND_PROVIDERS", "") if value is None else value
    out: dict[str, str] = {}
    for part in raw.split(","):
        if not part.strip():
            continue
        name, sep, provider = part.partition("=")
        if not sep or not name.strip() or not provider.strip():
            raise ValueError(f"TRACKMUX_BACKEND_PROVIDERS must be name=provider pairs "
                             f"separated by commas, got {part.strip()!r}")
        out[name.strip()] = provider.strip()
    return out


def doctor(value: object) -> object:
    """``doctor`` argument, then ``TRACKMUX_DOCTOR``, then ``True`` (the default rules).

    The variable reads ``off``/``0``/``false``, ``on``/``1``/``true``, or a path to a TOML or
    YAML rules file; trackmux/doctor/config.py checks what it names."""
    if value is not None:
        return value
    raw = (os.environ.get("TRACKMUX_DOCTOR") or "").strip()
    if not raw:
        return True
    lowered = raw.lower()
    if lowered in ("off", "0", "false", "no"):
        return False
    if lowered in ("on", "1", "true", "yes"):
        return True
    return raw


def doctor_stop_on() -> object:
    """``TRACKMUX_DOCTOR_STOP_ON`` (the doctor's stop policy when ``init(doctor=...)`` names
    none; trackmux/doctor/stop.py checks it): None when unset, False for ``off``/``0``/
    ``false``/``no``, ``"critical"``, or the list of a comma list of rule names."""
    raw = (os.environ.get("TRACKMUX_DOCTOR_STOP_ON") or "").strip()
    if not raw:
        return None
    if raw.lower() in ("off", "0", "false", "no", "none"):
        return False
    if raw.lower() == "critical":
        return "critical"
    return [part.strip() for part in raw.split(",") if part.strip()]


def postgres_dsn(value: str | None = None) -> str:
    """The ``dsn`` option of the postgres backend, then ``TRACKMUX_POSTGRES_DSN``, then ""
    (libpq then reads its own ``PG*`` variables: PGHOST, PGUSER, PGDATABASE, ...)."""
    if value is not None:
        return value
    return os.environ.get("TRACKMUX_POSTGRES_DSN", "")


def run_name(value: str | None) -> str | None:
    """``init(name=...)``, then ``TRACKMUX_RUN_NAME`` (a sweep agent names its trials' runs
    so: sweeps/agent.py), else None: the run is named by its id."""
    if value is not None:
        return value
    return os.environ.get("TRACKMUX_RUN_NAME") or None


def store_uri(value: str | None = None) -> str | None:
    """``--store`` argument, then ``TRACKMUX_STORE``: where readers read runs from (a spool
    folder or a ``postgresql://`` DSN); None: the spool folder (``TRACKMUX_DIR``)."""
    if value:
        return value
    return os.environ.get("TRACKMUX_STORE") or None


def host_name() -> str:
    """``TRACKMUX_HOST``, else the machine's host name: the host a run is recorded under
    (in the team store a run is its run id on its host). Set it where host names are
    random (containers) to keep a node's name stable."""
    import socket

    return os.environ.get("TRACKMUX_HOST") or socket.gethostname()
