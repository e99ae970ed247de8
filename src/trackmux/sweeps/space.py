"""wandb's distributions as Optuna search spaces.

Optuna samples in its own space and the program gets wandb's value:

- ``uniform``, ``int_uniform``, ``log_uniform_values``: Optuna's float/int distributions.
- ``log_uniform`` (bounds are exponents): log-uniform between ``e**min`` and ``e**max``.
- ``inv_log_uniform_values``: ``1/X`` log-uniform is ``X`` log-uniform on the same
  bounds; ``inv_log_uniform`` (exponents): log-uniform on ``e**-max .. e**-min``.
- ``q_*``: sampled as their base, then rounded to a multiple of ``q`` (wandb's rule);
  ``q_uniform`` and ``int_uniform`` with ``q`` use Optuna's ``step`` instead.
- the normal family: Optuna samples the quantile ``u`` uniformly in (0.0005, 0.9995) and
  the program gets the normal's inverse CDF at ``u`` (an exact normal draw for random
  search, a bounded space TPE can model); ``log_normal`` is ``exp`` of it.

The values the program got are kept in the trial's user attribute ``params``.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

from trackmux.sweeps.spec import Param

QUANTILE_EDGE = 0.0005


def distribution(param: Param) -> Any:
    """The Optuna distribution Optuna samples for ``param``."""
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    d = param.distribution
    if d == "constant":
        return CategoricalDistribution([_choice(param.value)])
    if d == "categorical":
        return CategoricalDistribution([_choice(v) for v in param.values])
    if d == "int_uniform":
        return IntDistribution(int(param.min), int(param.max), step=int(param.q or 1))
    if d == "uniform":
        return FloatDistribution(param.min, param.max)
    if d == "q_uniform":
        return FloatDistribution(param.min, param.max, step=param.q)
    if d in ("log_uniform", "q_log_uniform"):
        return FloatDistribution(math.exp(param.min), math.exp(param.max), log=True)
    if d in ("log_uniform_values", "q_log_uniform_values", "inv_log_uniform_values"):
        return FloatDistribution(param.min, param.max, log=True)
    if d == "inv_log_uniform":
        return FloatDistribution(math.exp(-param.max), math.exp(-param.min), log=True)
    return FloatDistribution(QUANTILE_EDGE, 1 - QUANTILE_EDGE)  # the normal family


def _choice(value: Any) -> Any:
    """Optuna's categories are None, bool, int, float or str: others travel as JSON."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    import json

    return "json:" + json.dumps(value, sort_keys=True)


def program_value(param: Param, sampled: Any) -> Any:
    """What the program gets for Optuna's ``sampled`` value."""
    d = param.distribution
    if isinstance(sampled, str) and sampled.startswith("json:"):
        import json

        return json.loads(sampled[5:])
    if d in ("normal", "q_normal", "log_normal", "q_log_normal"):
        value = NormalDist(param.mu, param.sigma).inv_cdf(float(sampled))
        if d in ("log_normal", "q_log_normal"):
            value = math.exp(value)
        sampled = value
    if d in ("q_log_uniform", "q_log_uniform_values", "q_normal", "q_log_normal") and param.q:
        sampled = round(float(sampled) / param.q) * param.q
        if float(param.q).is_integer():
            sampled = int(sampled)
    return sampled


def suggest(trial: Any, name: str, dist: Any) -> Any:
    """Draw ``name`` from ``dist`` with the study's current sampler (Optuna's public
    ``suggest_*``, the same draw ``ask(distributions)`` makes)."""
    from optuna.distributions import CategoricalDistribution, IntDistribution

    if isinstance(dist, CategoricalDistribution):
        return trial.suggest_categorical(name, dist.choices)
    if isinstance(dist, IntDistribution):
        return trial.suggest_int(name, dist.low, dist.high, step=dist.step, log=dist.log)
    return trial.suggest_float(name, dist.low, dist.high, step=dist.step, log=dist.log)


def distributions(params: tuple[Param, ...]) -> dict[str, Any]:
    return {p.name: distribution(p) for p in params}


def grid(params: tuple[Param, ...]) -> dict[str, list[Any]]:
    """The grid sampler's search space (spec.parse allows only discrete parameters)."""
    out: dict[str, list[Any]] = {}
    for p in params:
        if p.distribution == "constant":
            out[p.name] = [_choice(p.value)]
        elif p.distribution == "categorical":
            out[p.name] = [_choice(v) for v in p.values]
        else:
            out[p.name] = list(range(int(p.min), int(p.max) + 1, int(p.q or 1)))
    return out


def grid_size(params: tuple[Param, ...]) -> int:
    return math.prod(len(v) for v in grid(params).values())
