"""Sweep files: wandb's format parsed for grid, random and bayes; wandb's distributions as
Optuna samples them; every mistake named by its field; the trial's command line."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sweep_support import cli

from trackmux.sweeps import command, space
from trackmux.sweeps.spec import SweepSpecError, load

ARTICLE = """
program: train.py
method: bayes
metric: {name: reward/mean, goal: maximize}
parameters:
  lr: {distribution: log_uniform_values, min: 1.0e-6, max: 1.0e-4}
  kl_coef: {values: [0.001, 0.01, 0.05]}
  rollout_batch_size: {values: [256, 512]}
early_terminate: {type: hyperband, min_iter: 10}
"""


def test_the_articles_bayes_sweep_parses_into_tpe_with_its_distributions() -> None:
    spec = load(ARTICLE)
    assert (spec.method, spec.metric_name, spec.goal) == ("bayes", "reward/mean", "maximize")
    by_name = {p.name: p for p in spec.params}
    assert by_name["lr"].distribution == "log_uniform_values"
    assert by_name["kl_coef"].values == (0.001, 0.01, 0.05)
    lr = space.distribution(by_name["lr"])
    assert isinstance(lr, optuna.distributions.FloatDistribution) and lr.log
    assert (lr.low, lr.high) == (1e-6, 1e-4)
    assert spec.early_terminate is not None and spec.early_terminate.type == "hyperband"
    assert spec.prune.doctor and spec.prune.severity == "critical"  # on by default


def _finding(rule: str, severity: str) -> dict[str, object]:
    return {"rule": rule, "severity": severity, "step": 40, "keys": ["k"], "message": "m"}


@pytest.mark.parametrize(("prune", "stopped"), [
    # the default: critical findings and the signs of reward hacking, whatever severity
    ("", {"reward_collapse", "nonfinite", "degenerate_text", "component_divergence",
          "reward_hacking"}),
    ("prune: {rules: []}\n", {"reward_collapse", "nonfinite"}),  # critical only
    ("prune: {ignore: [degenerate_text, nonfinite]}\n",  # ignore wins over both
     {"reward_collapse", "component_divergence", "reward_hacking"}),
    ("prune: {rules: [kl_blowup], severity: off}\n", {"kl_blowup"}),
    ("prune: false\n", set()),
])
def test_which_findings_stop_a_trial(prune: str, stopped: set[str]) -> None:
    from trackmux.doctor.registry import rules
    from trackmux.sweeps.spec import WRONG_RULES

    assert set(WRONG_RULES) <= set(rules())  # the default names rules the doctor has
    spec = load(ARTICLE + prune)
    findings = [_finding("reward_collapse", "critical"), _finding("nonfinite", "critical"),
                _finding("degenerate_text", "warning"),
                _finding("component_divergence", "warning"),
                _finding("reward_hacking", "warning"), _finding("kl_blowup", "warning"),
                _finding("entropy_collapse", "warning"), _finding("doctor", "info")]
    assert {str(f["rule"]) for f in findings if spec.prune.stops(f)} == stopped


def test_grid_and_random_parse_and_the_grid_enumerates_every_point() -> None:
    grid = load("""
        program: t.py
        method: grid
        parameters:
          a: {values: [1, 2, 3]}
          b: {value: x}
          c: {distribution: int_uniform, min: 0, max: 4, q: 2}
    """)
    assert space.grid(grid.params) == {"a": [1, 2, 3], "b": ["x"], "c": [0, 2, 4]}
    assert space.grid_size(grid.params) == 9
    assert grid.metric_name is None  # grid and random may run without a metric
    rand = load("program: t.py\nmethod: random\nparameters: {x: {min: 0.0, max: 1.0}}\n")
    assert rand.params[0].distribution == "uniform"  # inferred, as wandb does
    ints = load("program: t.py\nmethod: random\nparameters: {x: {min: 1, max: 9}}\n")
    assert ints.params[0].distribution == "int_uniform"


def test_nested_parameters_become_dotted_names_for_hydra() -> None:
    spec = load("""
        program: t.py
        method: random
        parameters:
          actor_rollout_ref:
            parameters:
              actor: {parameters: {optim: {parameters: {lr: {values: [1.0e-6]}}}}}
          data.train_batch_size: {values: [256]}
    """)
    assert [p.name for p in spec.params] == ["actor_rollout_ref.actor.optim.lr",
                                             "data.train_batch_size"]


@pytest.mark.parametrize(("text", "expected"), [
    ("method: sideways\nparameters: {a: {values: [1]}}", "method: must be one of"),
    ("method: random\nparameters: {a: {min: 2.0, max: 1.0}}",
     "parameters.a.min: must be below max"),
    ("method: random\nparameters: {a: {distribution: log_uniform_values, min: 0.0, "
     "max: 1.0}}", "parameters.a.min: log_uniform_values needs min > 0"),
    ("method: random\nparameters: {a: {distribution: gamma, min: 0.0, max: 1.0}}",
     "parameters.a.distribution: unknown 'gamma'"),
    ("method: random\nparameters: {a: {distribution: q_uniform, min: 0.0}}",
     "parameters.a: distribution q_uniform needs max"),
    ("method: random\nparameters: {a: {values: []}}", "parameters.a.values: must be a non"),
    ("method: random\nparameters: {a: {distribution: beta, a: 1, b: 2}}",
     "parameters.a.distribution: beta is not supported"),
    ("method: grid\nparameters: {a: {min: 0.0, max: 1.0}}",
     "parameters.a: method grid needs a list of values"),
    ("method: bayes\nparameters: {a: {values: [1]}}", "metric: method bayes needs a metric"),
    ("method: random\nmetric: {name: r, goal: up}\nparameters: {a: {values: [1]}}",
     "metric.goal: must be one of"),
    ("method: random\nparameters: {a: {values: [1]}}\nearly_terminate: {type: hyperband}",
     "early_terminate: prunes on the metric"),
    ("method: random\nparameters: {a: {values: [1]}}\nprune: {severity: loud}",
     "prune.severity: must be one of"),
    ("method: random\nparameters: {a: {values: [1]}}\nprune: {rules: [reward_colapse]}",
     "prune.rules: unknown doctor rule(s) ['reward_colapse']"),
    ("method: random\nparameters: {a: {values: [1]}}\nrun_cap: -2", "run_cap: must be > 0"),
    ("method: random\nparameters: {a: {values: [1]}}\ncommand: [python, \"${program}\"]",
     "program: the command uses ${program}"),
    ("method: random\nparameters: {}", "parameters: must be a non-empty mapping"),
    ("method: random\nparameters: {a: {values: [1]}}\nmethdo: grid",
     "unknown top-level key(s) ['methdo']"),
    ("method: [random\n", "is not valid YAML"),
    ("- just\n- a list\n", "the file must hold a mapping"),
])
def test_a_bad_sweep_file_names_the_field(text: str, expected: str) -> None:
    with pytest.raises(SweepSpecError) as caught:
        load(text)
    assert expected in str(caught.value)


def test_a_list_under_value_is_refused_with_the_likely_fix() -> None:
    with pytest.raises(SweepSpecError) as caught:
        load("method: grid\nparameters:\n  kl_coef: {value: [0.01, 0.05]}\n"
             "  model: {parameters: {lr: {value: [1, 2]}}}\n")
    text = str(caught.value)
    assert "parameters.kl_coef.value: a list under 'value' is one constant" in text
    assert "write 'values: [0.01, 0.05]'" in text
    assert "parameters.model.lr.value" in text
    # said explicitly, a list is one constant value (wandb's meaning)
    spec = load("program: t.py\nmethod: grid\nparameters:\n  layers: {distribution: constant, "
                "value: [64, 64]}\n  lr: {values: [0.1]}\n")
    assert spec.params[0].value == [64, 64]


def test_sweep_create_without_pyyaml_names_the_missing_library(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from trackmux.cli.main import cli as main_cli

    path = root / "ok.yaml"
    path.write_text(ARTICLE)
    monkeypatch.setitem(sys.modules, "yaml", None)  # as if PyYAML were not installed
    done = CliRunner().invoke(main_cli, ["sweep", "create", str(path), "--dir", str(root)])
    assert done.exit_code == 1
    assert "needs PyYAML, which is not installed" in done.output
    assert "pip install -e '.[sweeps]'" in done.output
    assert "bad sweep file" not in done.output


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(SweepSpecError) as caught:
        load("method: nope\nmetric: {goal: up}\nparameters: {a: {min: 3, max: 1}}")
    fields = [e.split(":")[0] for e in caught.value.errors]
    assert {"method", "metric.name", "metric.goal", "parameters.a.min"} <= set(fields)


def test_sweep_create_refuses_a_bad_file_naming_the_field_and_creates_nothing(
        root: Path) -> None:
    path = root / "bad.yaml"
    path.write_text("method: bayes\nmetric: {name: r, goal: maximize}\n"
                    "parameters: {lr: {distribution: log_uniform_values, min: 0, max: 1}}\n")
    done = cli(root, "sweep", "create", str(path), check=False)
    assert done.returncode == 1
    assert "parameters.lr.min: log_uniform_values needs min > 0" in done.stderr
    assert not (root / ".sweeps").exists()


def test_sweep_create_prints_the_id_last_and_show_reads_it_back(root: Path) -> None:
    path = root / "ok.yaml"
    path.write_text(ARTICLE)
    done = cli(root, "sweep", "create", str(path))
    sweep_id = done.stdout.strip().splitlines()[-1]
    assert len(sweep_id) == 8 and sweep_id.isalnum()
    assert (root / ".sweeps" / "sweeps.db").is_file()
    data = json.loads(cli(root, "sweep", "show", sweep_id, "--json").stdout)
    assert data["method"] == "bayes" and data["trials"] == [] and data["best"] is None
    missing = cli(root, "sweep", "show", "nosuchid", check=False)
    assert missing.returncode == 1 and f"sweeps there: {sweep_id}" in missing.stderr


def test_distributions_give_the_program_values_in_wandbs_ranges() -> None:
    spec = load("""
        program: t.py
        method: random
        parameters:
          a: {distribution: log_uniform, min: -3.0, max: 0.0}
          b: {distribution: q_log_uniform_values, min: 1, max: 1000, q: 5}
          c: {distribution: normal, mu: 10.0, sigma: 2.0}
          d: {distribution: inv_log_uniform_values, min: 0.01, max: 1.0}
          e: {distribution: q_uniform, min: 0.0, max: 1.0, q: 0.25}
          f: {values: [[1, 2], {k: v}, null]}
    """)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    seen: dict[str, list[object]] = {p.name: [] for p in spec.params}
    for _ in range(300):
        trial = study.ask(space.distributions(spec.params))
        for p in spec.params:
            seen[p.name].append(space.program_value(p, trial.params[p.name]))
        study.tell(trial, 0.0)
    assert all(math.exp(-3) <= v <= 1 for v in seen["a"])  # type: ignore[operator]
    assert all(isinstance(v, int) and v % 5 == 0 for v in seen["b"])
    normal = [float(v) for v in seen["c"]]  # type: ignore[arg-type]
    mean = sum(normal) / len(normal)
    spread = (sum((v - mean) ** 2 for v in normal) / len(normal)) ** 0.5
    assert abs(mean - 10) < 0.5 and 1.5 < spread < 2.5
    assert all(0.01 <= v <= 1 for v in seen["d"])  # type: ignore[operator]
    assert set(seen["e"]) <= {0.0, 0.25, 0.5, 0.75, 1.0}
    assert {json.dumps(v) for v in seen["f"]} == {"[1, 2]", '{"k": "v"}', "null"}


@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9_.]{0,8}", fullmatch=True),
                       st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                                 st.integers(), st.booleans(), st.text(max_size=5)),
                       min_size=1, max_size=4))
def test_command_macros_pass_params_as_wandbs_agent_does(params: dict[str, object]) -> None:
    argv = command.build(["${env}", "${interpreter}", "${program}", "${args}"], "train.py",
                         params)
    assert argv[:3] == ["/usr/bin/env", sys.executable, "train.py"]
    assert argv[3:] == [f"--{k}={v}" for k, v in params.items()]
    hydra = command.build(["python", "-m", "verl.trainer.main_ppo", "${args_no_hyphens}"],
                          None, params)
    assert hydra[3:] == [f"{k}={v}" for k, v in params.items()]
    as_json = command.build(["x", "${args_json}"], None, params)
    assert json.loads(as_json[1]) == params


def test_the_json_file_macro_writes_the_params(tmp_path: Path) -> None:
    argv = command.build(["cat", "--config=${args_json_file}"], None, {"a": [1, 2]},
                         tmp_path / "p.json")
    assert argv == ["cat", f"--config={tmp_path / 'p.json'}"]
    out = subprocess.run(["cat", str(tmp_path / "p.json")], capture_output=True, text=True)
    assert json.loads(out.stdout) == {"a": [1, 2]}


def test_early_terminate_becomes_optunas_pruner(tmp_path: Path) -> None:
    from trackmux.sweeps import study

    url = f"sqlite:///{tmp_path / 's.db'}"
    for text, kind in ((ARTICLE, optuna.pruners.HyperbandPruner),
                       (ARTICLE.replace("{type: hyperband, min_iter: 10}",
                                        "{type: median, n_warmup_steps: 5}"),
                        optuna.pruners.MedianPruner),
                       (ARTICLE.replace("early_terminate: {type: hyperband, min_iter: 10}",
                                        ""), optuna.pruners.NopPruner)):
        created = study.create(load(text), url)
        loaded = study.load(created.id, url)
        assert isinstance(loaded.study.pruner, kind)
        assert loaded.spec == created.spec  # the file kept in the study reads back the same
        assert isinstance(loaded.sampler(0), optuna.samplers.TPESampler)


def test_a_seeded_sweep_draws_the_same_trials_again_whoever_asks(tmp_path: Path) -> None:
    from trackmux.sweeps import study
    from trackmux.sweeps.agent import Agent

    text = ARTICLE + "sampler: {seed: 11}\n"
    url = f"sqlite:///{tmp_path / 's.db'}"
    draws = []
    for _ in range(2):
        sweep = study.create(load(text), url)
        agent = Agent(sweep, root=tmp_path)
        trials = [agent._ask() for _ in range(4)]
        draws.append([t.params for t in trials])
        assert [t.number for t in trials] == [0, 1, 2, 3]
    assert draws[0] == draws[1]
    assert len({json.dumps(p, sort_keys=True) for p in draws[0]}) == 4


@pytest.mark.parametrize(("url", "expected"), [
    ("mysql:nope", "--storage 'mysql:nope': use sqlite:///"),
    ("postgresql://me:hunter2@127.0.0.1:1/db", "cannot open the sweep storage "
     "postgresql+psycopg://me:***@127.0.0.1:1/db: OperationalError"),
])
def test_a_bad_storage_is_named_without_its_password(root: Path, url: str,
                                                     expected: str) -> None:
    pytest.importorskip("psycopg")
    done = cli(root, "sweep", "show", "anyid", "--storage", url, check=False)
    assert done.returncode == 1 and expected in done.stderr
    assert "hunter2" not in done.stderr and "Traceback" not in done.stderr
