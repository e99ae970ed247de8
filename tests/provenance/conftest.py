"""Provenance is on in these tests (the suite-wide conftest turns it off elsewhere)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _provenance_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKMUX_PROVENANCE", "1")
