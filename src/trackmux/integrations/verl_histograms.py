"""verl's reward, advantage and length batches as histograms, not only mean/min/max.

verl's PPO trainer reduces each batch in ``compute_data_metrics`` (``critic/score/mean``,
``critic/advantages/max``, ``response_length/min``, ...). With ``+trainer.trackmux.
histograms=true`` the drop-in wraps that function: the wrapper returns verl's own metrics
unchanged and keeps the batch's distributions; the next ``Tracking.log(data, step)`` logs
them as histograms at that step, binned in the trainer's thread like any
``log_histogram``. Keys (``/hist`` keeps them apart from verl's own scalars):

- ``critic/score/hist``: sequence scores (``token_level_scores`` summed per sequence);
- ``critic/rewards/hist``: sequence rewards (``token_level_rewards`` summed);
- ``critic/advantages/hist``: advantages of every valid response token;
- ``response_length/hist`` and ``prompt_length/hist``: tokens per sequence.

Code that drives its own loop can call :func:`log_batch_histograms` directly.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

log = logging.getLogger("trackmux.verl")

METRIC_MODULE = "verl.trainer.ppo.metric_utils"
#: modules that import ``compute_data_metrics`` by name (patched too when loaded)
USERS = ("verl.trainer.ppo.ray_trainer", "verl.trainer.ppo.v1.trainer_base",
         "verl.experimental.fully_async_policy.fully_async_trainer",
         "verl.experimental.separation.ray_trainer",
         "verl.experimental.one_step_off_policy.ray_trainer")

_original: Any = None
_pending: dict[str, Any] = {}
_histograms_on = False
#: other consumers of each reduced batch (verl_samples): called with the batch
_listeners: list[Any] = []


def batch_distributions(batch: Any) -> dict[str, Any]:
    """The per-sequence (or per-token) tensors behind verl's reduced batch metrics, chosen
    as verl 0.9.1 chooses them: scores and rewards of sequences with a response (verl
    leaves aborted, empty ones out), advantages of valid response tokens, lengths from
    ``prompt_length``/``response_length`` when the batch has them, else the masks."""
    import torch

    tensors = batch.batch
    keys = set(tensors.keys())
    if "responses" not in keys or "attention_mask" not in keys:
        return {}
    width = tensors["responses"].shape[-1]
    attention = tensors["attention_mask"]
    response_mask = (tensors["response_mask"] if "response_mask" in keys
                     else attention[:, -width:]).bool()
    if "prompt_length" in keys and "response_length" in keys:
        prompt_length, response_length = tensors["prompt_length"], tensors["response_length"]
    else:
        prompt_length = attention[:, :-width].sum(-1).float()
        response_length = attention[:, -width:].sum(-1).float()
    answered = response_length != 0
    out: dict[str, Any] = {}
    if "token_level_scores" in keys:
        out["critic/score/hist"] = tensors["token_level_scores"].sum(-1)[answered]
    if "token_level_rewards" in keys:
        out["critic/rewards/hist"] = tensors["token_level_rewards"].sum(-1)[answered]
    if "advantages" in keys:
        out["critic/advantages/hist"] = torch.masked_select(tensors["advantages"],
                                                            response_mask)
    out["response_length/hist"] = response_length
    out["prompt_length/hist"] = prompt_length
    return out


def log_batch_histograms(run: Any, batch: Any, step: int, bins: int = 64) -> None:
    """Log a verl ``DataProto``'s distributions as histograms on ``run`` at ``step``."""
    for key, values in batch_distributions(batch).items():
        if values.numel():
            run.log_histogram(key, values, step=step, bins=bins)


def take_pending() -> dict[str, Any]:
    """The distributions kept since the last call (the drop-in logs them at its step)."""
    found = dict(_pending)
    _pending.clear()
    return found


def _wrapped(batch: Any, *args: Any, **kwargs: Any) -> Any:
    metrics = _original(batch, *args, **kwargs)
    try:
        if _histograms_on:
            _pending.update(batch_distributions(batch))
        for listener in _listeners:
            listener(batch)
    except Exception as exc:  # never break verl's metric reduction
        log.warning("trackmux: cannot take histograms or samples from this batch: %s", exc)
    return metrics


def add_listener(listener: Any) -> bool:
    """Also hand each reduced batch to ``listener`` (the samples hook); wraps verl's
    function if needed without switching histograms on. False if it cannot be wrapped."""
    if listener not in _listeners:
        _listeners.append(listener)
    return _wrap()


def remove_listener(listener: Any) -> None:
    if listener in _listeners:
        _listeners.remove(listener)
    if not _listeners and not _histograms_on:
        unpatch()


def patch() -> bool:
    """Wrap verl's ``compute_data_metrics`` and keep histograms (idempotent). False if
    verl's PPO metrics module cannot be imported (e.g. the SFT trainer's environment)."""
    global _histograms_on
    _histograms_on = _wrap()
    return _histograms_on


def _wrap() -> bool:
    global _original
    if _original is not None:
        return True
    try:
        import importlib

        module: Any = importlib.import_module(METRIC_MODULE)
    except Exception as exc:
        log.info("trackmux: verl histograms not available: %s", exc)
        return False
    _original = module.compute_data_metrics
    module.compute_data_metrics = _wrapped
    for name in USERS:
        user: Any = sys.modules.get(name)
        if user is not None and getattr(user, "compute_data_metrics", None) is _original:
            user.compute_data_metrics = _wrapped
    return True


def unpatch() -> None:
    global _original, _histograms_on
    _histograms_on = False
    if _original is None:
        return
    for name in (METRIC_MODULE, *USERS):
        loaded: Any = sys.modules.get(name)
        if loaded is not None and getattr(loaded, "compute_data_metrics", None) is _wrapped:
            loaded.compute_data_metrics = _original
    _original = None
    _pending.clear()
