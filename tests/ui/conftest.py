"""Fixtures for the UI tests: spool-only runs made with the real run API, a server on a
free loopback port (stopped at the end); headless Chromium is tests/conftest.py's."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from trackmux.ui.app import Server


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
