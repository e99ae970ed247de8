"""A trial's run joins its sweep by itself: ``trackmux agent`` sets these variables for the
program it starts, and every ``trackmux.init`` in that program reads them.

``TRACKMUX_SWEEP_ID``       the sweep (tag ``sweep:<id>``)
``TRACKMUX_SWEEP_TRIAL``    the trial number (tag ``trial:<n>``)
``TRACKMUX_SWEEP_PARAMS``   the trial's parameters as JSON
``TRACKMUX_SWEEP_CLAIM``    a file the first run of the trial creates with its id and folder,
                            so the agent follows that run's spool (read-only)
``TRACKMUX_RUN_NAME``       the run's name when the program passes none (:func:`trial_name`:
                            ``trial-5 lr=0.00693 kl_coef=0.05``, or the sweep's ``run_name``
                            template), so a list of runs says which trial each one is

The config gets ``sweep: {id, trial, params}`` (``trackmux_sweep`` if the program's own
config already has a ``sweep`` key), so every backend shows the sweep and the trial
beside the run's own hyperparameters. Imported by ``import trackmux``: standard library
only, no Optuna.
"""

from __future__ import annotations

import json
import logging
import os
import re
from typing import Any

from trackmux.core.lifecycle.run import Run, on_run_init, on_run_start

log = logging.getLogger("trackmux")

SWEEP_ID = "TRACKMUX_SWEEP_ID"
TRIAL = "TRACKMUX_SWEEP_TRIAL"
PARAMS = "TRACKMUX_SWEEP_PARAMS"
CLAIM = "TRACKMUX_SWEEP_CLAIM"
RUN_NAME = "TRACKMUX_RUN_NAME"
#: a trial's run name stays short enough for a list (the parameters are in its config)
MAX_TRIAL_NAME = 120


_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")


def placeholders(template: str) -> list[str]:
    """The names a ``run_name`` template asks for (``${trial}``, ``${lr}``)."""
    return _PLACEHOLDER.findall(template)


def trial_name(number: int, params: dict[str, Any], template: str | None = None) -> str:
    """``trial-5 lr=0.00693 kl_coef=0.05``: the trial and its parameters, numbers to three
    significant digits (the config keeps them exact), cut at ``MAX_TRIAL_NAME``. With the
    sweep's ``run_name`` template, ``${trial}`` and ``${<parameter>}`` filled in instead."""
    def short(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.3g}"
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))

    if template:
        values = {"trial": str(number), **{k: short(v) for k, v in params.items()}}
        name = _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)
    else:
        name = " ".join([f"trial-{number}", *(f"{k}={short(v)}" for k, v in params.items())])
    return name if len(name) <= MAX_TRIAL_NAME else name[:MAX_TRIAL_NAME - 1] + "…"


def _trial() -> dict[str, Any] | None:
    sweep = os.environ.get(SWEEP_ID)
    if not sweep:
        return None
    out: dict[str, Any] = {"id": sweep}
    trial = os.environ.get(TRIAL, "")
    if trial.isdigit():
        out["trial"] = int(trial)
    try:
        params = json.loads(os.environ.get(PARAMS) or "{}")
    except ValueError:
        log.warning("trackmux: %s is not JSON; the run records no sweep parameters", PARAMS)
        params = {}
    out["params"] = params if isinstance(params, dict) else {}
    return out


def add_sweep(tags: list[str], config: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``init()`` hook: the sweep's tags and config entry, when run by an agent."""
    trial = _trial()
    if trial is None:
        return config
    for tag in (f"sweep:{trial['id']}",
                *((f"trial:{trial['trial']}",) if "trial" in trial else ())):
        if tag not in tags:
            tags.append(tag)
    out = dict(config or {})
    key = "sweep" if "sweep" not in out or out.get("sweep") == trial else "trackmux_sweep"
    out[key] = trial
    return out


def claim(run: Run) -> None:
    """The start hook: the first run of the trial tells the agent where its spool is."""
    path = os.environ.get(CLAIM)
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # an earlier run of this trial claimed it
        return
    except OSError as exc:
        log.warning("trackmux: cannot tell the sweep agent about run %s (%s)", run.id, exc)
        return
    with os.fdopen(fd, "w") as file:
        json.dump({"run_id": run.id, "run_dir": str(run.dir), "pid": os.getpid()}, file)


on_run_init(add_sweep)
on_run_start(claim)
