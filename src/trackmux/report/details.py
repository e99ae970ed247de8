"""Per-run facts the report shows beside the UI's payloads: the run's summary, what each
backend still lacks (with the command that delivers the rest), problems (a damaged spool,
bad input dropped at the door), provenance, artifacts and text events.

Read from the spool by kind (``events_of_kind``), so a run of millions of metric points
is not decoded again for these; every value is plain JSON, drawn by
``assets/export.js`` with ``textContent`` (no markup from run data reaches the page).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trackmux.core.events import ArtifactEvent, ConfigEvent, ProvenanceEvent, TextEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.values.intake import input_dropped
from trackmux.core.values.redact import redact_text
from trackmux.report.provenance import not_recorded, provenance_rows
from trackmux.report.sections import wall_time, when

MAX_TEXTS = 200  # text events per run in the page (the last ones; `trackmux show` has all)
MAX_DIFF = 200_000  # characters of an uncommitted diff


def run_details(run_dir: Path) -> dict[str, Any]:
    """One run's summary, delivery, problems, provenance, artifacts and texts."""
    out: dict[str, Any] = {"run_id": run_dir.name, "dir": str(run_dir), "problems": [],
                           "delivery": [], "sync": None, "provenance": None,
                           "provenance_missing": None, "artifacts": [], "texts": [],
                           "texts_total": 0}
    try:
        reader = SpoolReader(run_dir)
    except Exception as exc:  # a damaged spool is a problem line, never a failed report
        out["problems"].append(f"damaged spool: {type(exc).__name__}: {exc}")
        return out
    try:
        meta = reader.meta()
        last_seq = reader.last_seq()
        out.update(run_id=str(meta.get("run_id") or run_dir.name),
                   project=str(meta.get("project") or ""), started=when(meta.get("started_at")),
                   state=str(meta.get("state") or "unknown"))
        texts = [e for e in reader.events_of_kind("text") if isinstance(e, TextEvent)]
        tail = reader.read(max(0, last_seq - 1), 1).events  # the run's last event
        out["duration"] = wall_time(meta.get("started_at"), meta.get("finished_at"),
                                    tail[-1].time if tail else None, out["state"])
        out["texts_total"] = len(texts)
        out["texts"] = [{"key": e.key, "step": e.step, "text": e.text}
                        for e in sorted(texts, key=lambda e: (e.step, e.seq))[-MAX_TEXTS:]]
        out["artifacts"] = [
            {"name": e.name, "type": e.type, "step": e.step, "source": e.source,
             "files": [{"path": f.path, "size": f.size, "sha256": f.sha256[:16],
                        "kept": "copied" if f.copied else "referenced"} for f in e.files]}
            for e in sorted((e for e in reader.events_of_kind("artifact")
                             if isinstance(e, ArtifactEvent)), key=lambda e: (e.step, e.seq))]
        provenance = [e for e in reader.events_of_kind("provenance")
                      if isinstance(e, ProvenanceEvent)]
        if provenance:
            latest = provenance[-1]
            diff = latest.diff
            if diff and not latest.data.get("git", {}).get("diff_redacted"):
                diff = redact_text(diff)  # a spool older than issue 34
            out["provenance"] = {"rows": provenance_rows(latest.data),
                                 "diff": diff[:MAX_DIFF], "diff_chars": len(diff)}
        else:  # said in the run's column, not a column of dashes
            imported = [e.config["_import"] for e in reader.events_of_kind("config")
                        if isinstance(e, ConfigEvent) and "_import" in e.config]
            out["provenance_missing"] = not_recorded(
                {"_import": imported[-1]} if imported else None)
        cursors = reader.cursors()
        names = list(meta.get("backends") or [])
        names += [name for name in sorted(cursors) if name not in names]
        for name in names:
            cursor = cursors.get(name)
            acked = cursor.acked_seq if cursor else 0
            updated = cursor.updated if cursor else None
            pending = max(0, last_seq - acked)
            state = ("not started" if updated is None else
                     f"{pending} pending" if pending else "all delivered")
            out["delivery"].append({"backend": name, "state": state, "acked": acked,
                                    "last": last_seq, "pending": pending,
                                    "remote_id": cursor.remote_id if cursor else None,
                                    "updated": when(updated)})
        lacking = [d["backend"] for d in out["delivery"] if d["pending"]]
        if lacking:
            out["sync"] = f"trackmux sync {run_dir} --to {','.join(lacking)}"
        out["problems"] += [f"damaged spool: {e}" for e in reader.damage.errors]
        out["problems"] += [f"bad input dropped at the door: {d}" for d in input_dropped(meta)]
    except Exception as exc:
        out["problems"].append(f"damaged spool: {type(exc).__name__}: {exc}")
    finally:
        reader.close()
    return out
