"""transformers / TRL: a ``TrainerCallback`` that tracks a Trainer run through trackmux.

    from trackmux.integrations.transformers import TrackmuxCallback

    trainer = GRPOTrainer(..., args=GRPOConfig(..., report_to="none"))
    trainer.add_callback(TrackmuxCallback(trainer, backends=["wandb", "mlflow"]))
    trainer.train()

- The run opens at ``on_train_begin`` on the world's main process only
  (``state.is_world_process_zero``): project from the argument, ``TRACKMUX_PROJECT`` or
  ``args.project``; name from the argument, ``args.run_name`` or the last part of
  ``args.output_dir``; config = the model's config and ``args.to_dict()``, merged as
  transformers' own wandb callback merges them.
- Every ``on_log`` is logged at ``state.global_step`` under the Trainer's key names
  (``train/loss``, ``eval/loss``, ``train/rewards/<f>/mean``: :func:`hf_common.trainer_keys`);
  ``on_predict`` under ``test/``.
- GRPO-like TRL trainers: the completions of each logging step (prompt, response, each
  reward function's reward, advantage, group) go to the rollout ledger as
  ``run.log_samples("completions", ...)`` (``eval/completions`` during evaluation) at
  their step: the spool keeps every sample, each backend shows each step's choice, whole
  GRPO groups together (:mod:`trackmux.integrations.trl_samples`, docs/samples.md).
  The callback needs the trainer for this: pass it (``TrackmuxCallback(trainer)``, the
  idiom of TRL's own callbacks) or call :meth:`TrackmuxCallback.bind`; :func:`track`
  does both.
- The doctor acts (issue 45, docs/doctor.md): with a stop policy
  (``TrackmuxCallback(..., doctor={"stop_on": "critical"})`` or
  ``TRACKMUX_DOCTOR_STOP_ON``), at the end of the step where ``run.should_stop`` is seen
  the callback sets ``control.should_save`` and ``control.should_training_stop``: the
  Trainer writes its usual ``checkpoint-N`` and returns from ``train()``, and the run ends
  ``stopped``. Several ranks agree on it at each step end (one tiny all-reduce).
- The run finishes at ``on_train_end``; a bound trainer's ``train()`` also finishes it
  when it raises (exit code 1); unbound, trackmux's exit handler does, and a next
  ``train()`` in the same process closes a run its failed predecessor left open.
- Resume: the run's id travels in each checkpoint's ``trainer_state.json`` (the callback
  is a transformers ``ExportableState``). ``trainer.train(resume_from_checkpoint=...)``
  continues that run with ``rewind_to=<the checkpoint's global_step>``, so the steps the
  crashed attempt logged after the checkpoint are superseded on every backend. The spool
  commits while the Trainer writes each checkpoint, so the steps up to it survive a kill.

- Backends: the argument, else ``TRACKMUX_BACKENDS``, else trackmux's default without
  ``console`` while the Trainer prints its own logs (its ``PrinterCallback`` or
  ``ProgressCallback``, there unless removed): the same dict twice on the terminal says
  nothing new. The spool records everything either way; ``backends=["console", ...]`` asks
  for trackmux's line too.

transformers has no public way for a package to add a name to ``report_to`` (its
``INTEGRATION_TO_CALLBACK`` table is a module constant), so use ``report_to="none"`` (or
other names, side by side) with this callback.
"""

from __future__ import annotations

import contextlib
import functools
import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from trackmux.integrations import hf_common, trl_samples

SAMPLES_KEY = "completions"
#: Constructor options kept in a checkpoint, so transformers can rebuild the callback
#: (``restore_callback_states_from_checkpoint=True``) with the same options.
_STATE_OPTIONS = ("project", "name", "backends", "samples", "samples_key", "init_kwargs")
# A rebuilt callback finds its trainer again through the model it is handed.
_trainer_of_model: weakref.WeakKeyDictionary[Any, Callable[[], Any]] = (
    weakref.WeakKeyDictionary())


