"""Many processes, one run: ``trackmux.attach()`` from Ray workers into the driver's run.

The driver (the process that called :func:`trackmux.init`) owns the run and its spool.
Other processes attach to it and log through a sink beside the driver; their events
keep the worker's step and wall time, and their keys carry the worker's role. See
docs/ray.md. Ray is optional (``trackmux[ray]``) and never imported by ``import
trackmux``.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from trackmux.attached.handle import DEFAULT_MAX_BUFFERED, FLUSH_INTERVAL, AttachedRun
from trackmux.core import settings
from trackmux.core.errors import TrackmuxError
from trackmux.core.lifecycle.run import on_run_start
from trackmux.core.values import normalize

if TYPE_CHECKING:
    from trackmux.attached.host import RaySinkHost
    from trackmux.core.lifecycle.run import Run

__all__ = ["AttachedRun", "NotAttachableError", "attach", "serve"]


def _serve_if_ray(run: Run) -> None:
    """Serve Ray workers from each new run when Ray is up here (Ray is imported only then)."""
    from trackmux.attached.host import maybe_serve

    maybe_serve(run)


on_run_start(_serve_if_ray)


class NotAttachableError(TrackmuxError, RuntimeError):
    """attach() was called where no run can be reached (no Ray, no run in this process)."""


_cache: dict[tuple[str | None, str | None, int], AttachedRun] = {}
_cache_lock = threading.Lock()


def attach(run_id: str | None = None, role: str | None = None, *,
           flush_interval: float = FLUSH_INTERVAL,
           max_buffered: int = DEFAULT_MAX_BUFFERED, strict: bool | None = None
           ) -> AttachedRun:
    """A handle on the driver's run (``run_id=None``) or on run ``run_id``, from any process
    of the Ray cluster, or from the run's own process.

    ``role`` prefixes every key (``rollout/gen_s``) and gives the handle its own steps.
    Calls buffer in memory and are sent every ``flush_interval`` seconds and at exit;
    ``max_buffered`` bounds the buffer (beyond it events are dropped and counted). The same
    (run_id, role) in one process returns the same handle.

    ``strict``: bad input raises instead of being dropped, named once and counted (None:
    the run's own setting in the run's process, else ``TRACKMUX_STRICT``).

    Raises :class:`NotAttachableError` in a process with no run and no Ray, saying what
    to do; once attached, nothing raises (but bad input when strict)."""
    if run_id is not None and (not isinstance(run_id, str) or not run_id):
        raise TypeError(f"run_id must be a non-empty str or None, got {run_id!r:.80}")
    if role is not None:
        role = normalize.check_key(role, "role").strip("/")
        if not role:
            raise ValueError("role must contain something besides '/'")
    if isinstance(flush_interval, bool) or not isinstance(flush_interval, (int, float)) \
            or not 0 < flush_interval <= 60:
        raise ValueError(f"flush_interval must be a number of seconds in (0, 60], got "
                         f"{flush_interval!r}")
    if isinstance(max_buffered, bool) or not isinstance(max_buffered, int) or max_buffered < 1:
        raise ValueError(f"max_buffered must be a positive int, got {max_buffered!r}")
    strict = None if strict is None else settings.strict(strict)
    key = (run_id, role, os.getpid())
    with _cache_lock:
        handle = _cache.get(key)
        if handle is not None and handle.usable and _still_current(handle, run_id):
            return handle
        handle = _new_handle(run_id, role, float(flush_interval), max_buffered, strict)
        _cache[key] = handle
        return handle


def _new_handle(run_id: str | None, role: str | None, flush_interval: float,
                max_buffered: int, strict: bool | None) -> AttachedRun:
    from trackmux.attached import host

    run = _local_run(run_id)
    if run is not None:
        transport = host.LocalTransport(run)
        handle = AttachedRun(transport, run_id=run.id, role=role,
                             flush_interval=flush_interval, max_buffered=max_buffered,
                             strict=run._intake.strict if strict is None else strict)
        local = next((h for h in run._sinks if isinstance(h, host.LocalHost)), None)
        if local is None:
            local = host.LocalHost()
            run._sinks.append(local)
        local.handles.append(handle)
        return handle
    ray = host.ray_if_initialized()
    if ray is None:
        ray = _try_ray()
    if ray is None:
        raise NotAttachableError(
            "trackmux.attach(): there is no trackmux run in this process and Ray is not "
            "initialised here, so there is no driver run to attach to. Inside a Ray job "
            "(pip install -e '.[ray]' in the trackmux checkout; the driver calls ray.init() "
            "then trackmux.init()) "
            "attach works in any worker. Without Ray, call trackmux.init() in this process "
            "for a run of its own, or send the values to the process that holds the run.")
    from trackmux.attached import ray_exit

    ray_exit.install(ray)  # an actor's exit_actor() sends what its handles hold first
    return AttachedRun(host.RayTransport(ray, run_id), run_id=run_id, role=role,
                       flush_interval=flush_interval, max_buffered=max_buffered,
                       strict=settings.strict(strict))


def _try_ray() -> object | None:
    """In a Ray worker, ray is imported and initialised; elsewhere do not start Ray."""
    try:
        import ray
    except ImportError:
        return None
    return ray if ray.is_initialized() else None


def _local_run(run_id: str | None) -> Run | None:
    """The unfinished run of this process with that id; without an id, the newest one
    (a notebook or a sweep may start a run before it finished the last)."""
    from trackmux.core.lifecycle.run import _live_runs

    pid = os.getpid()
    runs = [run for run in list(_live_runs)
            if run._pid == pid and not run._finished and run_id in (None, run.id)]
    return max(runs, key=lambda run: run._born, default=None)


def _still_current(handle: AttachedRun, run_id: str | None) -> bool:
    """A cached in-process handle without a run id serves the newest run: once another
    run started in this process, ``attach()`` gives a handle of that one."""
    from trackmux.attached.host import LocalTransport

    transport = handle._transport
    if run_id is not None or not isinstance(transport, LocalTransport):
        return True
    return transport._run is _local_run(None)


def serve(run: Run) -> RaySinkHost:
    """Let Ray workers attach to ``run`` (automatic if Ray was initialised before
    ``trackmux.init()``; call this once after ``ray.init()`` otherwise)."""
    from trackmux.attached.host import serve as _serve

    return _serve(run)
