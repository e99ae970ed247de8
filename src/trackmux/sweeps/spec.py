"""A sweep file in wandb's format, read and checked before anything is created.

    program: train.py
    method: bayes                      # grid | random | bayes
    metric: {name: reward/mean, goal: maximize}
    parameters:
      lr: {distribution: log_uniform_values, min: 1.0e-4, max: 1.0e-2}
      kl_coef: {values: [0.001, 0.01, 0.1]}
    early_terminate: {type: hyperband, min_iter: 10}
    prune: {severity: critical}        # trackmux: the doctor stops trials that go wrong
                                       # (default: critical findings and WRONG_RULES)

Everything wrong is reported at once, each error naming its field
(``parameters.lr.min: must be below max (0.1 >= 0.01)``), so a sweep never starts with a
file that fails later. Nested ``parameters`` are flattened to dotted names
(``actor.lr``), which is what Hydra programs take. Only the standard library is used here:
``trackmux sweep create --help`` and the trial's ``trackmux.init`` never import Optuna.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trackmux.core.events import SEVERITIES

METHODS = ("grid", "random", "bayes")
GOALS = ("maximize", "minimize")
SUMMARIES = ("last", "best")
#: wandb's distributions and the keys each one needs
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "constant": ("value",),
    "categorical": ("values",),
    "int_uniform": ("min", "max"),
    "uniform": ("min", "max"),
    "q_uniform": ("min", "max"),
    "log_uniform": ("min", "max"),
    "log_uniform_values": ("min", "max"),
    "q_log_uniform": ("min", "max"),
    "q_log_uniform_values": ("min", "max"),
    "inv_log_uniform": ("min", "max"),
    "inv_log_uniform_values": ("min", "max"),
    "normal": (),
    "q_normal": (),
    "log_normal": (),
    "q_log_normal": (),
}
UNSUPPORTED = {
    "categorical_w_probabilities": "Optuna samples categories uniformly; drop "
                                   "'probabilities' and use 'values'",
    "beta": "no beta distribution yet; use uniform or a list of values",
    "q_beta": "no beta distribution yet; use q_uniform or a list of values",
}
PARAM_KEYS = {"distribution", "value", "values", "min", "max", "q", "mu", "sigma",
              "probabilities", "a", "b", "parameters"}
TOP_KEYS = {"program", "command", "method", "metric", "parameters", "early_terminate",
            "prune", "name", "description", "project", "entity", "run_cap", "sampler",
            "controller", "imports", "job", "run_name"}
DEFAULT_COMMAND: tuple[str, ...] = ("${env}", "${interpreter}", "${program}", "${args}")


class SweepSpecError(ValueError):
    """The sweep file is wrong; ``errors`` lists every problem, each naming its field."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("bad sweep file:\n  " + "\n  ".join(errors))


@dataclass(frozen=True)
class Param:
    """One parameter: its dotted ``name``, wandb ``distribution`` and the bounds it uses."""

    name: str
    distribution: str
    value: Any = None
    values: tuple[Any, ...] = ()
    min: float = 0.0
    max: float = 0.0
    q: float | None = None
    mu: float = 0.0
    sigma: float = 1.0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"distribution": self.distribution}
        if self.distribution == "constant":
            out["value"] = self.value
        elif self.distribution == "categorical":
            out["values"] = list(self.values)
        elif DISTRIBUTIONS[self.distribution]:
            out.update(min=self.min, max=self.max)
        else:
            out.update(mu=self.mu, sigma=self.sigma)
        if self.q is not None:
            out["q"] = self.q
        return out


#: the doctor's rules whose findings say "this trial is going wrong", whatever their
#: severity: they are the signs of reward hacking (the samples turn repetitive, a reward
#: component turns against the rest, a component rises while the held-out reward falls,
#: the reward model's score climbs while the checked reward has stopped), and they come
#: tens of steps before the reward collapses (benchmark B13). A sweep prunes on them by
#: default; ``prune: {rules: []}`` keeps critical findings only.
WRONG_RULES = ("component_divergence", "degenerate_text", "overoptimization",
               "reward_hacking")


