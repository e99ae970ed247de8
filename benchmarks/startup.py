"""B5 start-up: ``import trackmux``, and ``init()`` to the first ``log()`` return, in fresh
processes, in three set-ups: the benchmark venv as it is (trackmux's own six backends,
no third-party plugin); with a third-party plugin installed (the example distribution
``examples/trackmux-csv``, installed by pip into a directory put on ``PYTHONPATH``);
and with plugin autoload off (``TRACKMUX_DISABLE_PLUGIN_AUTOLOAD=1``: trackmux's own only).
verl's ``Tracking(...)`` plus its first ``log()`` with the same four backends is the
comparison for init with the four backends. Also reported: the time until every backend
has acknowledged that first event (backends open in the delivery process, after init).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

IMPORT = ("import time; t = time.perf_counter(); import trackmux; "
          "print(time.perf_counter() - t)")

INIT = r"""
import json, sys, time
from pathlib import Path
sys.path.insert(0, {cwd!r})
from benchmarks.common import payload, trackmux_options, wait_delivered
import trackmux
root = Path({root!r})
backends = {backends!r}
opts = trackmux_options(root, {uri!r})
data = payload(0)
t0 = time.perf_counter()
run = trackmux.init(project="bench", name="b5", backends=backends, dir=root / "spool",
                    backend_options={{b: opts[b] for b in backends if b in opts}})
t1 = time.perf_counter()
run.log(data, step=0)
t2 = time.perf_counter()
ok = wait_delivered(run, 120)
t3 = time.perf_counter()
state = {{name: acked for name, (acked, _) in run.delivery().items()}}
problems = [f"{{p.backend}}/{{p.kind}}: {{p.message}}"[:300] for p in run.problems()]
from trackmux.core.backends.registry import get_registry
plugins = sorted(p.name for p in get_registry().plugins)
run.finish(timeout=30)
print(json.dumps({{"init": t1 - t0, "first_log": t2 - t1, "init_to_log": t2 - t0,
                  "first_delivered": t3 - t0, "delivered": ok, "workers": state,
                  "problems": problems, "plugins": plugins}}))
"""

VERL = r"""
import json, os, sys, time
sys.path.insert(0, {cwd!r})
os.environ["MLFLOW_TRACKING_URI"] = {uri!r}
from benchmarks.common import payload
t0 = time.perf_counter()
from verl.utils.tracking import Tracking
t1 = time.perf_counter()
data = payload(0)
tr = Tracking(project_name="bench", experiment_name="b5-verl",
              default_backend=["wandb", "mlflow", "tensorboard", "swanlab"], config={{}})
tr.log(data=data, step=0)
t2 = time.perf_counter()
tr.finish()
print(json.dumps({{"import": t1 - t0, "init_to_log": t2 - t1}}))
"""


def _run(code: str, env: dict[str, str], timeout: float = 300) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"b5 child failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    root = Path(args.root) / "b5"
    root.mkdir(parents=True, exist_ok=True)
    cwd = str(Path(__file__).resolve().parent.parent)
    env_on = dict(os.environ)
    env_off = {**env_on, "TRACKMUX_DISABLE_PLUGIN_AUTOLOAD": "1"}
    site = root / "plugin-site"  # a real pip install of the example plugin, outside the venv
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
           str(Path(cwd) / "examples" / "trackmux-csv")]
    if subprocess.run([*pip, "--no-build-isolation"], env=env_on).returncode != 0:
        shutil.rmtree(site, ignore_errors=True)  # no setuptools in the venv: let pip fetch it
        subprocess.run(pip, check=True, env=env_on)
    env_plugin = {**env_on, "PYTHONPATH": os.pathsep.join(
        [str(site)] + ([env_on["PYTHONPATH"]] if env_on.get("PYTHONPATH") else []))}
    out: dict[str, Any] = {}
    from trackmux.testing.mlflow_server import MlflowServer

    server = MlflowServer(root / "mlflow")
    server.start()
    try:
        setups = (("autoload_on", env_on, True), ("plugin_installed", env_plugin, False),
                  ("autoload_off", env_off, True))
        for label, env, with_four in setups:
            imports = [float(subprocess.run([sys.executable, "-c", IMPORT], env=env, text=True,
                                            capture_output=True, check=True).stdout)
                       for _ in range(args.repeat)]
            res: dict[str, Any] = {"import_s": statistics.median(imports)}
            for name, backends in (("file", ["file"]),
                                   ("four", ["wandb", "mlflow", "tensorboard", "swanlab"])):
                if name == "four" and not with_four:
                    continue
                opts_root = root / label / name
                opts_root.mkdir(parents=True, exist_ok=True)
                reps = [_run(INIT.format(cwd=cwd, root=str(opts_root), backends=backends,
                                         uri=server.url if name == "four" else ""), env)
                        for _ in range(args.repeat if name == "file" else 2)]
                res[name] = {k: statistics.median(r[k] for r in reps)
                             for k in ("init", "first_log", "init_to_log", "first_delivered")}
                res[name]["delivered"] = all(r["delivered"] for r in reps)
                res[name]["plugins"] = reps[0]["plugins"]
                res[name]["reps"] = reps
            out[label] = res
        verl = _run(VERL.format(cwd=cwd, uri=server.url), env_on)
        out["verl"] = verl
        out["ratio_verl_over_trackmux_init_to_log"] = (
            verl["init_to_log"] / out["autoload_on"]["four"]["init_to_log"])
    finally:
        server.stop()
    Path(args.out).write_text(json.dumps({"B5": out}, indent=1))


if __name__ == "__main__":
    main()
