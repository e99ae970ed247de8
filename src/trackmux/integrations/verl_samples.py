"""verl's rollout batch of each step as samples (``+trainer.trackmux.samples=N``).

The hook point is the one of ``verl_histograms``: verl's PPO trainer reduces each step's
batch in ``compute_data_metrics``; the wrapper hands the batch to this module, which keeps
at most ``N`` samples of it (whole ``uid`` groups, spread over the batch), and the next
``Tracking.log(data, step)`` logs them with ``run.log_samples("rollout/samples", ...)`` at
that step. Columns (those the batch holds):

- ``prompt``, ``response``: decoded with the trainer's tokenizer (found as the ``self`` of
  the method that built ``Tracking``, as verl's trainers do in ``fit``; or
  :func:`set_tokenizer`), the response up to its length;
- ``score`` and ``reward``: ``token_level_scores`` / ``token_level_rewards`` summed;
- ``reward/<name>``: every reward component the reward manager returned
  (``meta_info["reward_extra_keys"]``, one value per sample);
- ``advantage`` (mean over the response), ``response_length``, ``uid`` (the GRPO
  group), ``data_source``, ``policy_version`` (the step);
- token arrays: ``token`` (each response token's text), and ``old_log_probs``,
  ``ref_log_prob``, ``rollout_log_probs``, ``entropys``, ``advantages`` when present.

Multi-turn and agent-loop rollouts (``__num_turns__`` in the batch) also get
``num_turns`` and ``messages``: each trajectory as a conversation with its tool calls
(integrations/verl_trajectories.py), shown by the conversation view and read by the
doctor's trajectory rules.

Validation generations (``trainer.log_val_generations``) are logged as samples too, under
``val/generations`` (prompt, response, score). Decoding runs in the trainer's thread, for
the chosen samples only.
"""

from __future__ import annotations

import inspect
import logging
import weakref
from typing import Any

log = logging.getLogger("trackmux.verl")

KEY = "rollout/samples"
TOKEN_ARRAYS = ("old_log_probs", "ref_log_prob", "rollout_log_probs", "entropys", "advantages")

_pending: list[tuple[Any, Any]] = []  # (batch, tokenizer) kept until the next log
_tokenizer: Any = None
_budget: int | None = None
_warned: set[str] = set()


def check_budget(value: Any) -> int | None:
    """``trainer.trackmux.samples``: false/0 (off), true (every sample) or a count."""
    if value is False or value is None or value == 0:
        return None
    if value is True:
        return 0  # no cap
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError("trainer.trackmux.samples must be true, false or a number of samples "
                        f"per step, got {value!r}")
    return value


def set_tokenizer(tokenizer: Any) -> None:
    """The tokenizer that decodes prompts and responses (found by itself in verl)."""
    global _tokenizer
    try:
        _tokenizer = weakref.proxy(tokenizer)
    except TypeError:
        _tokenizer = tokenizer


def find_tokenizer(depth: int = 6) -> None:
    """Take the tokenizer of the trainer that is building ``Tracking`` (its ``self``)."""
    frame = inspect.currentframe()
    try:
        for _ in range(depth):
            frame = frame.f_back if frame is not None else None
            if frame is None:
                return
            owner = frame.f_locals.get("self")
            tokenizer = getattr(owner, "tokenizer", None)
            if tokenizer is not None and hasattr(tokenizer, "batch_decode"):
                set_tokenizer(tokenizer)
                return
    finally:
        del frame


def enable(budget: int | None) -> bool:
    """Start keeping batches (idempotent); False if verl's PPO metrics cannot be hooked."""
    global _budget
    from trackmux.integrations import verl_histograms

    _budget = budget
    return verl_histograms.add_listener(keep_batch)


def disable() -> None:
    from trackmux.integrations import verl_histograms

    verl_histograms.remove_listener(keep_batch)
    _pending.clear()


def keep_batch(batch: Any) -> None:
    _pending.clear()
    _pending.append((batch, _tokenizer))


def take_pending() -> list[tuple[Any, Any]]:
    found = list(_pending)
    _pending.clear()
    return found


