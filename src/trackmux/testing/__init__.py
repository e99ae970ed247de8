"""Test helpers for backend authors: an in-memory backend and the conformance suite.

    from trackmux.testing import BackendConformance, Readback

    class TestMyBackend(BackendConformance):
        def make_backend(self, tmp_path): return MyBackend({"dir": tmp_path})
        def read_back(self, backend, tmp_path): return Readback(metrics=...)

The pytest plugin (auto-loaded through the ``pytest11`` entry point) registers the
``memory`` backend and offers the ``memory_backend`` fixture.
"""

from __future__ import annotations

from trackmux.testing.conformance import BackendConformance, Readback, sample_run
from trackmux.testing.memory import MemoryBackend, MemoryStore, memory_store

__all__ = ["BackendConformance", "MemoryBackend", "MemoryStore", "Readback", "memory_store",
           "sample_run"]
