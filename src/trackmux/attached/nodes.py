"""System metrics of the other nodes: one sampler per node that holds an attached worker.

When the driver's run samples system metrics (``init(system_metrics=...)``), the driver's
own node is sampled by the run as ``system/...``. Every other Ray node that holds an
attached worker is sampled by exactly one of the attached handles on it, under
``system/<node>/...``. Nothing is configured in the workers: a handle learns the interval
and its node's name from the sink when it connects (in its flusher thread).

- **Node names** are given by the sink, so they are unique in the run and the same for
  the whole run: the node's short hostname (up to the first dot, characters other than
  letters, digits, ``-`` and ``_`` replaced by ``_``); when another node of the run has
  that name already (the driver's node reserves its own hostname), the hostname, ``-``
  and the first 8 hex digits of the Ray node id (``gpu-a-1f0c93b2``).
- **Election.** The handles of a run on one node compete for an exclusive ``flock`` on a
  file in the node's temp directory, named after the run id and the Ray node id. The
  holder samples (a :class:`~trackmux.core.lifecycle.system_metrics.SystemSampler` thread in its
  process); the others try again every ``max(1 s, interval)``. The kernel releases the
  lock when the holder's process dies, however it dies.
- **Hand over.** When the sampling handle closes (``close()``, process exit), finds the
  sink gone, or its process is killed, the lock is released and another attached handle
  on that node takes over within ``max(1 s, interval)``, under the same node name. When
  no attached handle is left on a node, nobody samples it.
- **Path of the samples.** The sampler appends one metrics event per sample (stamped
  with the wall time of the sample and the sampling handle's current step) to that
  handle's buffer; the handle's flusher sends it with its other events. Keys carry no
  role prefix. ``log()`` never touches any of this, and nothing here raises into the
  worker: a missing psutil or a failing sampler is logged once and sampling stops.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("trackmux")

#: A handle that does not sample tries to take over at least this often (seconds).
RETRY_MIN = 1.0

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_warned: set[str] = set()


def short_host(hostname: str) -> str:
    """A hostname as a key part: up to the first dot, only letters, digits, ``-``, ``_``."""
    name = _UNSAFE.sub("_", hostname.split(".")[0]).strip("_")[:48]
    return name or "node"


def assign_name(names: dict[str, str], node_id: str, hostname: str) -> str:
    """The node's name in the run (``names``: node id -> name, updated): its short
    hostname, or ``<host>-<node id[:8]>`` when another node of the run has that name."""
    name = names.get(node_id)
    if name is not None:
        return name
    base = short_host(hostname)
    taken = set(names.values())
    for candidate in (base, f"{base}-{node_id[:8]}", f"{base}-{node_id}"):
        if candidate not in taken:
            name = candidate
            break
    else:  # the same node id twice cannot be here; keep names unique anyway
        name = f"{base}-{len(names)}"
    names[node_id] = name
    return name


@dataclass(frozen=True)
class NodePlan:
    """What the sink told a handle: sample every ``interval`` s as ``system/<node>``."""

    run_id: str
    node_id: str
    node: str
    interval: float


def lock_path(run_id: str, node_id: str) -> Path:
    """The node-local lock file that elects the run's sampler on this node."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = Path(tempfile.gettempdir()) / f"trackmux-{uid}"
    folder.mkdir(mode=0o700, exist_ok=True)
    digest = hashlib.sha256(f"{run_id}\0{node_id}".encode()).hexdigest()[:24]
    return folder / f"node-sampler-{digest}.lock"


def _node_lock(path: Path) -> Any:
    """An exclusive lock (``flock`` on POSIX) that the kernel drops when the process
    dies, however it dies; one per handle, so handles of one process compete too."""
    import filelock

    return filelock.FileLock(str(path), thread_local=False)


def _default_sampler(emit: Callable[[dict[str, float]], None], plan: NodePlan) -> Any:
    from trackmux.core.lifecycle.system_metrics import SystemSampler

    return SystemSampler(emit, plan.interval, Path(tempfile.gettempdir()), node=plan.node,
                         process=False)


class NodeSampling:
    """One handle's part in sampling its node: compete for the lock, sample while held."""

    def __init__(self, plan: NodePlan, emit: Callable[[dict[str, float]], None], *,
                 sampler_factory: Callable[..., Any] = _default_sampler) -> None:
        self.plan = plan
        self._emit = emit
        self._factory = sampler_factory
        self._lock = _node_lock(lock_path(plan.run_id, plan.node_id))
        self._sampler: Any = None
        self._next_try = 0.0
        self._failed = False

    @property
    def sampling(self) -> bool:
        """True while this handle is its node's sampler."""
        return self._sampler is not None

    def tick(self) -> None:
        """From the handle's flusher thread: take over when the node has no sampler."""
        sampler = self._sampler
        if sampler is not None:
            if not sampler.thread.is_alive():  # it stopped on an error (logged): let go
                self._failed = True
                self.stop()
            return
        now = time.monotonic()
        if self._failed or now < self._next_try:
            return
        self._next_try = now + max(RETRY_MIN, self.plan.interval)
        import filelock

        try:
            self._lock.acquire(timeout=0)
        except filelock.Timeout:
            return  # another handle samples this node
        except OSError as exc:
            self._give_up(f"no lock file for the node sampler ({exc})")
            return
        try:
            sampler = self._factory(self._emit, self.plan)
            sampler.start()
        except Exception as exc:  # psutil missing on this node, ...
            self._lock.release()
            self._give_up(f"{type(exc).__name__}: {exc}")
            return
        self._sampler = sampler
        log.info("trackmux: this process samples node %s for run %s (system/%s/...)",
                 self.plan.node, self.plan.run_id, self.plan.node)

    def stop(self) -> None:
        """Stop sampling and let another handle on the node take over."""
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            with contextlib.suppress(Exception):
                sampler.stop(timeout=1.0)
        if self._lock.is_locked:
            self._lock.release()

    def _give_up(self, reason: str) -> None:
        self._failed = True
        if self.plan.node not in _warned:
            _warned.add(self.plan.node)
            log.warning("trackmux: node %s is not sampled by this process: %s",
                        self.plan.node, reason)
