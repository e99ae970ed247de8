"""verl's default output locations, used by the drop-in (integrations/verl.py).

Without settings trackmux keeps everything a run writes under the trackmux dir. Under
verl, existing launch scripts and dashboards expect verl's own defaults; this module
states them as backend options (made absolute, so a later ``trackmux sync`` from another
folder continues the same output). A variable verl reads, when set, decides instead.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

#: verl's mlflow store when ``MLFLOW_TRACKING_URI`` is not set
VERL_TRACKING_URI = "sqlite:////tmp/mlruns.db"


def verl_locations(backends: Sequence[str]) -> dict[str, dict[str, str]]:
    """verl's default output locations, as backend options, for the backends whose verl
    variable is not set: the file logger's root ``.``, ``tensorboard_log``, the mlflow
    store ``sqlite:////tmp/mlruns.db`` and ``swanlog``, made absolute here so that a later
    ``trackmux sync`` from another folder continues the same output."""
    cwd = Path.cwd()
    out: dict[str, dict[str, str]] = {}
    env = os.environ.get
    if "file" in backends and not (env("VERL_FILE_LOGGER_PATH") or env("VERL_FILE_LOGGER_ROOT")):
        out["file"] = {"root": str(cwd)}
    if "tensorboard" in backends and not env("TENSORBOARD_DIR"):
        out["tensorboard"] = {"root": str(cwd / "tensorboard_log")}
    if "mlflow" in backends and not env("MLFLOW_TRACKING_URI"):
        out["mlflow"] = {"tracking_uri": VERL_TRACKING_URI}
    if "swanlab" in backends and not env("SWANLAB_LOG_DIR"):
        out["swanlab"] = {"log_dir": str(cwd / "swanlog")}
    return out
