"""``+trainer.trackmux.watch``: verl's own SFT trainer (3 steps on CPU, FSDP2, a tiny
Qwen2) watches the model its engine built; histograms and norms reach the spool, and
provenance records the run (issue 25)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import sft_command, sft_env
from trackmux.core.events import HistogramEvent, MetricsEvent, ProvenanceEvent
from trackmux.core.spool.reader import SpoolReader

pytest.importorskip("verl")


@pytest.mark.slow
def test_sft_trainer_watches_its_model(tiny_assets: dict[str, Path], tmp_path: Path,
                                       tracker_env: dict[str, Path]) -> None:
    command = sft_command(tiny_assets, tmp_path, ["+trainer.trackmux.watch=all",
                                                  "+trainer.trackmux.watch_every=2"])
    command[command.index("trainer.logger=[console,file,tensorboard,mlflow]")] = \
        "trainer.logger=[console]"
    proc = subprocess.run(command, env=sft_env(tracker_env, TRACKMUX_PROVENANCE="1"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    (run_dir,) = [p.parent for p in tracker_env["spool"].rglob("spool.db")]
    reader = SpoolReader(run_dir)
    try:
        found = list(reader.iter_events())
    finally:
        reader.close()
    hists = [e for e in found if isinstance(e, HistogramEvent)]
    keys = {e.key for e in hists}
    assert any(k.startswith("gradients/") and "embed_tokens" in k for k in keys), sorted(keys)
    assert any(k.startswith("parameters/") for k in keys)
    # one watched step (optimizer step 2 of 3), at the run's step then: 1 (logged after)
    assert {e.step for e in hists} == {1}
    norms = [e for e in found if isinstance(e, MetricsEvent)
             and any(k.startswith("grad_norm/") for k in e.data)]
    assert norms
    (provenance,) = [e for e in found if isinstance(e, ProvenanceEvent)]
    assert provenance.data["packages"]["verl"] == "0.9.1"
