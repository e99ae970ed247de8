"""vemlp_wandb: verl's Volcengine ML Platform flavour of wandb, as a second wandb backend.

verl's own adapter logs in with ``volcengine_ml_platform.init(ak=VOLC_ACCESS_KEY_ID,
sk=VOLC_SECRET_ACCESS_KEY, region=MLP_TRACKING_REGION)`` and then calls that SDK's
wandb-compatible ``init(project, name, config, sync_tensorboard=True)``. That SDK is not
on PyPI, so trackmux cannot drive it. This backend is the wandb backend under its own
name (own wandb run, own cursor, so it can sit next to ``wandb`` in one run) with the
wandb client pointed wherever its options say: ``settings={"base_url": ..., "api_key":
...}`` for a wandb-compatible server, as ``wandb.Settings`` takes them.

Differences from verl's adapter (docs/backends/wandb.md, docs/verl.md):
``VOLC_*``/``MLP_TRACKING_REGION`` are not read; ``sync_tensorboard`` is not used (metrics
go to wandb directly, and a ``tensorboard`` logger gets its own backend); everything
else (project, name, config) is what the wandb backend does.
"""

from __future__ import annotations

from trackmux.hookspecs import RegisterBackend, hookimpl
from trackmux.plugins.wandb import WandbBackend


class VemlpWandbBackend(WandbBackend):
    name = "vemlp_wandb"


@hookimpl
def trackmux_register_backends(register: RegisterBackend) -> None:
    register("vemlp_wandb", VemlpWandbBackend, requires=("wandb",), extra="wandb",
             description="verl's vemlp_wandb name: the wandb backend under its own name "
                         "(point it at a wandb-compatible server with settings.base_url)")
