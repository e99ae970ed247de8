"""Hugging Face ``trainer_state.json`` (transformers/TRL checkpoints): ``log_history``.

The source is the file itself, a checkpoint folder, or a Trainer output folder; in an
output folder the ``checkpoint-*/trainer_state.json`` with the highest ``global_step`` is
read (each checkpoint's history holds the earlier ones' entries first). The run is the
output folder. Each ``log_history`` entry is one metrics event at its ``step``; the
cursor is the number of entries imported, so a later checkpoint adds only its new ones.
The file has no wall times: every entry gets the file's modification time. Config: the
state's own settings (``train_batch_size``, ``max_steps``, ``logging_steps``, ...).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from trackmux.core.events import MetricsEvent
from trackmux.importers.base import Chunk, Damage, SourceError, SourceRun, flat_numbers

SETTINGS = ("train_batch_size", "num_train_epochs", "max_steps", "logging_steps",
            "eval_steps", "save_steps", "is_hyper_param_search", "is_local_process_zero",
            "is_world_process_zero", "best_model_checkpoint", "best_metric")


def _global_step(path: Path) -> int:
    try:
        return int(json.loads(path.read_text()).get("global_step") or 0)
    except (OSError, ValueError, AttributeError):
        return -1


class TrainerState(SourceRun):
    format = "trainer_state"

    def __init__(self, folder: Path, file: Path | None) -> None:
        folder = folder.resolve()
        super().__init__(str(folder), folder.name, str(file or folder))
        self.folder = folder
        self.file = file
        self._state: dict[str, Any] = {}

    def _latest(self) -> Path | None:
        if self.file is not None:
            return self.file
        found = [p for p in [self.folder / "trainer_state.json",
                             *self.folder.glob("checkpoint-*/trainer_state.json")]
                 if p.is_file()]
        return max(found, key=_global_step, default=None)

    def config(self) -> dict[str, Any]:
        return {k: self._state[k] for k in SETTINGS if k in self._state}

    def read(self, cursors: Mapping[str, Any], live: bool) -> Iterator[Chunk]:
        path = self._latest()
        if path is None:
            yield Chunk(damage=[Damage(str(self.folder), -1, 1, "no trainer_state.json")])
            return
        done = int((cursors.get("log_history") or {}).get("entries", 0))
        try:
            text = path.read_text(encoding="utf-8")
            when = os.stat(path).st_mtime
        except OSError as exc:
            yield Chunk(damage=[Damage(str(path), -1, 1, f"cannot read: {exc}")])
            return
        try:
            state = json.loads(text)
        except ValueError as exc:
            if live:  # being rewritten by the Trainer right now
                return
            yield Chunk(damage=[Damage(str(path), getattr(exc, "pos", -1), 1,
                                       f"truncated or invalid JSON: {exc}")])
            return
        if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
            yield Chunk(damage=[Damage(str(path), -1, 1, "no log_history list in it")])
            return
        self._state = state
        history = state["log_history"]
        chunk = Chunk(cursors={"log_history": {"entries": max(done, len(history))}})
        for index, entry in enumerate(history[done:], start=done):
            if not isinstance(entry, dict):
                chunk.damage.append(Damage(str(path), -1, 1,
                                           f"log_history[{index}] is not an object"))
                continue
            values = flat_numbers({k: v for k, v in entry.items() if k != "step"})
            step = entry.get("step")
            if not isinstance(step, int) or isinstance(step, bool) or step < 0:
                chunk.damage.append(Damage(str(path), -1, 1,
                                           f"log_history[{index}] has no integer step"))
                continue
            if values:
                chunk.events.append(MetricsEvent(values, step, when))
        yield chunk


def find(source: str, options: Mapping[str, Any]) -> list[SourceRun]:
    path = Path(source).expanduser()
    if path.is_file():
        folder = path.parent
        if folder.name.startswith("checkpoint-"):
            folder = folder.parent
        return [TrainerState(folder, path)]
    if path.is_dir():
        if path.name.startswith("checkpoint-") and (path / "trainer_state.json").is_file():
            return [TrainerState(path.parent, path / "trainer_state.json")]
        if (path / "trainer_state.json").is_file() or any(
                path.glob("checkpoint-*/trainer_state.json")):
            return [TrainerState(path, None)]
    raise SourceError(f"{source}: no trainer_state.json there (a file, a checkpoint folder "
                      "or a Trainer output folder holding checkpoint-*/)")
