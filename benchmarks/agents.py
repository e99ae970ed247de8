"""Loggers in their own processes, driven step by step by the benchmark process.

swanlab holds one run per process and ``wandb.log`` writes to the process's current run,
so trackmux and verl's Tracking cannot share a process without one stealing the other's
run. Each therefore lives in an agent process; the benchmark alternates blocks of steps
between them over a pipe, so both see the same machine load. Timings are taken inside
the agent around the one call being measured; the pipe is not in them.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from benchmarks.common import FOUR, Floor, payload, trackmux_options, wait_delivered


def config(name: str) -> dict[str, Any]:
    """A small trainer config (verl's Tracking reads ``config["trainer"]``)."""
    return {"trainer": {"project_name": "bench", "experiment_name": name, "total_epochs": 1},
            "actor": {"optim": {"lr": 1e-6}, "ppo_mini_batch_size": 256}}


class AgentError(RuntimeError):
    pass


class _TrackmuxLogger:
    """trackmux with the four backends, plus the floor in the same process, alternating."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        import trackmux

        root = Path(cfg["root"])
        backends = cfg.get("backends", FOUR)
        options = trackmux_options(root, cfg["mlflow_uri"])
        self.run = trackmux.init(project=cfg.get("project", "bench"), name=cfg["name"],
                                 backends=backends, dir=root / "spool",
                                 backend_options={b: options[b] for b in backends},
                                 config=config(cfg["name"]))
        self.floor = Floor(root / f"floor-{cfg['name']}.jsonl")

    def block(self, start: int, n: int) -> dict[str, list[int]]:
        tm, fl = [], []
        clock = time.perf_counter_ns
        log, floor = self.run.log, self.floor.log
        for step in range(start, start + n):
            data = payload(step)
            t0 = clock()
            log(data, step=step)
            t1 = clock()
            floor(data, step)
            t2 = clock()
            tm.append(t1 - t0)
            fl.append(t2 - t1)
        return {"trackmux": tm, "floor": fl}

    def wait(self, timeout: float) -> dict[str, Any]:
        t0 = time.perf_counter()
        ok = wait_delivered(self.run, timeout)
        return {"delivered": ok, "seconds": time.perf_counter() - t0,
                "state": self.run.delivery()}

    def finish(self, timeout: float) -> dict[str, Any]:
        t0 = time.perf_counter()
        summary = self.run.finish(timeout=timeout)
        elapsed = time.perf_counter() - t0
        self.floor.close()
        return {"seconds": elapsed, "complete": summary.complete, "events": summary.events,
                "pending": summary.pending,
                "problems": [f"{p.backend}/{p.kind}" for p in summary.problems]}


class _VerlLogger:
    """verl 0.9.1's own ``Tracking``, same four backends (VERL_USE_EXTERNAL_PLUGINS=none)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        os.environ["MLFLOW_TRACKING_URI"] = cfg["mlflow_uri"]
        os.environ["VERL_USE_EXTERNAL_PLUGINS"] = "none"
        from verl.utils.tracking import Tracking

        self.tracking = Tracking(project_name=cfg.get("project", "bench"),
                                 experiment_name=cfg["name"], default_backend=list(FOUR),
                                 config=config(cfg["name"]))

    def block(self, start: int, n: int) -> dict[str, list[int]]:
        out = []
        clock = time.perf_counter_ns
        for step in range(start, start + n):
            data = payload(step)
            t0 = clock()
            self.tracking.log(data=data, step=step)
            out.append(clock() - t0)
        return {"verl": out}

    def wait(self, timeout: float) -> dict[str, Any]:
        return {"delivered": True, "seconds": 0.0}

    def finish(self, timeout: float) -> dict[str, Any]:
        t0 = time.perf_counter()
        self.tracking.finish()
        return {"seconds": time.perf_counter() - t0, "complete": True}


KINDS = {"trackmux": _TrackmuxLogger, "verl": _VerlLogger}


def _agent_main(conn: Connection, kind: str, cfg: dict[str, Any]) -> None:
    try:
        logger = KINDS[kind](cfg)
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ok", None))
    while True:
        try:
            cmd, *args = conn.recv()
        except EOFError:
            return
        if cmd == "exit":
            conn.send(("ok", None))
            return
        try:
            conn.send(("ok", getattr(logger, cmd)(*args)))
        except BaseException:
            conn.send(("error", traceback.format_exc()))


class Agent:
    """The benchmark's handle on one agent process."""

    def __init__(self, kind: str, cfg: dict[str, Any]) -> None:
        ctx = mp.get_context("spawn")
        self.kind = kind
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_agent_main, args=(child, kind, cfg),
                                name=f"bench-{kind}-{cfg['name']}", daemon=True)
        self.proc.start()
        self._ready = False

    def ready(self, timeout: float = 180.0) -> None:
        if not self._ready:
            self._reply(timeout)
            self._ready = True

    def call(self, cmd: str, *args: Any, timeout: float = 300.0) -> Any:
        self.ready()
        self.conn.send((cmd, *args))
        return self._reply(timeout)

    def send(self, cmd: str, *args: Any) -> None:
        self.ready()
        self.conn.send((cmd, *args))

    def reply(self, timeout: float) -> Any:
        return self._reply(timeout)

    def _reply(self, timeout: float) -> Any:
        if not self.conn.poll(timeout):
            raise TimeoutError(f"{self.kind} agent did not answer within {timeout:.0f} s")
        status, value = self.conn.recv()
        if status != "ok":
            raise AgentError(f"{self.kind} agent failed:\n{value}")
        return value

    def close(self, timeout: float = 60.0) -> None:
        if self.proc.is_alive():
            try:
                self.conn.send(("exit",))
                self.conn.poll(timeout)
            except (OSError, BrokenPipeError):
                pass
            self.proc.join(timeout)
        self.kill()

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(10)
