"""A real small sweep for the Sweeps tab: made with trackmux's sweeps module (a study in
ROOT/.sweeps/sweeps.db, trials asked and told through the agent's own calls), each trial
a real trackmux run, with no subprocess."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ui_support import make_run

SWEEP = {"program": "train.py", "method": "random",
         "metric": {"name": "reward/mean", "goal": "maximize"},
         "parameters": {"lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-1},
                        "kl_coef": {"values": [0.01, 0.1]}},
         "sampler": {"seed": 3}}
REASON = "reward_collapse (critical) at step 12: reward/mean fell from 0.8 to 0.1"
# a failed trial keeps the last lines its program wrote to stderr (sweeps/tail.py)
STDERR = ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>',
          "ValueError: lr must be > 0"]
FAILED = "the program exited with code 1: ValueError: lr must be > 0"


def make_sweep(root: Path, elsewhere: Path, storage: str | None = None,
               **run_options: Any) -> dict[str, Any]:
    """Six trials: the lowest lr pruned by the doctor (REASON), the next failed (no run),
    four complete with value 10 * lr, the largest lr's run in ``elsewhere`` (not served).
    Returns the sweep id, the trials by number and each one's run folder.

    ``storage``: Optuna's storage URL (default: the SQLite file under ``root``);
    ``run_options``: for each trial's ``make_run`` (backends that deliver it)."""
    from trackmux.sweeps import study
    from trackmux.sweeps.agent import Agent, Outcome
    from trackmux.sweeps.spec import parse
    from trackmux.sweeps.storage import default_url

    sweep = study.create(parse(SWEEP), storage or default_url(root))
    agent = Agent(sweep, root=root, echo=lambda line: None)
    trials = [agent._ask() for _ in range(6)]
    by_lr = sorted(trials, key=lambda t: t.params["lr"])
    runs: dict[int, Path] = {}
    for rank, trial in enumerate(by_lr):
        params = {"lr": trial.params["lr"], "kl_coef": trial.params["kl_coef"]}
        trial.set_user_attr("params", params)
        if rank == 1:
            agent._tell(trial, Outcome(trial.number, "failed", params, reason=FAILED,
                                       stderr=STDERR))
            continue
        folder = elsewhere if rank == len(by_lr) - 1 else root
        run_dir = make_run(folder, f"trial-{trial.number}", 20 if rank else 13,
                           config={"sweep": {"id": sweep.id, "trial": trial.number,
                                             "params": params}}, doctor=False,
                           **run_options)
        runs[trial.number] = run_dir
        if rank == 0:
            out = Outcome(trial.number, "pruned", params, value=0.05, reason=REASON,
                          pruned_by="doctor", run_id=run_dir.name, run_dir=str(run_dir),
                          steps=13)
            agent._mark_pruned(run_dir, out)
        else:
            out = Outcome(trial.number, "complete", params, value=10 * params["lr"],
                          run_id=run_dir.name, run_dir=str(run_dir), steps=20)
        agent._tell(trial, out)
    return {"id": sweep.id, "by_lr": [t.number for t in by_lr], "runs": runs, "agent": agent}


def make_sweep_in(tmp_path: Path) -> dict[str, Any]:
    """:func:`make_sweep` with the served root ``tmp_path/root`` (also ``made["root"]``)
    and the unserved folder ``tmp_path/elsewhere``; skips the test without Optuna."""
    pytest.importorskip("optuna")
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    made = make_sweep(root, elsewhere)
    made["root"] = root
    return made


def tell_one_more(made: dict[str, Any], value: float) -> int:
    """One more complete trial (no run), told as the agent tells it; its number."""
    from trackmux.sweeps.agent import Outcome

    agent = made["agent"]
    trial = agent._ask()
    params = {"lr": trial.params["lr"], "kl_coef": trial.params["kl_coef"]}
    trial.set_user_attr("params", params)
    agent._tell(trial, Outcome(trial.number, "complete", params, value=value, steps=20))
    return int(trial.number)


def refused_write(storage: Any) -> list[str]:
    """Try one write through an Optuna storage the UI opened read-only; return the chain of
    error messages it raised (Optuna wraps the database's own), after checking that nothing
    was written."""
    import pytest

    (study,) = storage.get_all_studies()
    with pytest.raises(Exception) as refused:
        storage.set_study_user_attr(study._study_id, "written", True)
    causes = []
    error: BaseException | None = refused.value
    while error is not None:
        causes.append(str(error))
        error = error.__cause__ or error.__context__
    assert "written" not in storage.get_all_studies()[0].user_attrs
    return causes
