"""trackmux: one tracking layer between a training loop and every experiment tracker.

    run = trackmux.init(project="ppo-qwen2", backends=["console", "wandb"], config=cfg)
    run.log({"reward/mean": 0.41}, step=10)
    run.finish()

Every call becomes an event in a durable local spool and is delivered to each backend by
its own worker thread; see docs/ for the guarantees.
"""

from __future__ import annotations

from trackmux.attached import AttachedRun, NotAttachableError, attach, serve
from trackmux.core.backends.contract import Backend, ResumeState, RunInfo
from trackmux.core.backends.registry import register_plugin
from trackmux.core.errors import (
    EventRejected,
    PermanentBackendError,
    RunFinishedError,
    SpoolLockedError,
    TrackmuxError,
    UnknownBackendError,
)
from trackmux.core.events import (
    ArtifactEvent,
    ConfigEvent,
    Event,
    HistogramEvent,
    ImageEvent,
    MetricsEvent,
    ProvenanceEvent,
    TableEvent,
    TextEvent,
)
from trackmux.core.lifecycle.run import DisabledRun, FinishSummary, Run, init
from trackmux.doctor import setup as _doctor_setup  # noqa: F401 - init(doctor=...)
from trackmux.hookspecs import hookimpl
from trackmux.provenance import record as _provenance  # noqa: F401 - joins every run
from trackmux.sweeps import join as _sweep_join  # noqa: F401 - a trial's run joins its sweep
from trackmux.watch import watch as _watch  # noqa: F401 - provides Run.watch

__version__ = "0.1.0"

__all__ = [
    "ArtifactEvent",
    "AttachedRun",
    "Backend",
    "ConfigEvent",
    "DisabledRun",
    "Event",
    "EventRejected",
    "FinishSummary",
    "HistogramEvent",
    "ImageEvent",
    "MetricsEvent",
    "NotAttachableError",
    "PermanentBackendError",
    "ProvenanceEvent",
    "ResumeState",
    "Run",
    "RunFinishedError",
    "RunInfo",
    "SpoolLockedError",
    "TableEvent",
    "TextEvent",
    "TrackmuxError",
    "UnknownBackendError",
    "__version__",
    "attach",
    "hookimpl",
    "init",
    "register_plugin",
    "serve",
]
