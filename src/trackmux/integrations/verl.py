"""The verl drop-in: verl's ``Tracking`` and ``ValidationGenerationsLogger``, backed by trackmux.

verl loads every ``verl.plugins`` entry point on ``import verl`` (unless
``VERL_USE_EXTERNAL_PLUGINS=none``). Loading this module replaces the two classes in
``verl.utils.tracking`` (the classes, not the module: other names there are used
elsewhere), so every trainer that imports them afterwards gets these.

- ``trainer.logger`` names: every trackmux backend (console, file, wandb, mlflow, swanlab,
  tensorboard, trackio, clearml, vemlp_wandb, third-party ones); ``tracking`` is verl's
  deprecated alias of wandb. The one verl name trackmux has no backend for,
  ``rl_insight`` (a runtime monitor fed from inside verl's workers), is handed to verl's
  own ``Tracking`` while the trackmux run still spools every event. Any other name raises
  :class:`trackmux.UnknownBackendError` before anything is created.
- Environment variables are read by the backends as verl reads them (``WANDB_ENTITY``,
  ``MLFLOW_TRACKING_URI``, ``MLFLOW_RUN_ID``, ``SWANLAB_*``, ``TENSORBOARD_DIR``,
  ``VERL_FILE_LOGGER_*``); ``trainer.wandb_proxy`` becomes the wandb ``proxy`` option.
  Where none is set, verl's own default locations apply (:func:`verl_locations`), not
  trackmux's (everything in the trackmux dir), so existing scripts find their output.
- trackmux's own options come from ``trainer.trackmux`` in verl's config (see
  :data:`OPTIONS` and docs/verl.md).
- When verl resumes from ``global_step_N``, the trackmux run recorded beside the checkpoints
  continues with ``rewind_to=N`` (:mod:`trackmux.integrations.verl_resume`); the steps up
  to a checkpoint are committed to the spool before verl writes it
  (:mod:`trackmux.integrations.verl_checkpoints`).
- With the doctor's ``stop_on`` (``+trainer.trackmux.doctor.stop_on=critical``), a run the
  doctor asks to stop has verl save its checkpoint and leave ``fit()`` at a step boundary
  (:mod:`trackmux.integrations.verl_stop`).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import warnings
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

log = logging.getLogger("trackmux.verl")

#: What verl 0.9.1's Tracking accepts in ``trainer.logger``.
VERL_BACKENDS = ("wandb", "mlflow", "swanlab", "vemlp_wandb", "tensorboard", "console",
                 "clearml", "trackio", "file", "rl_insight")
ALIASES = {"tracking": "wandb"}
#: ``+trainer.trackmux.<option>``: passed to :func:`trackmux.init` under these names.
OPTIONS = {
    "dir": "dir",
    "durability": "durability",
    "backend_options": "backend_options",
    "timeout": "timeout",
    "finish_timeout": "timeout",
    "tags": "tags",
    "max_spool_bytes": "max_spool_bytes",
    "delivery": "delivery",
    "orphan_timeout": "orphan_timeout",
    "system_metrics": "system_metrics",
    "histograms": "histograms",  # not an init() argument: the drop-in's own switch
    "watch": "watch",  # issue 25, the drop-in's own: watch the actor/critic (verl_watch.py)
    "watch_every": "watch_every",
    "provenance": "provenance",
    "save_code": "save_code",
    "doctor": "doctor",  # off, on, rule overrides or a rules file (docs/doctor.md)
    "samples": "samples",  # the drop-in's too: rollout samples per step (verl_samples)
}
GENERATIONS_KEY = "val/generations"
GENERATIONS_COLUMNS = ("step", "input", "output", "score")
# Trainer modules that may hold the classes by name if they were imported before us.
_TRAINER_MODULES = (
    "verl.trainer.sft_trainer", "verl.trainer.sft_trainer_ray", "verl.trainer.ppo.ray_trainer",
    "verl.trainer.ppo.v1.trainer_base", "verl.experimental.fully_async_policy.fully_async_trainer",
    "verl.experimental.fully_async_policy.fully_async_rollouter",
    "verl.experimental.separation.ray_trainer", "verl.experimental.one_step_off_policy.ray_trainer",
)

_originals: dict[str, Any] = {}
_live: list[weakref.ref[Tracking]] = []
_warned: set[str] = set()


def _has_stop_policy(trainer: Any) -> bool:
    """Whether a verl trainer's config sets ``trainer.trackmux.doctor.stop_on``."""
    from trackmux.integrations import stopping

    try:
        options = (plain_config(trainer.config).get("trainer") or {}).get("trackmux") or {}
    except Exception:
        options = {}
    return stopping.configured(options.get("doctor") if isinstance(options, dict) else None)


