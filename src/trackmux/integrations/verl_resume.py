"""verl resume: a verl run restarted from its checkpoint continues its trackmux run.

verl resumes when ``trainer.resume_mode`` is ``auto`` (the newest ``global_step_N`` under
``trainer.default_local_dir``, named by ``latest_checkpointed_iteration.txt``) or
``resume_path`` (``trainer.resume_from_path``, a ``.../global_step_N`` folder; the SFT
trainer also takes it in ``auto`` mode when it is set). The drop-in
reads the same config, finds the same checkpoint the same way and, when the run id of the
trackmux run is recorded beside the checkpoints (:data:`RECORD` in the checkpoint folder's
parent), continues that run with ``rewind_to=N``: the steps after N that the crashed
attempt logged are superseded, and the remote runs continue. Each Tracking then records
its run id in ``trainer.default_local_dir`` for the next restart. No verl code changes.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger("trackmux.verl")

RECORD = "trackmux_run.json"
LATEST = "latest_checkpointed_iteration.txt"  # verl's checkpoint_manager writes it
_STEP_DIR = re.compile(r"global_step_(\d+)$")


def _trainer(config: Mapping[str, Any]) -> Mapping[str, Any]:
    trainer = config.get("trainer")
    return trainer if isinstance(trainer, Mapping) else {}


def resume_checkpoint(config: Mapping[str, Any]) -> tuple[Path, int] | None:
    """The ``global_step_N`` folder verl will resume from, and N; None for a fresh start."""
    trainer = _trainer(config)
    mode = trainer.get("resume_mode", "auto")
    explicit = trainer.get("resume_from_path")
    if mode == "auto" and explicit and "global_step_" in str(explicit) \
            and Path(str(explicit)).exists():
        mode = "resume_path"  # the SFT trainer's rule (checkpoint_handler._determine_resume_path)
    if mode == "auto":
        root = trainer.get("default_local_dir")
        if not root:
            return None
        latest = Path(str(root)) / LATEST
        try:
            step = int(latest.read_text().strip())
        except (OSError, ValueError):
            return None
        folder = Path(str(root)) / f"global_step_{step}"
        return (folder, step) if folder.is_dir() else None
    if mode == "resume_path":
        path = trainer.get("resume_from_path")
        found = _STEP_DIR.search(str(path).rstrip("/")) if path else None
        if found is None:
            return None
        return Path(str(path).rstrip("/")), int(found.group(1))
    return None


def read_record(folder: Path, project: str, experiment: str) -> dict[str, Any] | None:
    """The trackmux run recorded beside ``folder`` for this project and experiment."""
    path = folder.parent / RECORD
    try:
        record = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(record, dict) or record.get("project") != project \
            or record.get("experiment") != experiment or not record.get("run_id"):
        return None
    return record


def resume_options(config: Mapping[str, Any], project: str, experiment: str,
                   options: Mapping[str, Any]) -> dict[str, Any]:
    """``trackmux.init`` arguments that continue the run verl is resuming, or {}."""
    from trackmux.core import settings
    from trackmux.core.spool import attempts

    point = resume_checkpoint(config)
    if point is None:
        return {}
    folder, step = point
    record = read_record(folder, project, experiment)
    if record is None:
        log.warning("trackmux: verl resumes from %s, but no trackmux run is recorded beside "
                    "it (%s); starting a new trackmux run", folder, folder.parent / RECORD)
        return {}
    out: dict[str, Any] = {"run_id": str(record["run_id"]), "resume": "allow"}
    root = options.get("dir") or record.get("root")
    if root and "dir" not in options:
        out["dir"] = root
    run_dir = attempts.run_dir_of(settings.spool_root(root), project, out["run_id"])
    last = attempts.run_last_step(run_dir)
    if last >= 0:
        out["rewind_to"] = min(step, last)  # the spool may end before the checkpoint
    return out


def save_record(config: Mapping[str, Any], project: str, experiment: str, run_id: str,
                root: Path) -> None:
    """Record the run id in ``trainer.default_local_dir``, where the next resume looks.
    A failure is logged, never raised: tracking must not stop training."""
    folder = _trainer(config).get("default_local_dir")
    if not folder:
        return
    path = Path(str(folder)) / RECORD
    record = {"project": project, "experiment": experiment, "run_id": run_id,
              "root": str(root)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{RECORD}.{os.getpid()}.tmp")
        tmp.write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))
        tmp.replace(path)
    except OSError as exc:
        log.warning("trackmux: cannot record the run id beside verl's checkpoints (%s): %s; "
                    "a resume will start a new trackmux run", path, exc)
