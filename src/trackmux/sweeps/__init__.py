"""Sweeps (docs/sweeps.md): wandb-format sweep files run by Optuna, agents on many machines,
and trials the doctor stops when their run goes wrong.

``join`` is imported by ``import trackmux`` (a trial's run joins its sweep); everything
else, and Optuna, only by ``trackmux sweep`` and ``trackmux agent``.
"""
