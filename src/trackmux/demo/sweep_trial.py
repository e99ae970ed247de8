"""The demo's GRPO loop as a sweep program: its hyperparameters as wandb's agent passes them.

    python -m trackmux.demo.sweep_trial --learning_rate=0.01 --kl_coef=0.05 \\
        --failure=reward-hacking --steps=150 --step_seconds=0.05

``--failure reward-hacking`` trains on the flawed reward model of ``trackmux demo
--failure reward-hacking`` (docs/doctor.md) with the policy that half-knows the task, but
keeps the learning rate and KL coefficient the sweep chose: a high learning rate with a
small KL coefficient collapses (the policy finds the flaw, the verifiable reward falls),
a moderate one learns the task. ``--step_seconds`` makes each step last at least that
long, standing in for a real trainer's step (the demo's own step takes about a
millisecond, faster than anyone could stop it). It also logs ``reward/mean_last10``,
the mean of ``reward/mean`` over the last 10 steps, a steadier metric to sweep on. Logs
to the spool only unless ``TRACKMUX_BACKENDS`` names backends; the doctor is on.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from collections.abc import Sequence
from typing import Any

SMOOTH = 10
#: the mean of ``reward/mean`` over the last ``SMOOTH`` steps: the sweep's metric
SMOOTHED = "reward/mean_last10"


class _Paced:
    """The run, with each step lasting at least ``seconds`` (a stand-in for real work)."""

    def __init__(self, run: Any, seconds: float) -> None:
        self.run, self.seconds = run, seconds
        self._next = time.monotonic() + seconds
        self._rewards: list[float] = []

    def log(self, data: dict[str, Any], step: int | None = None) -> None:
        if "reward/mean" in data:  # a steadier number for the sweep than one step's mean
            self._rewards = [*self._rewards[-(SMOOTH - 1):], data["reward/mean"]]
            data = {**data, SMOOTHED: sum(self._rewards) / len(self._rewards)}
        self.run.log(data, step=step)
        pause = self._next - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        self._next = time.monotonic() + self.seconds

    def log_table(self, key: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                  step: int | None = None) -> None:
        self.run.log_table(key, columns, rows, step=step)

    def log_image(self, key: str, image: Any, step: int | None = None,
                  caption: str | None = None) -> None:
        self.run.log_image(key, image, step=step, caption=caption)

    def log_samples(self, key: str, samples: Any, step: int | None = None) -> None:
        self.run.log_samples(key, samples, step=step)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    from trackmux.cli.demo import FAILURES

    parser = argparse.ArgumentParser(prog="python -m trackmux.demo.sweep_trial",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--learning_rate", type=float, default=0.03)
    parser.add_argument("--kl_coef", type=float, default=None,
                        help="default: the failure's, else the demo's 0.1")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--failure", choices=sorted(FAILURES), default=None)
    parser.add_argument("--step_seconds", type=float, default=0.0)
    parser.add_argument("--project", default="demo-sweep")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from trackmux.cli.demo import FAILURES, _limit_blas_threads

    args = parse(argv)
    _limit_blas_threads()
    import trackmux
    from trackmux.demo import DemoConfig, train

    overrides = dict(FAILURES.get(args.failure or "", {}))
    overrides["learning_rate"] = args.learning_rate
    if args.kl_coef is not None:
        overrides["kl_coef"] = args.kl_coef
    config = dataclasses.replace(DemoConfig(steps=args.steps, seed=args.seed), **overrides)
    run = trackmux.init(project=args.project, config=config.as_config(),
                        backends=os.environ.get("TRACKMUX_BACKENDS") or "none",
                        tags=("demo",) + ((args.failure,) if args.failure else ()))
    with run:
        result = train(config, _Paced(run, args.step_seconds))
    print(f"reward/mean: last 10 steps {sum(result.rewards[-10:]) / 10:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