class TrackmuxCallback(TrainerCallback, ExportableState):  # type: ignore[misc]
    """Logs a transformers/TRL Trainer run to trackmux (see the module docstring).

    ``trainer``: the Trainer, for TRL's completions and to finish the run when ``train()``
    raises (optional). ``project``/``name``/``backends``: as :func:`trackmux.init` (None
    takes ``TRACKMUX_PROJECT``/``args.project``, ``args.run_name``, ``TRACKMUX_BACKENDS``).
    ``samples``: log the completions of GRPO-like TRL trainers at each logging step
    (None, the default: when the bound trainer keeps them; True: also warn when it cannot;
    False: never). ``init_kwargs``: more
    :func:`trackmux.init` arguments (``dir``, ``backend_options``, ``tags``, ``timeout``,
    ``delivery``, ``system_metrics``, ...).
    """

    def __init__(self, trainer: Any = None, *, project: str | None = None,
                 name: str | None = None, backends: Sequence[str] | str | None = None,
                 samples: bool | None = None, samples_key: str = SAMPLES_KEY,
                 init_kwargs: Mapping[str, Any] | None = None, **more_init_kwargs: Any) -> None:
        self.project = project
        self.name = name
        self.backends = backends if backends is None or isinstance(backends, str) \
            else list(backends)
        self.samples = samples
        self.samples_key = samples_key
        self.init_kwargs: dict[str, Any] = {**(init_kwargs or {}), **more_init_kwargs}
        for reserved in ("project", "name", "backends", "config", "all_ranks"):
            if reserved in self.init_kwargs:
                raise TypeError(f"TrackmuxCallback: pass {reserved!r} as its own argument, "
                                "not in init_kwargs")
        self.run: Any = None
        #: what the checkpoint keeps to continue the run (see ``state``)
        self.trackmux_run: dict[str, Any] | None = None
        self._trainer: Callable[[], Any] | None = None
        self._last_batch: tuple[str, ...] | None = None
        #: whether a stop policy is set (then every rank checks the flag at each step end)
        self._stopping = False
        if trainer is not None:
            self.bind(trainer)

    # -- the trainer ---------------------------------------------------------------
    def bind(self, trainer: Any) -> TrackmuxCallback:
        """Give the callback its trainer: for TRL's completions, and so that an exception
        out of ``trainer.train()`` finishes the run (the instance's ``train`` is wrapped)."""
        self._trainer = weakref.ref(trainer)
        model = getattr(trainer, "model", None)
        if model is not None:
            with contextlib.suppress(TypeError):  # a model that cannot be weakly referenced
                _trainer_of_model[model] = self._trainer
        train = trainer.train
        if not getattr(train, "_trackmux_wrapped", False):
            trainer.train = _finishing_on_error(train, trainer)
        return self

    @property
    def trainer(self) -> Any:
        """The bound trainer, or None."""
        return self._trainer() if self._trainer is not None else None

    # -- ExportableState: the run id in every checkpoint ----------------------------
    def state(self) -> dict[str, Any]:
        """What the Trainer writes into the checkpoint it is saving; the spool commits
        first, so the checkpoint never holds steps a kill could still take from it
        (:mod:`trackmux.integrations.checkpoints`)."""
        if self.run is not None:
            from trackmux.integrations.checkpoints import commit

            commit([self.run])
        args = {k: getattr(self, k) for k in _STATE_OPTIONS}
        return {"args": _json_safe(args), "attributes": {"trackmux_run": self.trackmux_run}}

    # -- events ----------------------------------------------------------------------
    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None,
                       **kwargs: Any) -> None:
        # transformers writes every ExportableState into the checkpoint under its class
        # name and fails when a checkpoint made without this callback lacks the entry.
        stateful = getattr(state, "stateful_callbacks", None)
        if isinstance(stateful, dict):
            record = _recorded(stateful.get(type(self).__name__))
            stateful.setdefault(type(self).__name__, self.state())
        else:
            record = None
        from trackmux.integrations import stopping

        self._stopping = stopping.configured(self.init_kwargs.get("doctor"))
        if not state.is_world_process_zero:
            return
        if self._trainer is None and model is not None:
            self._trainer = _trainer_of_model.get(model)
        if self.run is not None:  # an earlier train() in this process raised
            self.finish(exit_code=1)
        self._open(args, state, model, record)

    def on_log(self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None,
               model: Any = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or not logs or not self._ensure_run(args, state,
                                                                                 model):
            return
        step = int(state.global_step)
        hf_common.log_metrics(self.run, hf_common.trainer_keys(logs), step, "Trainer")
        if self._samples_on(args):
            evaluating = any(key.startswith("eval_") for key in logs)
            self._log_samples(step, "eval/" + self.samples_key if evaluating
                              else self.samples_key, args)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """The step boundary: when the doctor asked the run to stop, have the Trainer save
        ``checkpoint-N`` now and leave ``train()``. Never raises into the loop."""
        if not self._stopping:
            return
        from trackmux.integrations import stopping

        try:
            wanted = stopping.wanted(self.run)
            if int(getattr(args, "world_size", 1) or 1) > 1:
                wanted = stopping.agree(wanted, getattr(args, "device", None))
        except Exception as exc:  # tracking never breaks training
            hf_common.warn_once("stop", "trackmux: cannot share the doctor's stop between "
                                "ranks (%s); training goes on", exc)
            return
        if not wanted or control.should_training_stop:
            return
        control.should_save = True
        control.should_training_stop = True
        if self.run is not None:
            stopping.say_stopping(self.run, "the Trainer", int(state.global_step))

    def on_predict(self, args: Any, state: Any, control: Any,
                   metrics: Mapping[str, Any] | None = None, model: Any = None,
                   **kwargs: Any) -> None:
        if not state.is_world_process_zero or not metrics or not self._ensure_run(args, state,
                                                                                    model):
            return
        hf_common.log_metrics(self.run, hf_common.trainer_keys(metrics),
                              int(state.global_step), "Trainer")

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            self.finish()

    def finish(self, exit_code: int = 0) -> Any:
        """Finish the run (within trackmux's finish timeout); later calls do nothing."""
        run, self.run = self.run, None
        self._last_batch = None
        return run.finish(exit_code=exit_code) if run is not None else None

    # -- internals -------------------------------------------------------------------
    def _ensure_run(self, args: Any, state: Any, model: Any) -> bool:
        """The run for a log outside ``train()`` (``trainer.evaluate()`` before or after
        it, ``predict``): after training, the finished run continues (one attempt more, no
        rewind); before any training, a run opens as at train begin."""
        if self.run is not None:
            return True
        try:
            if self.trackmux_run is not None:
                import trackmux

                record = self.trackmux_run
                self.run = trackmux.init(
                    project=record["project"], backends=self._backends(), all_ranks=True,
                    **{**self.init_kwargs, "run_id": record["run_id"], "resume": "allow",
                       "dir": record["root"]})
            else:
                self._open(args, state, model, None)
        except Exception as exc:  # logging outside train() must not break evaluate()
            hf_common.warn_once("reopen", "trackmux: cannot open the run to log outside "
                                "train(): %s", exc)
            return False
        return True

    def _open(self, args: Any, state: Any, model: Any, record: Mapping[str, Any] | None
              ) -> None:
        import trackmux

        project = (self.project or os.environ.get("TRACKMUX_PROJECT")
                   or getattr(args, "project", None) or "huggingface")
        name = self.name or run_name(args)
        config = trainer_config(args, model)
        step = int(state.global_step)
        resume = hf_common.resume_options(record, project, step) if step > 0 else {}
        if step > 0 and not resume:
            hf_common.warn_once("resume:" + project, "trackmux: the Trainer resumes at step "
                                "%s, but its checkpoint names no trackmux run of project %r; "
                                "starting a new run", step, project)
        options = {**self.init_kwargs, **resume}

        def start(**extra: Any) -> Any:
            return trackmux.init(project=project, name=name, backends=self._backends(),
                                 config=config, all_ranks=True, **{**options, **extra})

        try:
            self.run = start()
        except trackmux.SpoolLockedError as exc:  # the recorded run is live elsewhere
            hf_common.warn_once("locked", "trackmux: cannot continue the recorded run: %s; "
                                "starting a new run", exc)
            self.run = start(run_id=None, resume="never", rewind_to=None)
        self.trackmux_run = hf_common.record_of(self.run)
        if isinstance(getattr(state, "stateful_callbacks", None), dict):
            state.stateful_callbacks[type(self).__name__] = self.state()

    def _backends(self) -> Sequence[str] | str | None:
        """The backends asked for, else the default without ``console`` while the Trainer
        prints its logs (module docstring)."""
        if self.backends is not None or os.environ.get("TRACKMUX_BACKENDS") is not None:
            return self.backends
        from trackmux.core import settings

        default = list(settings.DEFAULT_BACKENDS)
        if "console" in default and trainer_prints(self.trainer):
            default.remove("console")
            hf_common.log.info("trackmux: the Trainer prints its logs; trackmux's console "
                               "backend is left out of the default backends (%s); pass "
                               "backends=[...] to choose", ", ".join(default) or "spool only")
        return default

    def _samples_on(self, args: Any) -> bool:
        return self.samples is not False

    def _log_samples(self, step: int, key: str, args: Any) -> None:
        trainer = self.trainer
        if trainer is None:
            # Only a TRL config with completions (GRPOConfig, RLOOConfig) makes this a loss.
            if self.samples or hasattr(args, "log_completions"):
                hf_common.warn_once("unbound", "trackmux: completions are not logged: the "
                                    "callback has no trainer (TrackmuxCallback(trainer), "
                                    "callback.bind(trainer) or track(trainer))")
            return
        samples = trl_samples.grpo_samples(trainer)
        if samples is None:
            if self.samples and getattr(trainer, "_logs", None) is None:
                hf_common.warn_once("no-samples", "trackmux: %s keeps no completions "
                                    "TRL-style; none are logged", type(trainer).__name__)
            return
        batch = tuple(samples["response"]) + tuple(samples["prompt"])
        if batch == self._last_batch:  # the same generation batch as the last logging step
            return
        self._last_batch = batch
        hf_common.log_samples(self.run, key, samples, step)


def track(trainer: Any, **options: Any) -> TrackmuxCallback:
    """Track ``trainer`` with trackmux: binds the callback already in its callback list
    (e.g. one passed as ``callbacks=[TrackmuxCallback()]``) or adds a new one with
    ``options``; returns it."""
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TrackmuxCallback):
            return callback.bind(trainer)
    callback = TrackmuxCallback(trainer, **options)
    trainer.add_callback(callback)
    return callback