def _live_runs() -> list[Any]:
    """The runs of the drop-in's Trackings that are not finished yet."""
    trackings = [ref() for ref in _live]
    return [t.run for t in trackings if t is not None and not t._finished]


def plain_config(config: Any) -> dict[str, Any]:
    """verl's config as plain containers (an OmegaConf DictConfig is resolved)."""
    if config is None:
        return {}
    if type(config).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        config = OmegaConf.to_container(config, resolve=True)
    if not isinstance(config, Mapping):
        raise TypeError(f"verl Tracking config must be a mapping, got {type(config).__name__}")
    return dict(config)


def trackmux_options(config: Mapping[str, Any]) -> dict[str, Any]:
    """``trainer.trackmux`` as :func:`trackmux.init` keyword arguments; unknown keys fail."""
    trainer = config.get("trainer") or {}
    raw = trainer.get("trackmux") if isinstance(trainer, Mapping) else None
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise TypeError(f"trainer.trackmux must be a mapping of options, got "
                        f"{type(raw).__name__}")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in OPTIONS:
            raise ValueError(f"unknown option trainer.trackmux.{key}; valid options: "
                             f"{', '.join(sorted(OPTIONS))}")
        if key == "backend_options" and not isinstance(value, Mapping):
            raise TypeError("trainer.trackmux.backend_options must map backend names to "
                            f"option mappings, got {type(value).__name__}")
        if value is not None:
            out[OPTIONS[key]] = value
    return out


def split_backends(names: Sequence[str] | str | None) -> tuple[list[str], list[str]]:
    """``trainer.logger`` as (trackmux backends, names left to verl's own Tracking).

    Raises :class:`trackmux.UnknownBackendError` for a name neither provides."""
    from trackmux.core.backends.registry import get_registry

    if names is None:
        names = ["console"]
    if isinstance(names, str):
        names = [names]
    registry = get_registry()
    ours: list[str] = []
    theirs: list[str] = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"trainer.logger must hold backend names, got "
                            f"{type(name).__name__}: {name!r}")
        if name in ALIASES:
            warnings.warn(f"`{name}` logger is deprecated. use `{ALIASES[name]}` instead.",
                          DeprecationWarning, stacklevel=3)
            name = ALIASES[name]
        if name in registry.backends or name not in VERL_BACKENDS:
            registry.backend(name)  # the same error trackmux.init gives, before any I/O
            target = ours
        else:
            target = theirs
        if name not in target:
            target.append(name)
    return ours, theirs