@dataclass(frozen=True)
class Prune:
    """When the doctor stops a trial: a finding of ``rules`` (any severity), or of any rule
    at ``severity`` or above (None: severity alone stops nothing); never one of ``ignore``."""

    doctor: bool = True
    severity: str | None = "critical"
    rules: tuple[str, ...] = WRONG_RULES
    ignore: tuple[str, ...] = ()
    grace_seconds: float = 30.0

    def stops(self, finding: Mapping[str, Any]) -> bool:
        if not self.doctor:
            return False
        rule, severity = str(finding.get("rule")), str(finding.get("severity"))
        if rule in self.ignore or rule == "doctor":
            return False
        if rule in self.rules:
            return True
        if self.severity is None:
            return False
        return severity in SEVERITIES and (SEVERITIES.index(severity)
                                           >= SEVERITIES.index(self.severity))


@dataclass(frozen=True)
class EarlyTerminate:
    """Optuna's pruner on the metric: ``hyperband`` (wandb's) or ``median`` (trackmux's)."""

    type: str
    min_iter: int = 1
    max_iter: int | None = None
    eta: int = 3
    n_startup_trials: int = 5
    n_warmup_steps: int = 0
    interval_steps: int = 1


@dataclass(frozen=True)
class SweepSpec:
    program: str | None
    command: tuple[str, ...]
    method: str
    metric_name: str | None
    goal: str
    summary: str
    params: tuple[Param, ...]
    early_terminate: EarlyTerminate | None
    prune: Prune
    name: str | None = None
    project: str | None = None
    run_cap: int | None = None
    sampler: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    #: the trial runs' name, ``${trial}`` and ``${<parameter>}`` filled in (sweeps/join.py)
    run_name: str | None = None

    @property
    def direction(self) -> str:
        return self.goal


def _number(errors: list[str], where: str, value: Any, *, integer: bool = False,
            positive: bool = False) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        errors.append(f"{where}: must be a {'whole ' if integer else ''}number, got {value!r}")
        return None
    if integer and not float(value).is_integer():
        errors.append(f"{where}: must be a whole number, got {value!r}")
        return None
    if positive and value <= 0:
        errors.append(f"{where}: must be > 0, got {value!r}")
        return None
    return value


def _infer(given: Mapping[str, Any]) -> str:
    if "value" in given:
        return "constant"
    if "values" in given:
        return "categorical"
    if "mu" in given or "sigma" in given:
        return "normal"
    low, high = given.get("min"), given.get("max")
    if type(low) is int and type(high) is int:
        return "int_uniform"
    return "uniform"


def _param(errors: list[str], name: str, given: Any) -> Param | None:
    where = f"parameters.{name}"
    if not isinstance(given, Mapping):
        errors.append(f"{where}: must be a mapping such as {{values: [...]}} or "
                      f"{{min: ..., max: ...}}, got {given!r}")
        return None
    unknown = sorted(str(k) for k in given if k not in PARAM_KEYS)
    if unknown:
        errors.append(f"{where}: unknown key(s) {unknown}; known: {sorted(PARAM_KEYS)}")
    dist = given.get("distribution") or _infer(given)
    if dist in UNSUPPORTED:
        errors.append(f"{where}.distribution: {dist} is not supported: {UNSUPPORTED[dist]}")
        return None
    if dist not in DISTRIBUTIONS:
        errors.append(f"{where}.distribution: unknown {dist!r}; known: "
                      f"{sorted(DISTRIBUTIONS)}")
        return None
    missing = [k for k in DISTRIBUTIONS[dist] if k not in given]
    if missing:
        errors.append(f"{where}: distribution {dist} needs {' and '.join(missing)}")
        return None
    before = len(errors)
    q = None
    if dist.startswith("q_") or ("q" in given and dist == "int_uniform"):
        q = _number(errors, f"{where}.q", given.get("q", 1.0), positive=True)
    elif "q" in given:
        errors.append(f"{where}.q: only the q_ distributions (and int_uniform) take q")
    if dist == "constant":
        return Param(name, dist, value=given["value"])
    if dist == "categorical":
        values = given["values"]
        if not isinstance(values, list) or not values:
            errors.append(f"{where}.values: must be a non-empty list, got {values!r}")
            return None
        return Param(name, dist, values=tuple(values))
    if not DISTRIBUTIONS[dist]:  # the normal family
        mu = _number(errors, f"{where}.mu", given.get("mu", 0.0))
        sigma = _number(errors, f"{where}.sigma", given.get("sigma", 1.0), positive=True)
        if len(errors) > before or mu is None or sigma is None:
            return None
        return Param(name, dist, mu=float(mu), sigma=float(sigma), q=q)
    integer = dist == "int_uniform"
    low = _number(errors, f"{where}.min", given["min"], integer=integer)
    high = _number(errors, f"{where}.max", given["max"], integer=integer)
    if low is None or high is None or len(errors) > before:
        return None
    if low >= high:
        errors.append(f"{where}.min: must be below max ({low!r} >= {high!r})")
        return None
    if dist in ("log_uniform_values", "q_log_uniform_values", "inv_log_uniform_values") \
            and low <= 0:
        errors.append(f"{where}.min: {dist} needs min > 0, got {low!r}")
        return None
    return Param(name, dist, min=low, max=high, q=q)


