"""Helpers for tests/sweeps. Sweeps run for real: `trackmux sweep` and `trackmux agent` in
subprocesses, trial programs that call trackmux.init/log, the storage an SQLite file (or a
private PostgreSQL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from spool_support import spool_meta

# a trial program: logs `score` = lr * step for `steps` steps, `pause` seconds a step;
# `--mode=crash` raises after step 2, `--mode=nan` logs NaN from step 5 on (the doctor's
# critical `nonfinite`), `--mode=none` never calls trackmux.init; `--lockstep`: each finite
# step waits until the agent has reported it to the sweep's pruner, so the pruner judges every
# step before the next is logged, however late a loaded machine lets the agent read (only with
# `early_terminate`: nothing is reported without a pruner); `--hold-nan`: the first NaN step
# waits (up to 120 s) for the agent to stop the trial on the doctor's finding
PROGRAM = textwrap.dedent("""
    import argparse, math, os, sys, time
    import trackmux
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--mode", default="ok")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--pause", type=float, default=0.0)
    p.add_argument("--lockstep", action="store_true")
    p.add_argument("--hold-nan", action="store_true")
    a = p.parse_args()
    if a.mode == "none":
        sys.exit(0)

    sweep = None

    def reported(step):
        global sweep
        from trackmux.sweeps import join, storage, study
        if sweep is None:
            sweep = study.load(os.environ[join.SWEEP_ID], storage.resolve_url(None)).study
        number = int(os.environ[join.TRIAL])
        return any(step in t.intermediate_values for t in sweep.get_trials(deepcopy=False)
                   if t.number == number)

    run = trackmux.init(project="sw", backends=[], config={"lr": a.lr, "mode": a.mode})
    for s in range(a.steps):
        value = float("nan") if a.mode == "nan" and s >= 5 else a.lr * s
        run.log({"score": value, "other": 1.0}, step=s)
        if a.mode == "crash" and s == 2:
            raise RuntimeError("the trainer broke")
        if a.lockstep and math.isfinite(value):
            run.flush()
            deadline = time.monotonic() + 120
            while not reported(s) and time.monotonic() < deadline:
                time.sleep(0.05)  # a pruned trial is stopped (SIGTERM) while it waits here
        elif a.hold_nan and s == 5:  # the first NaN: wait for the doctor's stop (SIGTERM)
            run.flush()
            time.sleep(120)
        time.sleep(a.pause)
    run.finish()
""")


def env_for(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["TRACKMUX_DIR"] = str(root)
    env["OPENBLAS_NUM_THREADS"] = "1"
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    return env


def cli(root: Path, *args: str, check: bool = True,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "trackmux", *args], env=env_for(root),
                          cwd=root, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"trackmux {' '.join(args)} exited {done.returncode}:\n"
                             f"{done.stdout}\n{done.stderr}")
    return done


def agent(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "trackmux", "agent", *args],
                            env=env_for(root), cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def create(root: Path, yaml_text: str, *extra: str) -> str:
    path = root / "sweep.yaml"
    path.write_text(textwrap.dedent(yaml_text))
    done = cli(root, "sweep", "create", str(path), *extra)
    return done.stdout.strip().splitlines()[-1]


def show(root: Path, sweep_id: str, *extra: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(cli(root, "sweep", "show", sweep_id, "--json",
                                          *extra).stdout)
    return data


def run_meta(run_dir: str) -> dict[str, Any]:
    """A trial run's meta (state, tags ...) as its spool has it."""
    return spool_meta(Path(run_dir))


def run_config(run_dir: str) -> dict[str, Any]:
    """A trial run's config, merged as every reader shows it."""
    from trackmux.core.configmerge import merged
    from trackmux.core.events import ConfigEvent
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(Path(run_dir))
    try:
        events = reader.events_of_kind("config")
    finally:
        reader.close()
    return merged(e.config for e in events if isinstance(e, ConfigEvent))