class Tracking:
    """verl's ``Tracking``, with the same constructor and methods, over one trackmux run.

    verl creates it only in the process that logs (the driver, or data-parallel rank 0 of
    the SFT trainer), so the run is created whatever ``RANK`` says."""

    supported_backend = list(VERL_BACKENDS)

    def __init__(self, project_name: str, experiment_name: str,
                 default_backend: str | Sequence[str] = "console", config: Any = None) -> None:
        self._finished = True  # until the run exists, so __del__ of a failed init is quiet
        self.run: Any = None
        self._commit_after_log = False  # a checkpoint was just saved (verl_checkpoints)
        self._verl: Any = None
        self._stopper: Any = None  # ends verl's loop when the doctor asks (verl_stop)
        import trackmux

        plain = plain_config(config)
        options = trackmux_options(plain)
        ours, theirs = split_backends(
            list(default_backend) if not isinstance(default_backend, str) else default_backend)
        self.project_name = project_name
        self.experiment_name = experiment_name
        self.backends = ours
        self.verl_backends = theirs
        self._histograms = _histogram_switch(options.pop("histograms", False))
        watch = _watch_switch(options.pop("watch", None), options.pop("watch_every", None))
        self._samples = _samples_switch(options.pop("samples", False))
        backend_options = {name: dict(opts) for name, opts in
                           dict(options.pop("backend_options", {})).items() if name in ours}
        from trackmux.integrations.verl_defaults import verl_locations

        for name, defaults in verl_locations(ours).items():
            backend_options[name] = {**defaults, **backend_options.get(name, {})}
        proxy = (plain.get("trainer") or {}).get("wandb_proxy")
        if proxy and "wandb" in ours:
            backend_options.setdefault("wandb", {}).setdefault("proxy", proxy)
        self.run = _init_resuming(plain, project_name, experiment_name, ours,
                                  backend_options or None, options)
        self._finished = False
        from trackmux.integrations import stopping

        if stopping.configured(options.get("doctor")):  # the doctor's stop_on is set
            from trackmux.integrations import verl_stop

            trainer = verl_stop.find_trainer()
            if trainer is not None:
                self._stopper = verl_stop.Stopper(self.run, trainer)
        if watch is not None:
            from trackmux.integrations import verl_watch

            count = verl_watch.watch_models(self.run, *watch)
            log.info("trackmux: watching %d model(s) of this process (%s every %d steps)",
                     count, *watch)
        if theirs:
            self._verl = _originals["Tracking"](project_name, experiment_name,
                                                default_backend=theirs, config=config)
        # The logger dict verl's own class exposes; some user code checks names in it.
        self.logger = dict.fromkeys(ours + theirs, self)
        _live.append(weakref.ref(self))
        from trackmux.integrations import verl_checkpoints

        verl_checkpoints.wrap_savers(_before_checkpoint)
        message = (f"trackmux {trackmux.__version__} is tracking this verl run: backends "
                   f"{','.join(ours) or 'none'}"
                   + (f" (verl's own: {','.join(theirs)})" if theirs else "")
                   + f"; spool {self.run.dir}"
                   + (f" (attempt {self.run.attempt.number}"
                      + (f", rewound to step {self.run.attempt.rewind_to}"
                         if self.run.attempt.rewind_to is not None else "") + ")"
                      if self.run.attempt.number > 1 else "")
                   + (f"; delivery process pid {pid}, log {self.run.dir}/delivery.log"
                      if (pid := getattr(self.run, "delivery_pid", None)) else ""))
        if log.isEnabledFor(logging.INFO):
            log.info(message)
        else:  # verl sets the root logger to WARNING; the line must still be seen
            print(message, file=sys.stderr, flush=True)

    def log(self, data: Mapping[str, Any], step: int, backend: Sequence[str] | None = None
            ) -> None:
        """Log ``data`` at ``step``. ``backend`` (verl's filter) selects the run if it names
        any of its backends; trackmux cannot send one call to only some of them."""
        if backend is None or any(name in backend for name in self.backends):
            # verl's trainer must never die of a metric: the run drops a bad value, names
            # it once and counts it (core/values/intake.py), and keeps the good ones.
            self.run.log(data, step=step)
            if self._histograms:
                from trackmux.integrations.verl_histograms import take_pending

                for key, values in take_pending().items():
                    if values.numel():
                        self.run.log_histogram(key, values, step=step)
            if self._samples:
                from trackmux.integrations.verl_samples import log_pending

                log_pending(self.run, step)
            if self._commit_after_log:  # the metrics of the step just checkpointed
                from trackmux.integrations.checkpoints import commit

                self._commit_after_log = False
                commit([self.run])
            if self._stopper is not None:
                self._stopper.at_log(step)
        if self._verl is not None:
            self._verl.log(data=data, step=step, backend=backend)

    def finish(self, exit_code: int = 0) -> Any:
        """Deliver within the finish timeout and close; later calls do nothing."""
        if getattr(self, "_finished", True):
            return None
        self._finished = True
        summary = self.run.finish(exit_code=exit_code)
        if self._verl is not None:
            self._verl.finish(exit_code=exit_code)
        return summary

    def __del__(self) -> None:
        try:
            self.finish()
        except Exception:  # a destructor must not raise; the spool keeps what was logged
            log.exception("trackmux: finishing the verl run failed")