def _flatten(errors: list[str], given: Any, prefix: str = "") -> list[Param]:
    if not isinstance(given, Mapping) or not given:
        errors.append(f"parameters{'.' + prefix if prefix else ''}: must be a non-empty "
                      f"mapping of parameter names, got {given!r}")
        return []
    out: list[Param] = []
    for key, value in given.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and "parameters" in value:
            out += _flatten(errors, value["parameters"], name)
            continue
        param = _param(errors, name, value)
        if param is not None:
            out.append(param)
    return out


def _metric(errors: list[str], given: Any) -> tuple[str | None, str, str]:
    if given is None:
        return None, "maximize", "last"
    if not isinstance(given, Mapping):
        errors.append(f"metric: must be a mapping {{name, goal}}, got {given!r}")
        return None, "maximize", "last"
    name = given.get("name")
    if not isinstance(name, str) or not name:
        errors.append(f"metric.name: must name the metric the program logs, got {name!r}")
    goal = given.get("goal", "minimize")  # wandb's default
    if goal not in GOALS:
        errors.append(f"metric.goal: must be one of {list(GOALS)}, got {goal!r}")
    summary = given.get("summary", "last")
    if summary not in SUMMARIES:
        errors.append(f"metric.summary: must be one of {list(SUMMARIES)} (the last value "
                      f"logged, or the best by goal), got {summary!r}")
    return (name if isinstance(name, str) else None), str(goal), str(summary)


def _early_terminate(errors: list[str], given: Any) -> EarlyTerminate | None:
    if given is None:
        return None
    if not isinstance(given, Mapping):
        errors.append(f"early_terminate: must be a mapping {{type: hyperband, ...}}, got "
                      f"{given!r}")
        return None
    kind = given.get("type")
    known = {"hyperband": {"type", "min_iter", "max_iter", "eta", "s", "strict"},
             "median": {"type", "n_startup_trials", "n_warmup_steps", "interval_steps"}}
    if kind not in known:
        errors.append(f"early_terminate.type: must be hyperband or median, got {kind!r}")
        return None
    unknown = sorted(str(k) for k in given if k not in known[kind])
    if unknown:
        errors.append(f"early_terminate: unknown key(s) {unknown} for {kind}")
    ints: dict[str, int] = {}
    for key in known[kind] - {"type", "strict"}:
        if key in given:
            value = _number(errors, f"early_terminate.{key}", given[key], integer=True)
            if value is not None:
                ints[key] = int(value)
    if kind == "hyperband":
        if "s" in ints and "max_iter" not in ints:
            errors.append("early_terminate.s: trackmux needs max_iter (Optuna's hyperband "
                          "takes the largest step, not the number of brackets)")
        return EarlyTerminate("hyperband", min_iter=max(1, ints.get("min_iter", 1)),
                              max_iter=ints.get("max_iter"), eta=max(2, ints.get("eta", 3)))
    return EarlyTerminate("median", n_startup_trials=ints.get("n_startup_trials", 5),
                          n_warmup_steps=ints.get("n_warmup_steps", 0),
                          interval_steps=max(1, ints.get("interval_steps", 1)))


