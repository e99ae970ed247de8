"""verl: ``run.watch`` on the actor (and critic) models (issue 25).

How the model reaches trackmux: verl 0.9.1 builds every model it trains through an
engine; ``FSDPEngine.initialize`` (verl/workers/engine/fsdp/transformer_impl.py) sets
``engine.module`` and ``engine.optimizer``, in the SFT trainer's torchrun processes and,
for PPO, inside the Ray worker processes (``TrainingWorker``: actor, critic). When that
module is imported, the drop-in wraps ``initialize`` so each built model is registered
(a weak reference) with its role: ``critic`` for a value-head engine, else ``actor``.

Where it is watched (``+trainer.trackmux.watch=gradients|parameters|all``,
``+trainer.trackmux.watch_every=N``, default 100; or ``TRACKMUX_WATCH=MODE[:N]``):

- SFT trainer: model and verl's ``Tracking`` share the process (data-parallel rank 0);
  ``Tracking`` watches the registered models with its run (keys ``gradients/<name>``...).
- PPO (``main_ppo``): the models are in Ray workers, ``Tracking`` in the driver, created
  inside ``fit()`` after the workers built their models, so the trainer option comes too
  late for them: set ``TRACKMUX_WATCH`` in the launch environment (workers of a local
  Ray cluster inherit it). A worker of torch.distributed rank 0 then watches its model
  through ``trackmux.attach(role="actor"|"critic")`` (keys ``actor/gradients/<name>``),
  its local FSDP shard only, at the step = its count of optimizer steps (a worker's handle
  logs no steps of its own; PPO makes several optimizer steps per trainer step); other
  ranks watch nothing and no collective is issued. Tested through verl's own Ray trainer
  (``sft_trainer_ray``: the same ``TrainingWorker`` in a ``RayWorkerGroup``, 2 workers);
  ``main_ppo`` itself is not run: its rollout needs vLLM/SGLang, i.e. a GPU, here
  (docs/provenance.md).
- Not covered: verl's Megatron, TorchTitan and VeOmni engines (their ``initialize`` is
  not wrapped).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import sys
import weakref
from collections.abc import Sequence
from types import ModuleType
from typing import Any

log = logging.getLogger("trackmux.verl")
TARGET = "verl.workers.engine.fsdp.transformer_impl"
_models: list[tuple[weakref.ref[Any], str]] = []


def register(module: Any, role: str) -> None:
    """Remember a model an engine built (and watch it now if this is a Ray worker)."""
    _models.append((weakref.ref(module), role))
    spec = _env_spec()
    if spec is not None and _no_local_run():
        _watch_in_worker(module, role, *spec)


def models() -> list[tuple[Any, str]]:
    return [(m, role) for ref, role in _models if (m := ref()) is not None]


def watch_models(run: Any, mode: str, every: int) -> int:
    """Watch every registered model of this process with ``run``; how many."""
    found = models()
    for module, _ in found:
        run.watch(module, log=mode, every=every)
    return len(found)


def _env_spec() -> tuple[str, int] | None:
    from trackmux.core import settings

    return settings.watch_spec()


def _no_local_run() -> bool:
    from trackmux.core.lifecycle.run import _live_runs

    return not list(_live_runs)


def _watch_in_worker(module: Any, role: str, mode: str, every: int) -> None:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_rank() != 0:
            return
        import trackmux
        from trackmux.watch import watch as watch_model

        handle = trackmux.attach(role=role)
        watch_model(handle, module, log=mode, every=every)
        log.info("trackmux: watching the %s model (%s every %d steps)", role, mode, every)
    except Exception as exc:  # a tracker never stops the worker
        log.warning("trackmux: cannot watch the %s model in this worker (%s: %s)", role,
                    type(exc).__name__, exc)


def _wrap(engine_module: ModuleType) -> None:
    engine_class = getattr(engine_module, "FSDPEngine", None)
    if engine_class is None or getattr(engine_class.initialize, "_trackmux", False):
        return
    original = engine_class.initialize
    value_head = getattr(engine_module, "FSDPEngineWithValueHead", None)

    def initialize(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        module = getattr(self, "module", None)
        if module is not None and getattr(self, "optimizer", None) is not None:
            role = "critic" if value_head is not None and isinstance(self, value_head) \
                else "actor"
            try:
                register(module, role)
            except Exception as exc:
                log.warning("trackmux: cannot register the %s model (%s)", role, exc)
        return result

    initialize._trackmux = True  # type: ignore[attr-defined]
    engine_class.initialize = initialize


def _then_wrap(execute: Any) -> Any:
    def exec_module(module: ModuleType) -> None:
        execute(module)
        _wrap(module)

    return exec_module


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the engine's ``initialize`` right after its module is executed."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if name != TARGET:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec: importlib.machinery.ModuleSpec | None = find(name, path, target)
            if spec is not None and spec.loader is not None:
                loader = spec.loader
                setattr(loader, "exec_module", _then_wrap(loader.exec_module))  # noqa: B010
                return spec
        return None


def install() -> None:
    """Register the engine's models from now on (cheap: nothing imported here)."""
    loaded = sys.modules.get(TARGET)
    if loaded is not None:
        _wrap(loaded)
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