def chosen_rows(groups: list[Any], budget: int | None) -> list[int]:
    """Whole groups, spread evenly over the batch, up to ``budget`` samples (None/0: all)."""
    n = len(groups)
    if not budget or n <= budget:
        return list(range(n))
    members: dict[Any, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    units = list(members.values())
    count = max(1, budget // max(1, len(units[0])))
    if count >= len(units):
        picks = units
    else:
        at = sorted({round(k * (len(units) - 1) / max(count - 1, 1)) for k in range(count)})
        picks = [units[k] for k in at]
    return sorted(i for unit in picks for i in unit)[:budget]


def batch_samples(batch: Any, tokenizer: Any, budget: int | None,
                  step: int) -> tuple[dict[str, Any], dict[str, Any], list[int]]:
    """(columns, token arrays, token lengths) of the chosen samples of a verl DataProto."""
    import torch

    tensors = batch.batch
    keys = set(tensors.keys())
    extra = batch.non_tensor_batch
    size = len(batch)
    uids = list(extra["uid"]) if "uid" in extra else list(range(size))
    rows = chosen_rows(uids, budget)
    index = torch.as_tensor(rows, dtype=torch.long)
    responses = tensors["responses"][index] if "responses" in keys else None
    width = responses.shape[-1] if responses is not None else 0
    if "response_mask" in keys:
        mask = tensors["response_mask"][index].bool()
    elif "attention_mask" in keys and width:
        mask = tensors["attention_mask"][index][:, -width:].bool()
    else:
        mask = None
    lengths = mask.sum(-1).tolist() if mask is not None else [width] * len(rows)
    multi_turn = "__num_turns__" in extra
    if multi_turn and "attention_mask" in keys and width:
        # agent loop / multi-turn: tool replies sit between the model's turns with a
        # response_mask of 0, so the response is as long as its attention mask says
        lengths = tensors["attention_mask"][index][:, -width:].sum(-1).tolist()
    cols: dict[str, Any] = {}
    if tokenizer is not None and "prompts" in keys and responses is not None:
        cols["prompt"] = tokenizer.batch_decode(tensors["prompts"][index],
                                                skip_special_tokens=True)
        ids = [responses[i, :n].tolist() for i, n in enumerate(lengths)]
        cols["response"] = tokenizer.batch_decode(ids, skip_special_tokens=True)
    elif "no-tokenizer" not in _warned:
        _warned.add("no-tokenizer")
        log.warning("trackmux: verl samples are logged without text: no tokenizer was found "
                    "(call trackmux.integrations.verl_samples.set_tokenizer)")
    for name, tensor_key in (("score", "token_level_scores"), ("reward", "token_level_rewards")):
        if tensor_key in keys:
            cols[name] = tensors[tensor_key][index].float().sum(-1)
    for name in batch.meta_info.get("reward_extra_keys", []) or []:
        values = extra.get(name)
        if values is not None and len(values) == size:
            cols[f"reward/{name}"] = [_plain(values[i]) for i in rows]
    if "advantages" in keys and mask is not None:
        adv = tensors["advantages"][index].float()
        cols["advantage"] = (adv * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    cols["response_length"] = lengths
    if multi_turn:
        cols["num_turns"] = [int(extra["__num_turns__"][i]) for i in rows]
        if tokenizer is not None and responses is not None and mask is not None:
            from trackmux.integrations.verl_trajectories import batch_conversations

            raw = extra.get("raw_prompt")
            cols["messages"] = batch_conversations(
                tokenizer, responses, mask, lengths,
                [raw[i] for i in rows] if raw is not None else None, cols.get("prompt"))
    if "uid" in extra:
        cols["uid"] = [str(uids[i]) for i in rows]
    if "data_source" in extra:
        cols["data_source"] = [str(extra["data_source"][i]) for i in rows]
    cols["policy_version"] = [step] * len(rows)
    arrays: dict[str, Any] = {}
    if tokenizer is not None and responses is not None:
        arrays["token"] = [tokenizer.batch_decode([[t] for t in responses[i, :n].tolist()])
                           for i, n in enumerate(lengths)]
    for name in TOKEN_ARRAYS:
        if name in keys and tensors[name].shape[-1] == width:
            arrays[name] = tensors[name][index]
    return cols, arrays, lengths


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def log_pending(run: Any, step: int) -> None:
    """Log the batch kept since the last call as samples at ``step`` (from Tracking.log)."""
    for batch, tokenizer in take_pending():
        try:
            cols, arrays, lengths = batch_samples(batch, tokenizer, _budget, step)
            run.log_samples(KEY, cols, step=step, tokens=arrays, token_lengths=lengths)
        except Exception as exc:  # never break verl's step
            if "batch" not in _warned:
                _warned.add("batch")
                log.warning("trackmux: cannot log this verl batch as samples: %s: %s",
                            type(exc).__name__, exc)
