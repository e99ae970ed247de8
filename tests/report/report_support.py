"""Shared by the demo and report tests (a uniquely named module: several conftest.py exist)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

DEMO_STEPS = 200  # the demo's default

#: Debian's Chromium, as the session's ``browser`` fixture (tests/conftest.py) launches it
CHROMIUM = "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                    reason=f"{CHROMIUM} is missing (apt-get install chromium)")


@dataclass(frozen=True)
class DemoRun:
    root: Path
    run_dir: Path
    output: str
    seconds: float


def embedded(html: str) -> dict[str, Any]:
    """The JSON the report's charts, tables and sections are drawn from."""
    start = html.index('<script type="application/json" id="trackmux-data">')
    body = html[html.index(">", start) + 1:html.index("</script>", start)]
    data: dict[str, Any] = json.loads(body)
    return data


def by_label(data: dict[str, Any]) -> dict[str, str]:
    """Run label -> the run's id in the embedded data."""
    return {r["label"]: r["id"] for r in data["runs"]}
