"""Fixtures for the UI tests: spool-only runs made with the real run API, a server on a
free loopback port (stopped at the end), and headless Chromium as tests/report drives it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import trackmux
from trackmux.ui.app import Server

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


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


@pytest.fixture
def server_for() -> Iterator[Any]:
    started: list[Server] = []

    def start(*roots: Path, **kwargs: Any) -> Server:
        server = Server(list(roots), port=0, **kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield instance
        finally:
            instance.close()