def _prune(errors: list[str], given: Any) -> Prune:
    if given is None or given is True:
        return Prune()
    if given is False:
        return Prune(doctor=False)
    if not isinstance(given, Mapping):
        errors.append(f"prune: must be true, false or a mapping, got {given!r}")
        return Prune()
    allowed = {"doctor", "severity", "rules", "ignore", "grace_seconds"}
    unknown = sorted(str(k) for k in given if k not in allowed)
    if unknown:
        errors.append(f"prune: unknown key(s) {unknown}; known: {sorted(allowed)}")
    doctor = given.get("doctor", True)
    if not isinstance(doctor, bool):
        errors.append(f"prune.doctor: must be true or false, got {doctor!r}")
        doctor = True
    severity = given.get("severity", "critical")
    if severity in (None, False, "off", "none"):
        severity = None
    elif severity not in SEVERITIES:
        errors.append(f"prune.severity: must be one of {list(SEVERITIES)} or off, got "
                      f"{severity!r}")
        severity = "critical"
    lists: dict[str, tuple[str, ...]] = {}
    for key, default in (("rules", list(WRONG_RULES)), ("ignore", [])):
        value = given.get(key, default)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            errors.append(f"prune.{key}: must be a list of doctor rule names, got {value!r}")
            value = []
        lists[key] = tuple(value)
    if "rules" in given or "ignore" in given:  # the defaults need no check (nor the import)
        from trackmux.doctor.registry import rules as known_rules

        known = known_rules()
        for key, names in lists.items():
            bad = [n for n in names if n not in known and key in given]
            if bad:
                errors.append(f"prune.{key}: unknown doctor rule(s) {bad}; known: "
                              f"{sorted(known)}")
    grace = _number(errors, "prune.grace_seconds", given.get("grace_seconds", 30.0),
                    positive=True)
    return Prune(doctor, severity, lists["rules"], lists["ignore"],
                 float(grace if grace is not None else 30.0))


def _command(errors: list[str], given: Any, program: Any) -> tuple[str, ...]:
    if given is None:
        command = DEFAULT_COMMAND
    elif not isinstance(given, list) or not given or not all(
            isinstance(c, (str, int, float)) for c in given):
        errors.append(f"command: must be a non-empty list of strings, got {given!r}")
        return DEFAULT_COMMAND
    else:
        command = tuple(str(c) for c in given)
    if any("${program}" in c for c in command) and not isinstance(program, str):
        errors.append("program: the command uses ${program}, so the sweep needs "
                      f"'program: script.py', got {program!r}")
    return command