def _init_resuming(config: dict[str, Any], project: str, experiment: str, backends: list[str],
                   backend_options: dict[str, Any] | None, options: dict[str, Any]) -> Any:
    """``trackmux.init``, continuing the run verl resumes from its checkpoint (see
    :mod:`trackmux.integrations.verl_resume`), and recording the run id for the next one."""
    import trackmux
    from trackmux.integrations import verl_resume

    def start(**extra: Any) -> Any:
        return trackmux.init(project=project, name=experiment, backends=backends,
                             config=config, backend_options=backend_options, all_ranks=True,
                             **options, **extra)

    resume = verl_resume.resume_options(config, project, experiment, options)
    try:
        run = start(**resume)
    except trackmux.SpoolLockedError as exc:  # the recorded run is live in another process
        log.warning("trackmux: cannot continue the recorded run: %s; starting a new run", exc)
        run = start()
    verl_resume.save_record(config, project, experiment, run.id, run.dir.parent.parent)
    return run


def _histogram_switch(value: Any) -> bool:
    """``trainer.trackmux.histograms``: true wraps verl's batch metric reduction."""
    if not isinstance(value, bool):
        raise TypeError(f"trainer.trackmux.histograms must be true or false, got {value!r}")
    if value:
        from trackmux.integrations import verl_histograms

        return verl_histograms.patch()
    return False


def _watch_switch(mode: Any, every: Any) -> tuple[str, int] | None:
    """``trainer.trackmux.watch`` (gradients, parameters, all; or false) and
    ``watch_every`` (100): also exported as ``TRACKMUX_WATCH`` for processes started
    later (see :mod:`trackmux.integrations.verl_watch` for what reaches Ray workers)."""
    from trackmux.core import settings

    if mode in (None, False, "false", "none", ""):
        return None
    if every is not None and (isinstance(every, bool) or not isinstance(every, int)):
        raise TypeError(f"trainer.trackmux.watch_every must be an int, got {every!r}")
    spec = settings.watch_spec(f"{mode}:{every if every is not None else 100}")
    assert spec is not None
    os.environ["TRACKMUX_WATCH"] = f"{spec[0]}:{spec[1]}"
    return spec


def _samples_switch(value: Any) -> bool:
    """``trainer.trackmux.samples``: a budget of samples per step (true: all, false: off)."""
    from trackmux.integrations import verl_samples

    budget = verl_samples.check_budget(value)
    if budget is None:
        return False
    verl_samples.find_tokenizer(depth=8)
    return verl_samples.enable(budget)


def active_tracking(project_name: str | None, experiment_name: str | None) -> Tracking | None:
    """The newest unfinished Tracking of this process, preferring the same project/name."""
    candidates = [t for t in (ref() for ref in reversed(_live))
                  if t is not None and not t._finished]
    for tracking in candidates:
        if (project_name in (None, tracking.project_name)
                and experiment_name in (None, tracking.experiment_name)):
            return tracking
    return candidates[0] if candidates else None