def trainer_prints(trainer: Any) -> bool:
    """Whether ``trainer`` prints each log dict itself (transformers' ``PrinterCallback``, or
    ``ProgressCallback`` writing under its bar). Unknown (no trainer bound): it does, as
    every Trainer adds one of the two."""
    if trainer is None:
        return True
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    handler = getattr(trainer, "callback_handler", None)
    callbacks = getattr(handler, "callbacks", None)
    if callbacks is None:
        return True
    return any(isinstance(c, (PrinterCallback, ProgressCallback)) for c in callbacks)


def run_name(args: Any) -> str | None:
    """``args.run_name``, else the last part of ``args.output_dir``."""
    if getattr(args, "run_name", None):
        return str(args.run_name)
    output_dir = getattr(args, "output_dir", None)
    if output_dir:
        return os.path.basename(os.path.normpath(str(output_dir))) or None
    return None


def trainer_config(args: Any, model: Any) -> dict[str, Any]:
    """The model's config and the whole TrainingArguments, merged as transformers' wandb
    callback merges them (arguments win), plus ``model/num_parameters``."""
    config: dict[str, Any] = {}
    model_config = getattr(model, "config", None)
    if model_config is not None:
        config.update(model_config if isinstance(model_config, dict)
                      else model_config.to_dict())
    config.update(args.to_dict())
    with contextlib.suppress(AttributeError, TypeError):
        config["model/num_parameters"] = int(model.num_parameters())
    return config