def parse(data: Any) -> SweepSpec:
    """A checked :class:`SweepSpec` from the loaded YAML; raises :class:`SweepSpecError`
    listing every problem."""
    errors: list[str] = []
    if not isinstance(data, Mapping):
        raise SweepSpecError([f"the file must hold a mapping (program, method, metric, "
                              f"parameters, ...), got {type(data).__name__}"])
    unknown = sorted(str(k) for k in data if k not in TOP_KEYS)
    if unknown:
        errors.append(f"unknown top-level key(s) {unknown}; known: {sorted(TOP_KEYS)}")
    program = data.get("program")
    if program is not None and not isinstance(program, str):
        errors.append(f"program: must be a path or module, got {program!r}")
    method = data.get("method")
    if method not in METHODS:
        errors.append(f"method: must be one of {list(METHODS)}, got {method!r}")
    metric_name, goal, summary = _metric(errors, data.get("metric"))
    if metric_name is None and method == "bayes" and "metric" not in data:
        errors.append("metric: method bayes needs a metric {name, goal} to optimise")
    params = _flatten(errors, data.get("parameters"))
    if method == "grid":
        for p in params:
            if p.distribution not in ("constant", "categorical") and not (
                    p.distribution == "int_uniform" and p.max - p.min <= 10_000):
                errors.append(f"parameters.{p.name}: method grid needs a list of values "
                              f"(or a constant, or int_uniform), got {p.distribution}")
    early = _early_terminate(errors, data.get("early_terminate"))
    if early is not None and metric_name is None:
        errors.append("early_terminate: prunes on the metric, so the sweep needs "
                      "metric: {name, goal}")
    prune = _prune(errors, data.get("prune"))
    command = _command(errors, data.get("command"), program)
    run_cap = data.get("run_cap")
    if run_cap is not None:
        checked = _number(errors, "run_cap", run_cap, integer=True, positive=True)
        run_cap = None if checked is None else int(checked)
    sampler = data.get("sampler") or {}
    if not isinstance(sampler, Mapping):
        errors.append(f"sampler: must be a mapping (seed, n_startup_trials, constant_liar), "
                      f"got {sampler!r}")
        sampler = {}
    for key, value in sampler.items():
        if key == "seed" or key == "n_startup_trials":
            _number(errors, f"sampler.{key}", value, integer=True)
        elif key == "constant_liar":
            if not isinstance(value, bool):
                errors.append(f"sampler.constant_liar: must be true or false, got {value!r}")
        else:
            errors.append(f"sampler: unknown key {key!r}; known: seed, n_startup_trials, "
                          "constant_liar")
    for key in ("name", "project", "run_name"):
        if data.get(key) is not None and not isinstance(data.get(key), str):
            errors.append(f"{key}: must be a string, got {data.get(key)!r}")
    if isinstance(data.get("run_name"), str):
        from trackmux.sweeps.join import placeholders

        known = ["trial", *(p.name for p in params)]
        wrong = [n for n in placeholders(data["run_name"]) if n not in known]
        if wrong:
            errors.append(f"run_name: unknown placeholder(s) {['${' + n + '}' for n in wrong]}; "
                          f"known: {['${' + n + '}' for n in known]}")
    if errors:
        raise SweepSpecError(errors)
    return SweepSpec(program=program, command=command, method=str(method),
                     metric_name=metric_name, goal=goal, summary=summary,
                     params=tuple(params), early_terminate=early, prune=prune,
                     name=data.get("name"), project=data.get("project"), run_cap=run_cap,
                     sampler=dict(sampler), raw=dict(data), run_name=data.get("run_name"))


class MissingLibrary(RuntimeError):
    """A library the sweeps need is not installed; the message names it and the install."""


def load(text: str, source: str = "sweep file") -> SweepSpec:
    """Parse YAML text (needs PyYAML: ``pip install -e '.[sweeps]'`` in the checkout);
    :class:`MissingLibrary` without it, whatever the file holds."""
    try:
        import yaml
    except ImportError:
        raise MissingLibrary("reading a sweep file needs PyYAML, which is not installed: "
                             "pip install pyyaml (or, in the trackmux checkout, "
                             "pip install -e '.[sweeps]')") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SweepSpecError([f"{source} is not valid YAML: {exc}"]) from None
    typos = value_list_typos(data)
    try:
        spec = parse(data)
    except SweepSpecError as exc:
        raise SweepSpecError(typos + exc.errors) from None
    if typos:
        raise SweepSpecError(typos)
    return spec


def value_list_typos(data: Any, prefix: str = "") -> list[str]:
    """``{value: [0.01, 0.05]}``, a typo for ``values``: wandb reads it as one constant
    (every trial gets the whole list), which no one means without saying so. Checked on
    a new sweep file only (``load``): a sweep stored before keeps loading as it was."""
    given = data.get("parameters") if isinstance(data, Mapping) else None
    if not isinstance(given, Mapping):
        return []
    out = []
    for key, param in given.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if not isinstance(param, Mapping):
            continue
        if "parameters" in param:
            out += value_list_typos(param, name)
        elif (isinstance(param.get("value"), list) and "values" not in param
              and param.get("distribution") is None):
            listed = param["value"]
            out.append(f"parameters.{name}.value: a list under 'value' is one constant "
                       f"(every trial would get the whole list {listed!r}); to sweep over "
                       f"it write 'values: {listed!r}' (or add 'distribution: constant' "
                       "to mean the list itself)")
    return out
