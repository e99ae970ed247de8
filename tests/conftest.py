"""Session-wide test settings: nothing reaches the network, spools go to tmp dirs."""

from __future__ import annotations

import os

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("SWANLAB_MODE", "offline")
os.environ.setdefault("DO_NOT_TRACK", "1")