class ValidationGenerationsLogger:
    """verl's validation-generations logger: each call becomes one table event.

    The table (``val/generations``: step, input, output, score; one row per sample) goes to
    the run of this process's active :class:`Tracking`, so it reaches every backend."""

    def __init__(self, project_name: str | None = None,
                 experiment_name: str | None = None) -> None:
        self.project_name = project_name
        self.experiment_name = experiment_name
        self._verl: Any = None

    def log(self, loggers: Sequence[str], samples: Sequence[Sequence[Any]], step: int) -> None:
        tracking = active_tracking(self.project_name, self.experiment_name)
        if tracking is None:
            if "no-run" not in _warned:
                _warned.add("no-run")
                log.warning("trackmux: validation generations at step %s are not logged: no "
                            "verl Tracking is active in this process", step)
        elif tracking._samples:  # the ledger: prompt, response, score as samples
            cells = [_sample(sample) for sample in samples]
            tracking.run.log_samples(GENERATIONS_KEY, {
                "prompt": [c[0] for c in cells], "response": [c[1] for c in cells],
                "score": [c[2] for c in cells]}, step=step)
        else:
            rows = [[step, *_sample(sample)] for sample in samples]
            tracking.run.log_table(GENERATIONS_KEY, GENERATIONS_COLUMNS, rows, step=step)
        if tracking is not None and tracking.verl_backends:
            if self._verl is None:
                self._verl = _originals["ValidationGenerationsLogger"](
                    project_name=self.project_name, experiment_name=self.experiment_name)
            self._verl.log(tracking.verl_backends, samples, step)

    def __repr__(self) -> str:
        return (f"ValidationGenerationsLogger(project_name={self.project_name!r}, "
                f"experiment_name={self.experiment_name!r})")


def _sample(sample: Sequence[Any]) -> list[Any]:
    """(input, output, score) as cells; a shorter sample is padded as verl's loggers do."""
    values = list(sample)[:3]
    values += [None] * (3 - len(values))
    inp, out, score = values
    return [str(inp), str(out), score]


def install() -> None:
    """Put the trackmux classes into ``verl.utils.tracking`` (and trainers imported early)."""
    import verl.utils.tracking as tracking_module

    from trackmux.integrations import verl_trace

    verl_trace.install()  # rollout.trace.backend=trackmux
    from trackmux.integrations import verl_watch

    verl_watch.install()  # engines register their models (watched only when asked)
    from trackmux.integrations import verl_stop

    verl_stop.install_rank_hook(_live_runs, _has_stop_policy)  # SFT ranks stop together
    if getattr(tracking_module, "Tracking", None) is Tracking:
        return
    _originals["Tracking"] = tracking_module.Tracking
    _originals["ValidationGenerationsLogger"] = tracking_module.ValidationGenerationsLogger
    replacements = {"Tracking": Tracking,
                    "ValidationGenerationsLogger": ValidationGenerationsLogger}
    for attr, new in replacements.items():
        setattr(tracking_module, attr, new)
    for name in _TRAINER_MODULES:
        module = sys.modules.get(name)
        for attr, new in replacements.items():
            if module is not None and getattr(module, attr, None) is _originals[attr]:
                setattr(module, attr, new)


def _before_checkpoint() -> None:
    """verl is about to save a checkpoint: the runs of this process commit what they hold
    now, and again after their next log() (see verl_checkpoints)."""
    from trackmux.integrations.checkpoints import commit

    live = [t for t in (ref() for ref in _live) if t is not None and not t._finished]
    for tracking in live:
        tracking._commit_after_log = True
    commit(t.run for t in live)


def uninstall() -> None:
    """Give verl its own classes back (tests, or a user who wants both in one process)."""
    from trackmux.integrations import verl_checkpoints

    verl_checkpoints.unwrap_savers()
    if not _originals:
        return
    import verl.utils.tracking as tracking_module

    for attr, original in _originals.items():
        setattr(tracking_module, attr, original)
        for name in _TRAINER_MODULES:
            module = sys.modules.get(name)
            if module is not None and getattr(module, attr, None) is globals()[attr]:
                setattr(module, attr, original)


if importlib.util.find_spec("verl") is not None:
    install()
