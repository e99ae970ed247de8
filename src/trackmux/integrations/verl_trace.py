"""``rollout.trace.backend=trackmux``: verl's rollout traces as rows of a trace table.

verl 0.9.1 traces agent-loop calls (``verl/utils/rollout_trace.py``) to weave, mlflow or
trackio, each of which starts a tracker in every agent-loop worker. With ``trackmux`` as
the backend, each traced call becomes one row of the table ``<worker>/rollout_trace`` in
the driver's run, sent through :func:`trackmux.attach` (no tracker in the worker, every
backend of the run). verl's own sampling is kept: ``max_samples_per_step_per_worker``
selects the samples (``rollout_trace_attr(trace=False)`` for the others) before this code
runs, so the cap holds exactly as with verl's backends.

A step's rows go out as one table event when the worker moves to a later step, when the
step has had no new row for ``IDLE_EMIT`` seconds, and at worker exit.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("trackmux.verl")

BACKEND = "trackmux"
TABLE_KEY = "rollout_trace"
COLUMNS = ("step", "sample_index", "rollout_n", "validate", "op", "status", "inputs",
           "output", "duration_s")
IDLE_EMIT = 2.0
MAX_CELL = 20_000

_original_op: Callable[..., Any] | None = None
_table: TraceTable | None = None
_table_lock = threading.Lock()


class TraceTable:
    """Rows of one worker's traced calls, grouped by step, handed to an attached run."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self._rows: dict[int, list[list[Any]]] = {}
        self._touched: dict[int, float] = {}
        self._lock = threading.Lock()
        handle.add_before_flush(self.emit_idle)

    def add(self, step: int, row: list[Any]) -> None:
        with self._lock:
            self._rows.setdefault(step, []).append(row)
            self._touched[step] = time.monotonic()
            done = [s for s in self._rows if s < step]
        for old in done:
            self._emit(old)

    def emit_idle(self) -> None:
        now = time.monotonic()
        with self._lock:
            idle = [s for s, t in self._touched.items() if now - t >= IDLE_EMIT]
        for step in idle:
            self._emit(step)

    def emit_all(self) -> None:
        with self._lock:
            steps = list(self._rows)
        for step in steps:
            self._emit(step)

    def _emit(self, step: int) -> None:
        with self._lock:
            rows = self._rows.pop(step, None)
            self._touched.pop(step, None)
        if rows:
            self.handle.log_table(TABLE_KEY, COLUMNS, rows, step=step)


def worker_role() -> str | None:
    """The Ray actor's name without verl's random suffix (``agent_loop_worker_0``)."""
    try:
        import ray

        name = ray.get_runtime_context().get_actor_name() if ray.is_initialized() else None
    except Exception:
        name = None
    if not name:
        return f"pid{os.getpid()}"
    return re.sub(r"_[0-9a-f]{8}$", "", name)


def trace_table() -> TraceTable | None:
    """This process's trace table, attached on first use; None if attaching failed."""
    global _table
    with _table_lock:
        if _table is None or _table.handle.gone or _table.handle._closed:
            import trackmux

            try:
                handle = trackmux.attach(role=worker_role())
            except Exception as exc:  # a trace must never break a rollout
                log.warning("trackmux: rollout traces are not recorded: %s", exc)
                return None
            _table = TraceTable(handle)
        return _table


def _cell(value: Any) -> str:
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= MAX_CELL else text[:MAX_CELL] + "..."


def record(op: str, inputs: dict[str, Any], output: Any, error: BaseException | None,
           duration: float) -> None:
    """One traced call as one row, at the trace's step (verl's ``global_steps``)."""
    from verl.utils import rollout_trace as rt

    table = trace_table()
    if table is None:
        return
    try:
        attributes = rt._current_trace_attributes()
        step = attributes.get("step")
        step = step if isinstance(step, int) and step >= 0 else 0
        status = "success" if error is None else f"error: {type(error).__name__}: {error}"
        table.add(step, [step, _plain(attributes.get("sample_index")),
                         _plain(attributes.get("rollout_n")),
                         bool(attributes.get("validate", False)), op, status, _cell(inputs),
                         _cell(output if error is None else None), round(duration, 6)])
    except Exception as exc:
        log.warning("trackmux: a rollout trace row was not recorded: %s: %s",
                    type(exc).__name__, exc)


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


def _bound_inputs(func: Callable[..., Any], self: Any, args: Any, kwargs: Any
                  ) -> dict[str, Any]:
    bound = inspect.signature(func).bind(self, *args, **kwargs)
    bound.apply_defaults()
    inputs = dict(bound.arguments)
    inputs.pop("self", None)
    return inputs


def _active() -> bool:
    from verl.utils import rollout_trace as rt

    return bool(rt.RolloutTraceConfig.get_backend() == BACKEND and rt._trace_enabled.get())


def rollout_trace_op(func: Callable[..., Any]) -> Callable[..., Any]:
    """verl's decorator, plus the ``trackmux`` backend; other backends are verl's own."""
    assert _original_op is not None
    traced = _original_op(func)

    if inspect.iscoroutinefunction(func):
        @functools.wraps(func)
        async def async_wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not _active():
                return await traced(self, *args, **kwargs)
            from verl.utils import rollout_trace as rt

            inputs = _bound_inputs(func, self, args, kwargs)
            started = time.monotonic()
            try:
                result = await func(self, *args, **kwargs)
            except Exception as exc:
                record(func.__qualname__, inputs, None, exc, time.monotonic() - started)
                raise
            output = result
            if rt.RolloutTraceConfig.enable_token2text():
                output = await rt._add_token2text(self, inputs, result)
            record(func.__qualname__, inputs, output, None, time.monotonic() - started)
            return result

        return async_wrapper

    @functools.wraps(func)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _active():
            return traced(self, *args, **kwargs)
        inputs = _bound_inputs(func, self, args, kwargs)
        started = time.monotonic()
        try:
            result = func(self, *args, **kwargs)
        except Exception as exc:
            record(func.__qualname__, inputs, None, exc, time.monotonic() - started)
            raise
        record(func.__qualname__, inputs, result, None, time.monotonic() - started)
        return result

    return wrapper


def install() -> None:
    """Replace ``verl.utils.rollout_trace.rollout_trace_op`` (before verl's agent loops
    import it, which happens after ``import verl`` has loaded this plugin)."""
    global _original_op
    try:
        from verl.utils import rollout_trace as rt
    except Exception as exc:  # an older verl without rollout traces
        log.debug("trackmux: verl rollout traces not available: %s", exc)
        return
    if rt.rollout_trace_op is rollout_trace_op:
        return
    _original_op = rt.rollout_trace_op
    rt.rollout_trace_op = rollout_trace_op
    atexit.register(flush)  # runs before the attached handles' own exit flush


def flush() -> None:
    """Emit every pending trace row now (tests, or a worker about to stop)."""
    if _table is not None:
        _table.emit_all()
        _table.handle.flush()
