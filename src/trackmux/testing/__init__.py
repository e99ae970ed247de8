"""Test helpers for backend authors: an in-memory backend and the conformance suite.

    from trackmux.testing import BackendConformance, Readback

    class TestMyBackend(BackendConformance):
        def make_backend(self, tmp_path): return MyBackend({"dir": str(tmp_path)})
        def read_back(self, tmp_path): return Readback(metrics=...)

The ``memory`` backend keeps delivered events in the process: ``use_memory_backend()``
registers it anywhere; under pytest the ``memory_backend`` fixture does (the plugin is
auto-loaded through the ``pytest11`` entry point).
"""

from __future__ import annotations

from trackmux.testing.conformance import BackendConformance, Readback, sample_run
from trackmux.testing.memory import (
    MemoryBackend,
    MemoryStore,
    memory_store,
    use_memory_backend,
)

__all__ = ["BackendConformance", "MemoryBackend", "MemoryStore", "Readback", "memory_store",
           "sample_run", "use_memory_backend"]
