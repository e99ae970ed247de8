"""The doctor's findings and the samples ledger, as the UI reads them, when installed.

Both live in their own packages (trackmux.doctor, trackmux.samples); the UI imports
them lazily here, in one place, so the dashboard works without them and says "not
available in this install" instead of failing. Their contracts:

- ``trackmux.doctor.read.load_findings(run_dir) -> list[dict]`` with keys rule, severity
  (info, warning, critical), step, keys (list of str), message; ordered by step;
- ``trackmux.samples.read.list_sample_keys(run_dir) -> dict[str, list[int]]`` and
  ``trackmux.samples.read.step_payload(run_dir, key, step) -> dict`` (JSON-able), drawn in
  the browser by ``trackmux/report/assets/samples.js`` (styled by ``samples.css``):
  ``window.trackmuxSamples.mount(element, payload, {steps, load})``, where ``load(step)``
  returns (a promise of) another step's payload; the script draws its own step slider.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

NOT_AVAILABLE = "not available in this install"
SAMPLES_SCRIPT = Path(__file__).resolve().parent.parent / "report" / "assets" / "samples.js"
SAMPLES_STYLE = SAMPLES_SCRIPT.with_name("samples.css")
CONVERSATION_SCRIPT = SAMPLES_SCRIPT.with_name("conversation.js")  # drawn by samples.js
CONVERSATION_STYLE = SAMPLES_SCRIPT.with_name("conversation.css")


class Unavailable(RuntimeError):
    """The optional package is not installed (or fails to import)."""


def _module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise Unavailable(f"{name.rsplit('.', 1)[0]}: {NOT_AVAILABLE} ({exc})") from None


def findings_available() -> bool:
    try:
        _module("trackmux.doctor.read")
    except Unavailable:
        return False
    return True


def samples_available() -> bool:
    try:
        _module("trackmux.samples.read")
    except Unavailable:
        return False
    return SAMPLES_SCRIPT.is_file()


def load_findings(run_dir: Path) -> list[dict[str, Any]]:
    findings: list[dict[str, Any]] = _module("trackmux.doctor.read").load_findings(run_dir)
    return findings


#: the live doctor's "not judged" finding: the UI shows the run's coverage instead
COVERAGE_RULE = "coverage"
_coverage: dict[tuple[Any, ...], dict[str, Any]] = {}


def without_coverage(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings less the live doctor's coverage line (shown as the run's coverage)."""
    return [f for f in found if f.get("rule") != COVERAGE_RULE]


def load_coverage(run_dir: Path) -> dict[str, Any]:
    """What the doctor reads of the run (``trackmux.doctor.offline.scan_coverage``): ``judged``,
    ``verdict``, ``line`` (its one-line text), ``read`` (that line less the rules that could
    not run: the part a reader needs at a glance) and ``not_run`` (rule -> why, shown folded);
    scanned again once the spool changed."""
    module = _module("trackmux.doctor.coverage")
    state: list[Any] = [str(run_dir)]
    for name in ("spool.db", "spool.db-wal"):
        try:
            stat = (run_dir / name).stat()
            state += [stat.st_mtime_ns, stat.st_size]
        except OSError:
            state.append(None)
    key = tuple(state)
    hit = _coverage.get(key)
    if hit is None:
        coverage = _module("trackmux.doctor.offline").scan_coverage(run_dir)
        hit = {"judged": bool(coverage["judged"]), "verdict": coverage["verdict"],
               "line": module.line(coverage), "read": module.line({**coverage, "not_run": {}}),
               "not_run": dict(coverage.get("not_run") or {})}
        if len(_coverage) >= 256:
            _coverage.pop(next(iter(_coverage)))
        _coverage[key] = hit
    return hit


def load_stored_findings(run_dir: Path) -> list[dict[str, Any]] | None:
    """What the live doctor stored, never a diagnosis (the run list must stay cheap over
    hundreds of runs); None when the doctor did not watch the run."""
    found: list[dict[str, Any]] | None = _module("trackmux.doctor.read").load_stored_findings(
        run_dir)
    return found


def list_sample_keys(run_dir: Path) -> dict[str, list[int]]:
    keys: dict[str, list[int]] = _module("trackmux.samples.read").list_sample_keys(run_dir)
    return keys


def step_payload(run_dir: Path, key: str, step: int,
                 max_rows: int | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = _module("trackmux.samples.read").step_payload(
        run_dir, key, step, max_rows=max_rows)
    return payload
