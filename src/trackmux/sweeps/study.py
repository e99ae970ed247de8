"""A sweep is an Optuna study: its name is the sweep id, its user attributes hold the
sweep file, and each trial's user attributes hold what the agent saw (run, steps, reason).

Samplers: ``bayes`` is TPE, ``grid`` the grid sampler, ``random`` the random sampler.
With ``sampler: {seed: S}`` trial ``n`` is sampled with seed ``S + n`` (a sampler made per
trial), so a sweep is repeatable and two agents never draw the same random start.
Pruners on the metric (``early_terminate``): hyperband and median.
"""

from __future__ import annotations

import json
import secrets
import string
import time
from dataclasses import dataclass
from typing import Any

from trackmux.sweeps import space
from trackmux.sweeps.spec import SweepSpec, parse
from trackmux.sweeps.storage import open_storage, safe_url

ID_ALPHABET = string.ascii_lowercase + string.digits


def new_sweep_id() -> str:
    return "".join(secrets.choice(ID_ALPHABET) for _ in range(8))


@dataclass
class Sweep:
    id: str
    spec: SweepSpec
    study: Any
    storage_url: str

    def sampler(self, number: int | None = None) -> Any:
        import optuna

        options = self.spec.sampler
        seed = options.get("seed")
        if seed is not None and number is not None:
            seed = int(seed) + number
        if self.spec.method == "grid":
            return optuna.samplers.GridSampler(space.grid(self.spec.params), seed=seed)
        if self.spec.method == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        kwargs: dict[str, Any] = {"seed": seed}
        if "n_startup_trials" in options:
            kwargs["n_startup_trials"] = int(options["n_startup_trials"])
        if options.get("constant_liar"):
            kwargs["constant_liar"] = True
        return optuna.samplers.TPESampler(**kwargs)

    def pruner(self) -> Any:
        import optuna

        early = self.spec.early_terminate
        if early is None:
            return optuna.pruners.NopPruner()
        if early.type == "hyperband":
            return optuna.pruners.HyperbandPruner(
                min_resource=early.min_iter, max_resource=early.max_iter or "auto",
                reduction_factor=early.eta)
        return optuna.pruners.MedianPruner(n_startup_trials=early.n_startup_trials,
                                           n_warmup_steps=early.n_warmup_steps,
                                           interval_steps=early.interval_steps)

    def trials(self) -> list[Any]:
        return list(self.study.get_trials(deepcopy=False))

    def budget_left(self) -> bool:
        """Whether the sweep wants another trial: under ``run_cap``, the grid not done.
        A trial enqueued and not yet asked for (WAITING) is work to do, not budget used."""
        from optuna.trial import TrialState

        trials = self.trials()
        if any(t.state == TrialState.WAITING for t in trials):
            return True
        count = len(trials)
        if self.spec.run_cap is not None and count >= self.spec.run_cap:
            return False
        return not (self.spec.method == "grid" and count >= space.grid_size(self.spec.params))


def _jsonable(data: Any) -> Any:
    return json.loads(json.dumps(data, default=str))


def create(spec: SweepSpec, storage_url: str, sweep_id: str | None = None) -> Sweep:
    import optuna

    from trackmux import __version__

    storage = open_storage(storage_url)
    sweep_id = sweep_id or new_sweep_id()
    goal = spec.goal if spec.metric_name else "maximize"
    direction = (optuna.study.StudyDirection.MINIMIZE if goal == "minimize"
                 else optuna.study.StudyDirection.MAXIMIZE)
    study = optuna.create_study(storage=storage, study_name=sweep_id, direction=direction)
    study.set_user_attr("sweep", _jsonable(spec.raw))
    study.set_user_attr("created_at", time.time())
    study.set_user_attr("trackmux_version", __version__)
    return Sweep(sweep_id, spec, study, storage_url)


def load(sweep_id: str, storage_url: str) -> Sweep:
    """The sweep ``sweep_id``; KeyError naming the storage when there is none."""
    import optuna

    storage = open_storage(storage_url)
    try:
        study = optuna.load_study(study_name=sweep_id, storage=storage)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        raise KeyError(f"no sweep {sweep_id!r} in {safe_url(storage_url)}; sweeps there: "
                       f"{', '.join(names[-10:]) or 'none'}") from None
    spec = parse(study.user_attrs.get("sweep") or {})
    sweep = Sweep(sweep_id, spec, study, storage_url)
    study.pruner = sweep.pruner()
    return sweep
