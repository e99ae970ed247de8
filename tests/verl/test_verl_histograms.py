"""``+trainer.trackmux.histograms=true``: verl's own ``compute_data_metrics`` on a real
``DataProto`` keeps its scalars, and the distributions reach the spool as histograms at
the step of the next ``Tracking.log``."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("verl")

import torch

from trackmux.core.events import HistogramEvent, MetricsEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.integrations import verl_histograms


def _batch(size: int = 16, prompt: int = 6, response: int = 10) -> object:
    from verl import DataProto

    torch.manual_seed(0)
    lengths = torch.randint(1, response + 1, (size,))
    response_mask = (torch.arange(response)[None, :] < lengths[:, None]).long()
    attention = torch.cat([torch.ones(size, prompt, dtype=torch.long), response_mask], -1)
    scores = torch.zeros(size, response)
    scores[torch.arange(size), lengths - 1] = torch.rand(size)
    return DataProto.from_dict(tensors={
        "prompts": torch.randint(0, 100, (size, prompt)),
        "responses": torch.randint(0, 100, (size, response)),
        "attention_mask": attention,
        "response_mask": response_mask,
        "token_level_scores": scores,
        "token_level_rewards": scores - 0.1,
        "advantages": torch.randn(size, response).to(torch.bfloat16).float(),
        "returns": torch.randn(size, response),
    })


def test_switch_logs_verl_batches_as_histograms(tracker_env: dict[str, Path]) -> None:
    import verl.trainer.ppo.metric_utils as metric_utils
    import verl.utils.tracking as vt

    try:
        tracking = vt.Tracking(project_name="hist", experiment_name="e", default_backend="file",
                               config={"trainer": {"trackmux": {"histograms": True}}})
        batch = _batch()
        metrics = metric_utils.compute_data_metrics(batch, use_critic=False)
        assert "critic/score/mean" in metrics  # verl's own scalars are unchanged
        tracking.log(data=metrics, step=5)
        run_dir = tracking.run.dir
        assert tracking.finish().complete
    finally:
        verl_histograms.unpatch()
    reader = SpoolReader(run_dir)
    events = list(reader.iter_events())
    reader.close()
    hists = {e.key: e for e in events if isinstance(e, HistogramEvent)}
    assert set(hists) == {"critic/score/hist", "critic/rewards/hist", "critic/advantages/hist",
                          "response_length/hist", "prompt_length/hist"}
    assert all(h.step == 5 for h in hists.values())
    tensors = batch.batch  # type: ignore[attr-defined]
    mask = tensors["response_mask"].bool()
    assert hists["critic/advantages/hist"].count == int(mask.sum())
    assert hists["response_length/hist"].count == 16
    scalars = next(e for e in events if isinstance(e, MetricsEvent) and e.step == 5).data
    assert hists["critic/score/hist"].max == pytest.approx(scalars["critic/score/max"])
    assert hists["response_length/hist"].mean == pytest.approx(
        scalars["response_length/mean"])


def test_switch_must_be_a_bool(tracker_env: dict[str, Path]) -> None:
    import verl.utils.tracking as vt

    with pytest.raises(TypeError, match=r"trainer\.trackmux\.histograms"):
        vt.Tracking(project_name="hist", experiment_name="e", default_backend="file",
                    config={"trainer": {"trackmux": {"histograms": "yes"}}})


def test_helper_for_custom_loops(tmp_path: Path) -> None:
    import trackmux

    run = trackmux.init(project="h", backends=[], dir=tmp_path)
    verl_histograms.log_batch_histograms(run, _batch(), step=2, bins=8)
    run.finish()
    reader = SpoolReader(run.dir)
    keys = sorted(e.key for e in reader.iter_events() if isinstance(e, HistogramEvent))
    reader.close()
    assert keys == ["critic/advantages/hist", "critic/rewards/hist", "critic/score/hist",
                    "prompt_length/hist", "response_length/hist"]