def _recorded(entry: Any) -> dict[str, Any] | None:
    """The run record in a checkpoint's ``stateful_callbacks`` entry for this class."""
    if isinstance(entry, list):
        entry = next((e for e in entry if _recorded(e)), None)
    if not isinstance(entry, Mapping):
        return None
    record = (entry.get("attributes") or {}).get("trackmux_run")
    return dict(record) if isinstance(record, Mapping) else None


def _json_safe(values: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``values`` that ``json.dumps`` keeps as they are (trainer_state.json
    must always be writable)."""
    import json

    out: dict[str, Any] = {}
    for key, value in values.items():
        try:
            if json.loads(json.dumps(value)) == value:
                out[key] = value
        except (TypeError, ValueError):
            continue
    return out


def _finishing_on_error(train: Callable[..., Any], trainer: Any) -> Callable[..., Any]:
    """``trainer.train`` that finishes the trackmux run (exit code 1) when it raises."""

    @functools.wraps(train)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return train(*args, **kwargs)
        except BaseException:
            for callback in trainer.callback_handler.callbacks:
                if isinstance(callback, TrackmuxCallback):
                    try:
                        callback.finish(exit_code=1)
                    except Exception:  # the training error is the one to see
                        hf_common.log.exception("trackmux: finishing the run failed")
            raise

    wrapped._trackmux_wrapped = True  # type: ignore[attr-defined]
    return wrapped
