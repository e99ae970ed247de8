"""``run.watch(model)``: per-layer histograms and norms of a torch module's gradients and
parameters, every N optimizer steps (issue 25; docs/provenance.md#watch).

Keys: ``gradients/<parameter name>`` and ``parameters/<parameter name>`` (histograms,
binned on the tensor's device, see binning.py), ``grad_norm/<name>`` and
``param_norm/<name>`` (metrics: the L2 norm, NaN when a value was NaN). Binned at the
optimizer step (the gradients are gone after ``zero_grad``) and logged at the step of the
next ``log()`` call, as wandb.watch does, so a gradient spike lines up with the loss of
its step; a later watched step before that call replaces the earlier one, and what is
pending at ``finish()`` is logged at the step after the last. A layer
without a gradient (frozen, or unused in the step) gets no gradient histogram; its
parameters are still logged. Importing this package does not import torch.
"""

from __future__ import annotations

from typing import Any

from trackmux.core.lifecycle.run import provide
from trackmux.core.values.histogram import check_bins

MODES = ("gradients", "parameters", "all")


def check_args(model: Any, log: str, every: int, bins: int) -> None:
    """The checks ``watch`` makes on every rank, with errors that name the argument."""
    if not callable(getattr(model, "named_parameters", None)):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if log not in MODES:
        raise ValueError(f"log must be one of {', '.join(MODES)}, got {log!r}")
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ValueError(f"every must be an int >= 1, got {every!r}")
    check_bins(bins)


def watch(run: Any, model: Any, log: str = "gradients", every: int = 100,
          bins: int = 64) -> Any:
    """Watch ``model`` for ``run``; returns the watcher (``.steps``, ``.logged``). Watching
    a model again replaces its earlier watch."""
    from trackmux.watch import hooks

    check_args(model, log, every, bins)
    for old in hooks.of(run, model):
        hooks.remove(old)
    watcher = hooks.Watcher(run, model, log, every, bins)
    hooks.add(watcher)
    return watcher


def unwatch(run: Any, model: Any = None) -> None:
    """Stop watching ``model`` (every model of ``run`` when None)."""
    import sys

    hooks = sys.modules.get("trackmux.watch.hooks")
    if hooks is None:  # nothing was ever watched: torch need not be imported
        return
    for watcher in hooks.of(run, model):
        hooks.remove(watcher)


provide("watch", watch)
provide("unwatch", unwatch)
provide("check_watch", check_args)
