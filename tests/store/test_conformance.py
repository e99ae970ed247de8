"""The postgres backend passes the conformance suite every built-in backend passes,
read back from the store with the store reader (trackmux/store/read.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trackmux.core.configmerge import merged
from trackmux.core.events import (
    ArtifactEvent,
    ConfigEvent,
    HistogramEvent,
    ImageEvent,
    MetricsEvent,
    TableEvent,
    TextEvent,
)
from trackmux.plugins.postgres import PostgresBackend
from trackmux.testing.conformance import BackendConformance, Readback


class TestPostgresBackend(BackendConformance):
    kinds = frozenset({"metrics", "config", "table", "image", "text", "caption", "time",
                       "histogram", "artifact"})
    invalid_options = {"no_such_option": 1}
    dsn = ""

    @pytest.fixture(autouse=True)
    def _store(self, dsn: str) -> None:
        self.dsn = dsn

    def make_backend(self, tmp_path: Path) -> PostgresBackend:
        return PostgresBackend({"dsn": self.dsn})

    def read_back(self, tmp_path: Path) -> Readback:
        from trackmux.store.read import StoreSource

        source = StoreSource(self.dsn)
        out = Readback()
        try:
            for entry in source.runs():
                configs = []
                for kind in ("metrics", "config", "table", "image", "text", "histogram",
                             "artifact"):
                    for e in source.events(entry, kind):
                        if isinstance(e, MetricsEvent):
                            for key, value in e.data.items():
                                out.metrics.setdefault(key, []).append((e.step, value))
                                out.times.setdefault(key, []).append((e.step, e.time))
                        elif isinstance(e, ConfigEvent):
                            configs.append(e.config)
                        elif isinstance(e, TableEvent):
                            out.tables.setdefault(e.key, []).append(
                                (e.step, [list(r) for r in e.rows]))
                        elif isinstance(e, ImageEvent):
                            out.images.setdefault(e.key, []).append((e.step, e.width, e.height))
                            out.captions.setdefault(e.key, []).append((e.step, e.caption))
                        elif isinstance(e, TextEvent):
                            out.texts.setdefault(e.key, []).append((e.step, e.text))
                        elif isinstance(e, HistogramEvent):
                            out.histograms.setdefault(e.key, []).append((e.step, list(e.counts)))
                        elif isinstance(e, ArtifactEvent):
                            out.artifacts.setdefault(e.name, []).append(
                                (e.step, {f.path: f.size for f in e.files}))
                if configs:
                    out.config = merged(configs)
        finally:
            source.close()
        return out
