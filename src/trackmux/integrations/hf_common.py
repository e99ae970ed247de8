"""What the Hugging Face integrations (transformers/TRL callback, accelerate tracker) share.

- :func:`trainer_keys`: the Trainer's metric names as transformers' own wandb callback
  writes them (``eval_loss`` -> ``eval/loss``, ``test_x`` -> ``test/x``, the rest under
  ``train/``), so a trackmux run shows the keys people already know from ``report_to``.
- :func:`log_metrics`: ``run.log`` that never stops training: values trackmux cannot keep
  are dropped, each key named once (``None`` is TRL's "no value this step" and is skipped
  silently).
- :func:`log_samples`: one batch of samples at a step into the run's rollout ledger
  (``run.log_samples``, docs/samples.md), never stopping training.
- :func:`record_of` / :func:`resume_options`: the small record that lets a restarted
  trainer continue its trackmux run, rewound to the checkpoint's step.

No framework is imported here: the module stays importable without transformers,
TRL or accelerate.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("trackmux.hf")

_warned: set[str] = set()


def warn_once(tag: str, message: str, *args: Any) -> None:
    """Log ``message`` at WARNING the first time ``tag`` is seen in this process."""
    if tag not in _warned:
        _warned.add(tag)
        log.warning(message, *args)


def trainer_keys(logs: Mapping[str, Any]) -> dict[str, Any]:
    """The Trainer's log dict under transformers' wandb/trackio key names.

    ``eval_*`` becomes ``eval/*``, ``test_*`` becomes ``test/*`` and every other key goes
    under ``train/`` (``loss`` -> ``train/loss``, ``rewards/f/mean`` ->
    ``train/rewards/f/mean``), as ``transformers.integrations.integration_utils.rewrite_logs``
    names them."""
    out: dict[str, Any] = {}
    for key, value in logs.items():
        if key.startswith("eval_"):
            out["eval/" + key[5:]] = value
        elif key.startswith("test_"):
            out["test/" + key[5:]] = value
        else:
            out["train/" + key] = value
    return out


def log_metrics(run: Any, data: Mapping[str, Any], step: int, source: str) -> None:
    """``run.log(data, step)``; a value trackmux refuses is dropped and named once, the
    rest of the call arrives. ``source`` names the integration in the message."""
    from trackmux.core.errors import RunFinishedError

    clean = {k: v for k, v in data.items() if v is not None}
    if not clean:
        return
    try:
        run.log(clean, step=step)
        return
    except RunFinishedError as exc:  # e.g. finished by SIGTERM's handler; training goes on
        warn_once(f"{source}:finished", "trackmux: %s metrics not logged: %s", source, exc)
        return
    except (TypeError, ValueError):
        pass
    from trackmux.core.values.normalize import normalize_metrics

    kept: dict[str, Any] = {}
    for key, value in clean.items():
        try:
            kept.update(normalize_metrics({key: value}))
        except (TypeError, ValueError) as exc:
            warn_once(f"{source}:{key!r}", "trackmux: %s metric dropped: %s", source, exc)
    if kept:
        run.log(kept, step=step)


def log_samples(run: Any, key: str, samples: Mapping[str, list[Any]], step: int) -> None:
    """``run.log_samples(key, samples, step)``: one batch (columns of equal length) into
    the rollout ledger, which keeps every sample and shows each backend its capped choice,
    whole GRPO groups together (docs/samples.md). ``log_samples`` already drops and names
    bad cells; a run finished under the trainer (e.g. by SIGTERM's handler) is named once
    here and training goes on."""
    from trackmux.core.errors import RunFinishedError

    try:
        run.log_samples(key, dict(samples), step=step)
    except RunFinishedError as exc:
        warn_once(f"samples:{key}", "trackmux: samples %r at step %s not logged: %s",
                  key, step, exc)


# -- resume ------------------------------------------------------------------------------
def record_of(run: Any) -> dict[str, Any] | None:
    """What a checkpoint keeps to continue ``run`` later: its id, project and spool root."""
    if run is None or not hasattr(run, "dir"):
        return None
    return {"run_id": run.id, "project": run.project, "root": str(run.dir.parent.parent)}


def resume_options(record: Mapping[str, Any] | None, project: str, step: int) -> dict[str, Any]:
    """``trackmux.init`` arguments continuing the recorded run, rewound to ``step`` (the
    checkpoint's step: what the crashed attempt logged after it is superseded); {} when
    there is nothing to continue (no record, or one of another project)."""
    if not record or not record.get("run_id") or record.get("project") != project:
        return {}
    from trackmux.core import settings
    from trackmux.core.spool import attempts

    out: dict[str, Any] = {"run_id": str(record["run_id"]), "resume": "allow"}
    root = record.get("root")
    if root:
        out["dir"] = str(root)
    run_dir = attempts.run_dir_of(settings.spool_root(root), project, out["run_id"])
    last = attempts.run_last_step(run_dir)
    if last >= 0 and step >= 0:
        out["rewind_to"] = min(step, last)  # the spool may end before the checkpoint
    return out
