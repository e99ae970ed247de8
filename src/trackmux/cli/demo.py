"""``trackmux demo``: train a small policy with GRPO on CPU, log it through trackmux, and
write its HTML report. Needs numpy (``pip install numpy``, or ``pip install -e '.[demo]'``
in the checkout)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import click

from trackmux.cli.output import echo

DEFAULT_BACKENDS = ("console", "file")
#: ``--failure`` -> DemoConfig overrides: the same loop, set up to fail in a known way
FAILURES: dict[str, dict[str, Any]] = {
    "reward-hacking": {"pretrained": 3.0, "kl_coef": 0.01, "repeat_bonus": 0.15,
                       "repeat_power": 3.0},
}


#: the demo's console prints one line of each kind every steps/CONSOLE_LINES steps
CONSOLE_LINES = 20
#: seconds the demo waits for the run's provenance before its first step (a loaded
#: machine takes a few; past it the line comes when it comes)
PROVENANCE_WAIT = 10.0


def default_name(failure: str | None, seed: int) -> str:
    """``reward-hacking`` (``reward-hacking-seed3``), ``healthy-seed0``: what the run is,
    as the README's pictures name them, rather than a timestamp."""
    if failure:
        return failure if seed == 0 else f"{failure}-seed{seed}"
    return f"healthy-seed{seed}"


def console_summary(steps: int) -> dict[str, Any]:
    """The console backend's summary for the demo: every step logs a batch of samples, so a
    line per step (and its samples) made 1,300 lines for 200 steps. One of each kind every
    ``steps / CONSOLE_LINES`` steps, findings always, the same on a fast or a slow machine
    (no time-based limit), and three table rows."""
    return {"every": max(1, steps // CONSOLE_LINES), "interval": 0, "rows": 3}


def _limit_blas_threads() -> None:
    """The demo's matrices are tiny: BLAS worker threads only fight over the cores (on a
    busy 2-core machine a step went from 1 ms to 200 ms). Must run before numpy loads."""
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")


@click.command()
@click.option("--steps", type=click.IntRange(min=1), default=200, show_default=True,
              help="Training steps.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed for prompts, sampling and the initial policy.")
@click.option("--backends", "extra_backends", default="",
              help="Comma list of backends to add to console and file (e.g. wandb,mlflow).")
@click.option("--no-default-backends", is_flag=True,
              help="Do not add console and file (spool plus --backends only).")
@click.option("--project", default="trackmux-demo", show_default=True)
@click.option("--name", default=None,
              help="Run name (default: the failure's name, or healthy-seed<SEED>).")
@click.option("--dir", "root", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Spool root (default: TRACKMUX_DIR, else ./trackmux).")
@click.option("--report/--no-report", "write_report", default=True, show_default=True,
              help="Write report.html into the run directory at the end.")
@click.option("--failure", type=click.Choice(sorted(FAILURES)), default=None,
              help="Reproduce a classic failure for the doctor to find (docs/doctor.md): "
                   "'reward-hacking' starts from a policy that half-knows the task and "
                   "trains it with a KL coefficient ten times too small on a reward model "
                   "with a flaw (it pays more and more for repeated digits): the reward "
                   "climbs, then the KL runs away, the samples repeat and the reward falls.")
def demo(steps: int, seed: int, extra_backends: str, no_default_backends: bool, project: str,
         name: str | None, root: Path | None, write_report: bool, failure: str | None) -> None:
    """Train a tiny policy with GRPO (KL to a frozen reference) on a digit-reversal task.

    Logs reward, KL, loss, entropy, length and throughput every step, and a table of
    rollouts and a per-token KL heatmap every 20 steps, like an LLM RL trainer.
    """
    _limit_blas_threads()
    try:
        import numpy  # noqa: F401
    except ImportError as exc:
        raise click.ClickException("the demo needs numpy: pip install numpy "
                                   "(or, in the trackmux checkout, pip install -e '.[demo]')"
                                   ) from exc
    import trackmux
    from trackmux.core import settings
    from trackmux.core.errors import UnknownBackendError
    from trackmux.demo import DemoConfig, train

    backends = [] if no_default_backends else list(DEFAULT_BACKENDS)
    for extra in settings.backends_from(extra_backends or []):
        if extra not in backends:
            backends.append(extra)
    spool_root = settings.spool_root(root)
    name = name or default_name(failure, seed)
    config = dataclasses.replace(DemoConfig(steps=steps, seed=seed),
                                 **FAILURES.get(failure or "", {}))
    try:  # the file backend writes into the run folder (its default): a project folder
        # holds run folders only, so `trackmux report trackmux/trackmux-demo/*` works
        run = trackmux.init(project=project, name=name, backends=backends,
                            config=config.as_config(), dir=spool_root,
                            tags=("demo",) + ((failure,) if failure else ()),
                            all_ranks=True, doctor=True,
                            backend_options={"console": console_summary(steps)}
                            if "console" in backends else None)
    except UnknownBackendError as exc:
        raise click.BadParameter(str(exc), param_hint="--backends") from exc
    assert isinstance(run, trackmux.Run)
    echo(f"trackmux demo: GRPO on digit reversal, {steps} steps, seed {seed}, "
               f"backends: {', '.join(backends) or 'spool only'}")
    try:
        # the provenance event before the first step: the console prints its line above
        # the step lines, not somewhere among them (it prints in spool order)
        from trackmux.provenance.record import wait_recorded

        wait_recorded(run, PROVENANCE_WAIT)
        result = train(config, run)
    except BaseException:
        run.finish(exit_code=1)
        raise
    summary = run.finish()
    first = sum(result.rewards[:10]) / len(result.rewards[:10])
    last = sum(result.rewards[-10:]) / len(result.rewards[-10:])
    echo("")
    echo(f"trained {steps} steps in {result.seconds:.1f} s: reward/mean {first:.3f} "
               f"(first 10 steps) -> {last:.3f} (last 10)")
    echo(f"run {run.name} (id {run.id}) is in {run.dir}")
    found = run.findings()
    serious = [f for f in found if f["severity"] in ("warning", "critical")]
    echo(f"doctor: {len(serious)} warning/critical finding(s)" if serious
               else "doctor: no warning or critical finding")
    for f in serious:
        echo(f"  {f['severity'].upper()} {f['rule']} @ step {f['step']}: {f['message']}")
    if summary.pending:
        echo(f"undelivered: {summary.pending}; deliver with: trackmux sync {run.dir} "
                   f"--to {','.join(summary.pending)}")
    report_cmd = f"trackmux report {run.dir} -o report.html"
    if write_report:
        from trackmux.report import build_report

        path = build_report([run.dir], run.dir / "report.html")
        echo(f"report: {path}")
        echo(f"open it in a browser: {path.as_uri()}  (rebuild with: {report_cmd})")
    else:
        echo(f"write its report with: {report_cmd}")
    # the live dashboard over every run of this root (needs the extra 'ui')
    echo(f"open the dashboard: trackmux ui {spool_root}  (its extra, in the trackmux "
               "checkout: pip install -e '.[ui]')")
