"""Driver of verl's Ray trainer (``verl.trainer.sft_trainer_ray``) for the tests: the
models live in Ray worker processes (verl's ``TrainingWorker`` in a ``RayWorkerGroup``,
the worker class PPO's actor and critic are built from) and ``Tracking`` in this driver,
as in ``main_ppo``.

verl's ``run_sft`` calls a bare ``ray.init()``; here Ray is started first with a fixed
size (``ray.init(num_cpus=...)``, no dashboard, local only) and that second call is made a
no-op. Arguments are verl's hydra overrides.

    python ray_sft_driver.py NUM_CPUS key=value ...
"""

from __future__ import annotations

import sys

import ray


def main() -> None:
    num_cpus = int(sys.argv[1])
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=True)
    import verl.trainer.sft_trainer_ray as trainer

    trainer.ray.init = lambda *args, **kwargs: None  # type: ignore[assignment]
    sys.argv = [trainer.__file__, *sys.argv[2:]]
    # Ray is left to shut down at exit, after verl's Tracking finished (atexit runs the
    # later registration, trackmux's, first), as with verl's own ``run_sft``
    trainer.main()


if __name__ == "__main__":
    main()
