"""`wandb agent` through trackmux, offline (docs/sweeps.md#wandb-agent): a program started
with the variables wandb's agent sets logs through trackmux's wandb backend into the
agent's run id, with the sweep id and the sweep's parameters in wandb's run record.

wandb's agent needs the wandb server (it asks it for runs), so what is checked is the
program's side: the variables it sets (``WANDB_RUN_ID``, ``WANDB_SWEEP_ID``,
``WANDB_SWEEP_PARAM_PATH``, ``WANDB_PROJECT``), its parameter file in wandb's format, and
the run the program writes, read back from wandb's own transaction log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("wandb")

from trackmux.plugins.wandb import read_records, run_files

PROGRAM = textwrap.dedent("""
    import sys, trackmux
    lr = float(sys.argv[1].split("=", 1)[1])       # the agent passes --lr=0.01
    run = trackmux.init(project="mine", backends=["wandb"], config={"lr": lr})
    for step in range(5):
        run.log({"score": lr * step}, step=step)
    assert run.finish(timeout=120).complete
""")


def test_a_program_started_by_wandb_agent_logs_into_the_agents_run(tmp_path: Path) -> None:
    # the file wandb's agent writes for each run: config-<run id>.yaml, {name: {value: v}}
    params = tmp_path / "config-swrun001.yaml"
    params.write_text("wandb_version: 1\n\nlr:\n  value: 0.01\nkl_coef:\n  value: 0.2\n")
    program = tmp_path / "train.py"
    program.write_text(PROGRAM)
    env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true",
               WANDB_RUN_ID="swrun001", WANDB_SWEEP_ID="sweep42x",
               WANDB_SWEEP_PARAM_PATH=str(params), WANDB_PROJECT="agent-project",
               TRACKMUX_DIR=str(tmp_path / "root"), TRACKMUX_PROVENANCE="0")
    for name in ("WANDB_DIR", "WANDB_ENTITY", "WANDB_API_KEY", "WANDB_RESUME"):
        env.pop(name, None)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    subprocess.run([sys.executable, str(program), "--lr=0.01"], env=env, cwd=tmp_path,
                   check=True, timeout=300)
    (run_dir,) = (tmp_path / "root" / "mine").iterdir()
    logs = run_files(run_dir / "wandb", "swrun001")
    assert len(logs) == 1  # one wandb run, under the agent's run id
    records = list(read_records(logs[0]))
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert run.run_id == "swrun001" and run.sweep_id == "sweep42x"
    assert run.project == "agent-project"  # wandb puts a sweep's runs in its project
    config = {item.key: json.loads(item.value_json) for item in run.config.update}
    assert config["lr"] == 0.01 and config["kl_coef"] == 0.2  # from the agent's file
    scores = [json.loads(item.value_json) for r in records
              if r.WhichOneof("record_type") == "history"
              for item in r.history.item if list(item.nested_key) == ["score"]]
    assert scores == [0.0, 0.01, 0.02, 0.03, 0.04]
