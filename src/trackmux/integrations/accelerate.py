"""accelerate: a ``GeneralTracker`` that logs through trackmux.

    from trackmux.integrations.accelerate import TrackmuxTracker

    tracker = TrackmuxTracker("my-project", name="run1", backends=["wandb", "mlflow"])
    accelerator = Accelerator(log_with=tracker)          # or log_with="trackmux", below
    accelerator.init_trackers("my-project", config=cfg)
    accelerator.log({"loss": loss}, step=step)
    tracker.tracker.log_histogram("grads", grads, step=step)   # the trackmux Run
    accelerator.end_training()

- Only the main process (accelerate's ``PartialState().is_main_process``) opens the run,
  as accelerate expects of ``main_process_only`` trackers; on the others every method does
  nothing and ``.tracker`` is a :class:`trackmux.DisabledRun`.
- ``log`` takes accelerate's values: numbers, nested dicts of numbers (flattened to
  ``a/b``), and strings (logged as text). ``log_images`` and ``log_table`` have the shapes
  of accelerate's wandb tracker; ``.tracker`` gives the :class:`trackmux.Run` for the rest.
- By name: :func:`register` (or importing this module when accelerate has
  ``register_tracker_class``) makes ``Accelerator(log_with="trackmux")`` work;
  ``init_trackers(project_name, init_kwargs={"trackmux": {...}})`` passes
  :func:`trackmux.init` arguments.
- Resume: ``accelerator.register_for_checkpointing(tracker)`` stores the run id and step
  in each ``save_state``; a ``load_state`` before the first ``log`` continues that run,
  rewound to the saved step (``run_id``/``resume``/``rewind_to`` may also be passed
  directly). The run opens lazily, at the first ``log`` (or ``.tracker``), for this reason.
  ``save_state`` commits the spool first, so the steps up to it survive a kill.
- The doctor acts (issue 45, docs/doctor.md): with a stop policy
  (``TrackmuxTracker(..., doctor={"stop_on": "critical"})`` or
  ``TRACKMUX_DOCTOR_STOP_ON``) the loop adds two lines at its step boundary::

      if tracker.should_stop:
          accelerator.save_state(f"ckpt/step-{step}"); break

  ``should_stop`` is the same on every process (the main one's flag, shared by one tiny
  all-reduce per read when there are several; read it on every process at the same point);
  ``accelerator.end_training()`` then ends the run ``stopped``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from accelerate.tracking import GeneralTracker, on_main_process

from trackmux.integrations import hf_common

NAME = "trackmux"


class TrackmuxTracker(GeneralTracker):  # type: ignore[misc]
    """accelerate tracker over one trackmux run (see the module docstring).

    ``project``: the project (accelerate passes ``init_trackers``' ``project_name`` here
    when it builds the tracker by name; None: ``TRACKMUX_PROJECT``). ``init_kwargs``: any
    :func:`trackmux.init` argument (``name``, ``backends``, ``dir``, ``backend_options``,
    ``run_id``, ``resume``, ``rewind_to``, ...)."""

    name = NAME
    requires_logging_directory = False
    main_process_only = True

    def __init__(self, project: str | None = None, **init_kwargs: Any) -> None:
        super().__init__()
        for reserved in ("project", "config", "all_ranks"):
            if reserved in init_kwargs:
                raise TypeError(f"TrackmuxTracker: {reserved!r} is not an init argument here")
        self.project = project or os.environ.get("TRACKMUX_PROJECT")
        self.init_kwargs = dict(init_kwargs)
        self.run: Any = None
        self._config: dict[str, Any] = {}
        self._resume: dict[str, Any] = {}
        self._started = False
        self._stopping: bool | None = None  # whether a stop policy is set (then: shared)

    # -- GeneralTracker --------------------------------------------------------------
    @on_main_process  # type: ignore[untyped-decorator]
    def start(self) -> None:
        """Called by ``init_trackers`` on every process; marks the main one as the one
        that opens the run (at its first use, so a ``load_state`` can still resume it)."""
        self._started = True

    @property
    def tracker(self) -> Any:
        """The trackmux Run on the main process (opened now if needed), a DisabledRun on
        the others."""
        if not _is_main_process():
            import trackmux

            return trackmux.DisabledRun(self.project or "default", None,
                                        "accelerate: not the main process")
        return self._open()

    @property
    def should_stop(self) -> bool:
        """Whether the doctor asked the run to stop (its ``stop_on``): at the step boundary,
        ``accelerator.save_state(...)`` then ``break``. False, with no communication, when
        no stop policy is set; with several processes, every process gets the main one's
        flag (one all-reduce of one number). Never raises."""
        from trackmux.integrations import stopping

        if self._stopping is None:
            self._stopping = stopping.configured(self.init_kwargs.get("doctor"))
        if not self._stopping:
            return False
        flag = stopping.wanted(self.run)
        try:
            from accelerate.state import PartialState

            state = PartialState()
            if state.num_processes > 1:
                flag = stopping.agree(flag, state.device)
        except Exception as exc:  # tracking never breaks training
            hf_common.warn_once("accelerate:stop", "trackmux: cannot share the doctor's "
                                "stop between processes (%s)", exc)
        return flag

    @property
    def stop_reason(self) -> dict[str, Any] | None:
        """The finding that asked the run to stop (main process; None elsewhere)."""
        return getattr(self.run, "stop_reason", None)

    @on_main_process  # type: ignore[untyped-decorator]
    def store_init_configuration(self, values: Mapping[str, Any]) -> None:
        """Record ``values`` as the run's config (merged, nested values kept)."""
        self._config.update(values)
        if self.run is not None:
            self.run.log_config(dict(values))

    @on_main_process  # type: ignore[untyped-decorator]
    def log(self, values: Mapping[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Log numbers (and dicts of numbers) as metrics, strings as text, at ``step``."""
        run = self._open()
        texts = {k: v for k, v in values.items() if isinstance(v, str)}
        numbers = {k: v for k, v in values.items() if not isinstance(v, str)}
        at = step if step is not None else run.step + 1 if numbers else max(run.step, 0)
        if numbers:
            hf_common.log_metrics(run, numbers, at, "accelerate")
        for key, text in texts.items():
            try:
                run.log_text(key, text, step=at)
            except (TypeError, ValueError, RuntimeError) as exc:  # RunFinishedError too
                hf_common.warn_once(f"accelerate:{key!r}", "trackmux: text %r dropped: %s",
                                    key, exc)

    @on_main_process  # type: ignore[untyped-decorator]
    def log_images(self, values: Mapping[str, Sequence[Any]], step: int | None = None,
                   **kwargs: Any) -> None:
        """Log lists of images (numpy, PIL, torch or paths) per key, as accelerate's
        wandb tracker takes them; several images of one key become ``key/0``, ``key/1``..."""
        run = self._open()
        for key, images in values.items():
            listed = list(images) if isinstance(images, (list, tuple)) else [images]
            for i, image in enumerate(listed):
                run.log_image(key if len(listed) == 1 else f"{key}/{i}", image, step=step)

    @on_main_process  # type: ignore[untyped-decorator]
    def log_table(self, table_name: str, columns: Sequence[str] | None = None,
                  data: Sequence[Sequence[Any]] | None = None, dataframe: Any = None,
                  step: int | None = None, **kwargs: Any) -> None:
        """A table from ``columns`` and ``data`` or a pandas ``dataframe``; the spool
        keeps one table per step, so each step's rows stay visible."""
        if dataframe is not None:
            columns = [str(c) for c in dataframe.columns]
            data = dataframe.values.tolist()
        if columns is None or data is None:
            raise ValueError("log_table needs columns and data, or a dataframe")
        self._open().log_table(table_name, list(columns), list(data), step=step)

    @on_main_process  # type: ignore[untyped-decorator]
    def finish(self) -> None:
        """Finish the run (``accelerator.end_training()``)."""
        run, self.run = self.run, None
        if run is not None:
            run.finish()

    # -- checkpointing (accelerator.register_for_checkpointing) ------------------------
    def state_dict(self) -> dict[str, Any]:
        """The run id and last step, saved by ``accelerator.save_state``; the spool
        commits first, so the checkpoint never holds steps a kill could still take from it
        (:mod:`trackmux.integrations.checkpoints`)."""
        record = hf_common.record_of(self.run)
        if record is None:
            return {}
        from trackmux.integrations.checkpoints import commit

        commit([self.run])
        return {**record, "step": int(self.run.step)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """From ``accelerator.load_state``: continue the saved run, rewound to its step."""
        if not _is_main_process() or not state:
            return
        if self.run is not None:
            hf_common.warn_once("accelerate:late-load", "trackmux: load_state came after the "
                                "run %s started; call load_state before the first log to "
                                "continue the saved run %s", self.run.id, state.get("run_id"))
            return
        project = self.project or "default"
        self._resume = hf_common.resume_options(state, project, int(state.get("step", -1)))

    # -- internals -------------------------------------------------------------------
    def _open(self) -> Any:
        if self.run is None:
            import trackmux

            options = {**self.init_kwargs, **self._resume}
            self.run = trackmux.init(project=self.project, config=self._config or None,
                                     all_ranks=True, **options)
        return self.run


def _is_main_process() -> bool:
    from accelerate.state import PartialState

    return bool(PartialState().is_main_process)


def register() -> bool:
    """Make ``Accelerator(log_with="trackmux")`` work (accelerate's
    ``register_tracker_class``, in accelerate 1.16 and later); False where it is missing."""
    try:
        from accelerate.tracking import LOGGER_TYPE_TO_CLASS, register_tracker_class
    except ImportError:
        return False
    if LOGGER_TYPE_TO_CLASS.get(NAME) is not TrackmuxTracker:
        register_tracker_class(TrackmuxTracker)
    return True


register()
