"""issue 45 over Ray: a worker attached to the driver's run learns the doctor's stop from
the sink's answer to its next flush (``handle.should_stop``)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

import trackmux

ray = pytest.importorskip("ray")

DEADLINE = 600.0  # bounds a hang: each wait ends once the stop is seen


@ray.remote(num_cpus=0)
class Rollout:
    def until_stopped(self, deadline_s: float) -> dict[str, Any]:
        handle = trackmux.attach(role="rollout")
        deadline = time.monotonic() + deadline_s
        step = 0
        while not handle.should_stop and time.monotonic() < deadline:
            handle.log({"gen_s": 1.0}, step=step)
            step += 1
            time.sleep(0.05)
        return {"should_stop": handle.should_stop, "steps": step}


def test_a_ray_worker_sees_the_drivers_stop(ray_cluster: Any, tmp_path: Path) -> None:
    run = trackmux.init("ray-stop", backends=[], dir=tmp_path / "spool", delivery="thread",
                        doctor={"stop_on": "critical"})
    assert isinstance(run, trackmux.Run)
    worker = Rollout.remote()
    result = worker.until_stopped.remote(DEADLINE)
    deadline = time.monotonic() + DEADLINE
    step = 0
    while not run.should_stop and time.monotonic() < deadline:
        run.log({"loss": math.nan if step >= 5 else 1.0}, step=step)
        step += 1
        time.sleep(0.05)
    assert run.should_stop
    seen = ray.get(result, timeout=DEADLINE + 30)
    assert seen["should_stop"] is True, seen
    assert run.finish(timeout=60).status == "stopped"
