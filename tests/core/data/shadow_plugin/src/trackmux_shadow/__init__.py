"""A third party's ``file`` and ``console`` backends: one JSON line per metrics event in
``<run dir>/shadow-<name>.jsonl``, so a test can tell which provider served a run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import trackmux
from trackmux import Backend, ResumeState, RunInfo


class ShadowBackend(Backend):
    capabilities = frozenset({"metrics"})

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        self.path = run.run_dir / f"shadow-{self.name}.jsonl"

    def write(self, events: Sequence[Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            for event in events:
                if event.kind == "metrics":
                    handle.write(json.dumps({"step": event.step, "data": event.data}) + "\n")

    def close(self, status: str) -> None:
        pass


class ShadowFile(ShadowBackend):
    name = "file"


class ShadowConsole(ShadowBackend):
    name = "console"


@trackmux.hookimpl
def trackmux_register_backends(register: Any) -> None:
    register("file", ShadowFile, description="shadow file backend (tests)")
    register("console", ShadowConsole, description="shadow console backend (tests)")
