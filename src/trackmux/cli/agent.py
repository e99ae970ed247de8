"""``trackmux agent SWEEP_ID [--count N]``: run a sweep's trials one after the other.

Needs the extra ``sweeps`` (Optuna, PyYAML): ``pip install -e '.[sweeps]'`` in the trackmux
checkout."""

from __future__ import annotations

import signal
import sys

import click

from trackmux.cli.output import echo
from trackmux.cli.sweep import STORAGE_HELP, _fail


@click.command()
@click.argument("sweep_id")
@click.option("--count", type=click.IntRange(min=1), default=None,
              help="Trials to run (default: until the sweep has none left).")
@click.option("--storage", default=None, help=STORAGE_HELP)
@click.option("--dir", "root", default=None, type=click.Path(file_okay=False),
              help="trackmux root (default: $TRACKMUX_DIR or ./trackmux).")
@click.option("--max-failures", type=click.IntRange(min=1), default=5, show_default=True,
              help="Stop after this many failed trials in a row.")
def agent(sweep_id: str, count: int | None, storage: str | None, root: str | None,
          max_failures: int) -> None:
    """Ask the sweep for a trial, run its program, report the metric; repeat.

    The doctor stops a trial whose run goes wrong (a critical finding, or what the sweep's
    `prune:` names) and the run is marked pruned; Optuna's pruner (early_terminate) stops
    trials behind the others. Run several agents to share the sweep. Exits 1 when every
    trial it ran failed."""
    from trackmux.sweeps import study
    from trackmux.sweeps.agent import Agent
    from trackmux.sweeps.storage import resolve_url

    try:
        loaded = study.load(sweep_id, resolve_url(storage, root))
    except (KeyError, ValueError, RuntimeError) as exc:
        raise _fail(exc) from None
    def stopped(signum: int, frame: object) -> None:  # the trial is stopped, not orphaned
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stopped)
    done = Agent(loaded, root=root, max_failures=max_failures,
                 echo=lambda line: echo(line, err=True)).run(count)
    states: dict[str, int] = {}
    for outcome in done:
        states[outcome.state] = states.get(outcome.state, 0) + 1
    echo(f"agent done: {len(done)} trial(s) "
               + ", ".join(f"{n} {s}" for s, n in sorted(states.items())), err=True)
    if done and states.get("failed") == len(done):  # a script must see it
        echo("agent: every trial failed (see trackmux sweep show " + sweep_id + ")",
             err=True)
        sys.exit(1)
