"""One real local Ray cluster (2 CPUs) for the module; workers get the same offline env."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

ray = pytest.importorskip("ray")


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=True,
             runtime_env={"env_vars": {"MLFLOW_DISABLE_TELEMETRY": "true"}})
    yield ray
    ray.shutdown()
