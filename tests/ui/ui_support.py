"""Shared by the UI tests (a uniquely named module: several conftest.py exist)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trackmux


def make_run(root: Path, name: str, steps: int, *, config: dict[str, Any] | None = None,
             scale: float = 1.0, project: str = "sweep") -> Path:
    """A finished spool-only run: reward rising by ``scale``, KL, a system metric, a
    histogram every 10 steps, a table and an image at the last step."""
    import numpy as np

    run = trackmux.init(project=project, name=name, backends=[], dir=root, config=config)
    assert isinstance(run, trackmux.Run)
    for step in range(steps):
        run.log({"reward/mean": scale * step / steps, "kl/divergence": 0.01 * step * scale,
                 "system/cpu": 50.0 + step % 7}, step=step)
        if step % 10 == 0:
            run.log_histogram("critic/advantages", np.linspace(-1, 1, 64) * (1 + step),
                              step=step)
    run.log_table("rollouts", ["prompt", "response", "reward"],
                  [["1 2 3", "3 2 1", 1.0], ["4 5", "5 4", 0.0]], step=steps - 1)
    run.log_image("kl/heatmap", np.linspace(0, 1, 16 * 24).reshape(16, 24), step=steps - 1)
    assert run.finish(timeout=30).complete
    return run.dir
