"""The spool side of the reader interface: run folders under a root on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trackmux.core.configmerge import merged
from trackmux.core.events import ConfigEvent, Event, MetricsEvent, ProvenanceEvent, SamplesEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.runs import _resolve_on_disk, find_runs, summarize
from trackmux.readers.base import RunEntry, Series, best_effort_findings


class SpoolSource:
    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser().absolute()
        self.uri = str(self.root)

    def close(self) -> None:
        return None

    def _entry(self, run_dir: Path) -> RunEntry:
        summary = summarize(run_dir)
        meta = summary.meta
        from trackmux.core.spool.attempts import run_last_step

        step = run_last_step(run_dir)
        last_step = None if step < 0 else step
        return RunEntry(
            ref=str(run_dir), run_id=str(meta.get("run_id") or run_dir.name),
            project=str(meta.get("project") or run_dir.parent.name),
            name=str(meta.get("name") or run_dir.name), host=str(meta.get("host") or ""),
            user=str(meta.get("user") or ""), state=summary.state,
            started_at=meta.get("started_at"), finished_at=meta.get("finished_at"),
            events=summary.events, last_seq=summary.last_seq, last_step=last_step, meta=meta)

    def runs(self, project: str | None = None) -> list[RunEntry]:
        out = []
        for run_dir in find_runs(self.root):
            try:
                entry = self._entry(run_dir)
            except Exception:
                continue
            if project is None or entry.project == project:
                out.append(entry)
        return out

    def find(self, arg: str) -> RunEntry:
        """A run folder, a run folder's name (or prefix) under the root, else a run by the
        run id, ``HOST/RUN_ID`` or name in its meta (folders need not be named by run id)."""
        try:
            return self._entry(_resolve_on_disk(arg, self.root))
        except FileNotFoundError:
            found = [e for e in self.runs() if arg in (e.run_id, e.name, f"{e.host}/{e.run_id}")]
            if len(found) == 1:
                return found[0]
            if found:
                raise FileNotFoundError(f"run {arg!r} is ambiguous under {self.root}: "
                                        + ", ".join(e.ref for e in found)) from None
            raise

    def _events(self, run: RunEntry, after: int = 0) -> list[Event]:
        reader = SpoolReader(Path(run.ref))
        try:
            return list(reader.iter_events(after))
        finally:
            reader.close()

    def keys(self, run: RunEntry) -> list[str]:
        keys: set[str] = set()
        for event in self.events(run, "metrics"):
            if isinstance(event, MetricsEvent):
                keys.update(event.data)
        return sorted(keys)

    def series(self, run: RunEntry, key: str, after: int = 0) -> Series:
        rows = [(e.seq, e.step, e.time, e.data[key]) for e in self._events(run, after)
                if isinstance(e, MetricsEvent) and key in e.data]
        return Series.of(rows, after)

    def events(self, run: RunEntry, kind: str, after: int = 0) -> list[Event]:
        reader = SpoolReader(Path(run.ref))
        try:
            return [e for e in reader.events_of_kind(kind) if e.seq > after]
        finally:
            reader.close()

    def samples(self, run: RunEntry, key: str, step: int) -> list[SamplesEvent]:
        return [e for e in self.events(run, "samples")
                if isinstance(e, SamplesEvent) and e.key == key and e.step == step]

    def findings(self, run: RunEntry) -> list[dict[str, Any]]:
        return best_effort_findings(self.events(run, "finding"))

    def config(self, run: RunEntry) -> dict[str, Any]:
        return merged(e.config for e in self.events(run, "config")
                      if isinstance(e, ConfigEvent))

    def provenance(self, run: RunEntry) -> dict[str, Any] | None:
        found = [e for e in self.events(run, "provenance") if isinstance(e, ProvenanceEvent)]
        return {"data": found[-1].data, "diff": found[-1].diff} if found else None

    def replica(self, run: RunEntry, root: Path) -> Path:
        return Path(run.ref)  # a spool is its own replica
