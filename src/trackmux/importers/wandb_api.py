"""``wandb:ENTITY/PROJECT/RUN_ID``: a run on a wandb server, read through ``wandb.Api``.

Untested against a real server here (the tests run offline, with a stand-in for the
API object): history rows by ``scan_history`` (every row, with ``_step`` and
``_timestamp``), the config and the summary. Media are not carried over from a server.
The cursor is the number of history rows imported.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from trackmux.core.events import MetricsEvent
from trackmux.importers.base import Chunk, SourceError, SourceRun, flat_numbers

CHUNK_ROWS = 10_000


class RemoteWandbRun(SourceRun):
    format = "wandb"

    def __init__(self, path: str, run: Any) -> None:
        super().__init__(f"api\0{path}", str(run.name or run.id), f"wandb:{path}",
                         str(run.project))
        self.run = run

    def config(self) -> dict[str, Any]:
        summary = dict(getattr(self.run.summary, "_json_dict", None) or {})
        return {**dict(self.run.config), "_wandb": {"path": self.where, "summary": summary}}

    def finished(self) -> bool:
        return str(getattr(self.run, "state", "finished")) != "running"

    def read(self, cursors: Mapping[str, Any], live: bool) -> Iterator[Chunk]:
        done = int((cursors.get("history") or {}).get("rows", 0))
        chunk, rows = Chunk(), 0
        for index, row in enumerate(self.run.scan_history()):
            if index < done:
                continue
            rows = index + 1
            step = row.get("_step", index)
            when = row.get("_timestamp") or 0.0
            values = flat_numbers({k: v for k, v in row.items() if not k.startswith("_")
                                   and v is not None})
            if values:
                chunk.events.append(MetricsEvent(values, int(step), float(when)))
            if len(chunk.events) >= CHUNK_ROWS:
                chunk.cursors["history"] = {"rows": rows}
                yield chunk
                chunk = Chunk()
        chunk.cursors["history"] = {"rows": max(rows, done)}
        yield chunk


def find_remote(source: str, api: Any = None) -> list[SourceRun]:
    path = source.removeprefix("wandb:").strip("/")
    if path.count("/") != 2:
        raise SourceError(f"{source}: a wandb run on a server is wandb:ENTITY/PROJECT/RUN_ID")
    if api is None:
        import wandb

        api = wandb.Api(timeout=30)
    try:
        run = api.run(path)
    except Exception as exc:
        raise SourceError(f"{source}: {type(exc).__name__}: {exc}") from None
    return [RemoteWandbRun(path, run)]
