"""What differs between two runs: config, code, packages, hardware (``trackmux diff``).

Each run is read from its spool: the merged config and the latest provenance event. The
result is a list of differences per area, each ``{"key", "a", "b"}`` (None: absent in
that run), plain data so ``--json`` prints it as is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trackmux.core.configmerge import merge_config
from trackmux.core.events import ConfigEvent, ProvenanceEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.values.argv import redacted_again

#: the areas compared, in the order shown; values are (section, keys) of provenance
AREAS = ("config", "code", "command", "packages", "python", "hardware", "env")
_CODE_KEYS = ("commit", "branch", "detached", "dirty", "remote", "diff_sha256", "diff_bytes",
              "untracked_count", "available")


@dataclass
class RunRecord:
    """What ``diff`` compares of one run."""

    run_dir: Path
    config: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] | None = None


def load(run_dir: Path) -> RunRecord:
    record = RunRecord(run_dir)
    reader = SpoolReader(run_dir)
    try:
        for event in reader.iter_events():
            if isinstance(event, ConfigEvent):
                record.config = merge_config(record.config, event.config)
            elif isinstance(event, ProvenanceEvent):  # argv by today's rules (core/values/argv.py)
                record.provenance = redacted_again(event.data)
    finally:
        reader.close()
    return record


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}{key}."))
        return out if out or not prefix else {prefix[:-1]: {}}
    return {prefix[:-1]: value}


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "a": a.get(key), "b": b.get(key)}
            for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]


def _hardware(data: dict[str, Any]) -> dict[str, Any]:
    host = data.get("host", {})
    gpu = data.get("gpu", {})
    return {"hostname": host.get("hostname"), "os": host.get("platform"),
            "cpu": host.get("cpu"), "cpu_count": host.get("cpu_count"),
            "gpus": [d.get("name") for d in gpu.get("devices", [])] or None,
            "gpu_driver": gpu.get("driver"), "cuda": gpu.get("cuda")}


def compare(a: RunRecord, b: RunRecord) -> dict[str, list[dict[str, Any]]]:
    """Differences per area (an area with none is an empty list)."""
    out: dict[str, list[dict[str, Any]]] = {
        "config": _differences(_flatten(a.config), _flatten(b.config))}
    pa, pb = a.provenance or {}, b.provenance or {}
    ga, gb = pa.get("git", {}), pb.get("git", {})
    out["code"] = _differences({k: ga.get(k) for k in _CODE_KEYS if k in ga},
                               {k: gb.get(k) for k in _CODE_KEYS if k in gb})
    ca, cb = pa.get("command", {}), pb.get("command", {})
    out["command"] = _differences(
        {"argv": " ".join(ca.get("argv", [])) or None, "entry": ca.get("entry")},
        {"argv": " ".join(cb.get("argv", [])) or None, "entry": cb.get("entry")})
    out["packages"] = _differences(pa.get("packages", {}), pb.get("packages", {}))
    out["python"] = _differences(pa.get("python", {}), pb.get("python", {}))
    out["hardware"] = _differences(_hardware(pa), _hardware(pb)) if pa and pb else []
    ea, eb = set(pa.get("env", [])), set(pb.get("env", []))
    out["env"] = ([{"key": n, "a": n in ea, "b": n in eb} for n in sorted(ea ^ eb)]
                  if pa and pb else [])
    return out
