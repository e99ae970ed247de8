"""TEST-ONLY FAKES of the doctor's and the samples ledger's read functions, written to
the contracts the UI codes against (ui/sources.py), until trackmux.doctor and
trackmux.samples land; replace with the real packages at merge.

Each fake reads a JSON file the test wrote into the run folder, so the UI's findings and
samples views are exercised end to end (server, API, browser) on known data.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import orjson
import pytest

from trackmux.ui import sources

FAKE_FINDINGS = "fake_findings.json"
FAKE_SAMPLES = "fake_samples.json"
FAKE_SAMPLES_JS = Path(__file__).with_name("ui_fake_samples.js")


def fake_load_findings(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / FAKE_FINDINGS
    if not path.exists():
        return []
    findings: list[dict[str, Any]] = orjson.loads(path.read_bytes())
    return sorted(findings, key=lambda f: f["step"])


def fake_list_sample_keys(run_dir: Path) -> dict[str, list[int]]:
    path = Path(run_dir) / FAKE_SAMPLES
    if not path.exists():
        return {}
    data = orjson.loads(path.read_bytes())
    return {key: sorted(int(s) for s in steps) for key, steps in data.items()}


def fake_step_payload(run_dir: Path, key: str, step: int) -> dict[str, Any]:
    data = orjson.loads((Path(run_dir) / FAKE_SAMPLES).read_bytes())
    payload: dict[str, Any] = data[key][str(step)]
    return payload


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``trackmux.doctor.read`` and ``trackmux.samples.read`` importable as fakes."""
    for package, name, functions in (
            ("trackmux.doctor", "trackmux.doctor.read", {"load_findings": fake_load_findings,
                                                     "load_stored_findings": fake_load_findings}),
            ("trackmux.samples", "trackmux.samples.read",
             {"list_sample_keys": fake_list_sample_keys, "step_payload": fake_step_payload})):
        module = types.ModuleType(name)
        for attr, fn in functions.items():
            setattr(module, attr, fn)
        if package not in sys.modules:
            monkeypatch.setitem(sys.modules, package, types.ModuleType(package))
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(sources, "SAMPLES_SCRIPT", FAKE_SAMPLES_JS)


def write_findings(run_dir: Path, findings: list[dict[str, Any]]) -> None:
    (run_dir / FAKE_FINDINGS).write_bytes(orjson.dumps(findings))


def write_samples(run_dir: Path, samples: dict[str, dict[str, Any]]) -> None:
    (run_dir / FAKE_SAMPLES).write_bytes(orjson.dumps(samples))
