"""Watching a torch module: which hook, when it fires, what each rank sees.

Hook: torch's global optimizer step post-hook
(``torch.optim.optimizer.register_optimizer_step_post_hook``), installed once for all
watched models. Why this one: "every N optimizer steps" is what users mean, and gradient
accumulation makes backward passes (or per-parameter ``post_accumulate_grad`` hooks)
count micro-batches instead; after ``optimizer.step()`` the gradients of the step are
still there (``zero_grad`` comes later) and the parameters are the updated ones; and
``watch`` needs no handle on the optimizer (verl's, accelerate's, or one built later).
An optimizer step counts for a watched model when the optimizer holds one of its
parameters. Cost off the watched steps: one set lookup per optimizer step.

What each rank sees: under FSDP2/DTensor a parameter and its gradient are DTensors and
each rank bins its local shard (``to_local()``); under FSDP1 (``use_orig_params``) each
rank holds views of its flat shard (empty views are skipped). Nothing here issues a
collective, so a histogram is of this rank's shard only and a norm is this rank's part
(the global norm is the square root of the sum of the ranks' squares). Only rank 0 has a
Run (other ranks get a DisabledRun, whose ``watch`` adds no hook), so rank 0's shard is
what is logged, unless ``all_ranks=True`` gave every rank its own run.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any

from trackmux.core.events import HistogramEvent, MetricsEvent
from trackmux.watch import binning

log = logging.getLogger("trackmux")
_lock = threading.Lock()
_watchers: list[Watcher] = []
_handle: Any = None


class Watcher:
    """One watched model of one run."""

    def __init__(self, run: Any, model: Any, what: str, every: int, bins: int) -> None:
        self.run = run
        self.model = weakref.ref(model)
        self.what = what
        self.every = every
        self.bins = bins
        self.params = {id(p) for p in model.parameters()}
        self.steps = 0
        self.logged = 0
        self._matches: weakref.WeakKeyDictionary[Any, tuple[int, bool]] = (
            weakref.WeakKeyDictionary())

    def owns(self, optimizer: Any) -> bool:
        groups = optimizer.param_groups
        known = self._matches.get(optimizer)
        if known is None or known[0] != len(groups):
            hit = any(id(p) in self.params for g in groups for p in g["params"])
            known = (len(groups), hit)
            self._matches[optimizer] = known
        return known[1]

    def stepped(self, optimizer: Any) -> None:
        if not self.owns(optimizer):
            return
        self.steps += 1
        if self.steps % self.every == 0:
            self.collect()

    def collect(self) -> None:
        """Bin every watched tensor on its device; one copy to the CPU; log."""
        import torch

        model = self.model()
        if model is None:
            return
        jobs: list[tuple[str, str, Any]] = []
        with torch.no_grad():
            for name, param in model.named_parameters():
                if self.what in ("gradients", "all") and param.grad is not None:
                    grad = binning.local(param.grad)
                    if grad.numel():
                        jobs.append(("gradients", name, binning.on_device(grad, self.bins)))
                if self.what in ("parameters", "all"):
                    data = binning.local(param)
                    if data.numel():
                        jobs.append(("parameters", name, binning.on_device(data, self.bins)))
            fetched = binning.fetch([job[2] for job in jobs])
        binned = [(kind, name, *binning.binned(values, self.bins))
                  for (kind, name, _), values in zip(jobs, fetched, strict=True)]
        self.logged += 1
        defer = getattr(self.run, "_at_next_log", None)
        attached = getattr(self.run, "log_event", None) is not None
        if defer is not None and (self.run.step >= 0 or not attached):
            # at the next log() call's step, as wandb.watch does
            defer(self, lambda step, now: self._events(binned, step, now))
            return
        # an attached worker's handle that logs no steps of its own (verl's PPO workers):
        # now, at its count of optimizer steps
        step = self.run.step if self.run.step >= 0 else self.steps
        for event in self._events(binned, step, time.time()):
            self._emit(event)

    def _events(self, binned: list[tuple[str, str, Any, float]], step: int, now: float
                ) -> list[HistogramEvent | MetricsEvent]:
        """One step's histograms, then its norms as one metrics event, at ``step``."""
        events: list[HistogramEvent | MetricsEvent] = [
            hist.event(self._key(f"{kind}/{name}"), step, now) for kind, name, hist, _ in binned]
        norms = {self._key(f"{'grad' if kind == 'gradients' else 'param'}_norm/{name}"): norm
                 for kind, name, _, norm in binned}
        if norms:
            events.append(MetricsEvent(norms, step, now))
        return events

    def _key(self, key: str) -> str:
        prefix = getattr(self.run, "_key", None)  # an attached worker's role prefix
        return prefix(key) if callable(prefix) else key

    def _emit(self, event: HistogramEvent | MetricsEvent) -> None:
        send = getattr(self.run, "log_event", None) or self.run._append
        send(event)


def _on_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    """torch calls this after every ``optimizer.step()`` of every optimizer."""
    for watcher in list(_watchers):
        try:
            watcher.stepped(optimizer)
        except Exception as exc:  # a tracker never kills training
            log.warning("trackmux: watch of %s failed and stops (%s: %s)",
                        type(watcher.model()).__name__, type(exc).__name__, exc)
            remove(watcher)


def add(watcher: Watcher) -> None:
    global _handle
    from torch.optim.optimizer import register_optimizer_step_post_hook

    with _lock:
        _watchers.append(watcher)
        if _handle is None:
            _handle = register_optimizer_step_post_hook(_on_step)


def remove(watcher: Watcher) -> None:
    global _handle
    with _lock:
        if watcher in _watchers:
            _watchers.remove(watcher)
        if not _watchers and _handle is not None:
            _handle.remove()
            _handle = None


def of(run: Any, model: Any = None) -> list[Watcher]:
    """The watchers of ``run`` (of ``model`` only, when given)."""
    return [w for w in _watchers if w.run is run and (model is None or w.model() is model)]
