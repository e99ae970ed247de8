"""``+trainer.trackmux.samples=N``: verl's own ``compute_data_metrics`` on a real
``DataProto`` (as the PPO trainer calls it each step) hands the rollout batch to the
drop-in, which logs N samples of it (whole uid groups) at the next ``Tracking.log``:
decoded with the trainer's tokenizer, with scores, rewards, reward components, advantages
and token arrays; validation generations become samples too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl")

import torch

from trackmux.integrations import verl_samples
from trackmux.samples import read

PROMPTS = ["add two and two", "name a colour", "count to three", "say hello"]
ANSWERS = ["four", "blue is a colour", "one two three", "hello there", "five", "red",
           "one two", "hi", "4", "green", "1 2 3", "hello"]


def _batch(tokenizer: Any, group: int = 3) -> Any:
    from verl import DataProto

    size = len(PROMPTS) * group
    prompt_ids = [tokenizer.encode(PROMPTS[i // group]) for i in range(size)]
    answer_ids = [tokenizer.encode(ANSWERS[i]) for i in range(size)]
    p_len = max(map(len, prompt_ids))
    r_len = max(map(len, answer_ids))
    pad = tokenizer.pad_token_id or 0
    prompts = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompt_ids])  # left pad
    responses = torch.tensor([a + [pad] * (r_len - len(a)) for a in answer_ids])
    lengths = torch.tensor([len(a) for a in answer_ids])
    response_mask = (torch.arange(r_len)[None, :] < lengths[:, None]).long()
    prompt_mask = (prompts != pad).long()
    scores = torch.zeros(size, r_len)
    scores[torch.arange(size), lengths - 1] = torch.tensor([float(i % 2) for i in range(size)])
    logp = -torch.rand(size, r_len)
    batch = DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses,
                 "attention_mask": torch.cat([prompt_mask, response_mask], -1),
                 "response_mask": response_mask, "token_level_scores": scores,
                 "token_level_rewards": scores - 0.1,
                 "advantages": torch.randn(size, 1).expand(size, r_len).contiguous(),
                 "returns": torch.randn(size, r_len),
                 "old_log_probs": logp, "ref_log_prob": logp - 0.05},
        non_tensors={"uid": [f"u{i // group}" for i in range(size)],
                     "data_source": ["toy"] * size,
                     "acc": [float(i % 2) for i in range(size)],
                     "format": [1.0] * size},
        meta_info={"reward_extra_keys": ["acc", "format"]})
    return batch


class _Trainer:
    """verl's trainers build Tracking in a method of the object that has the tokenizer."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def fit(self, budget: Any) -> Any:
        import verl.utils.tracking as vt

        return vt.Tracking(project_name="samples", experiment_name="e",
                           default_backend=["file"],
                           config={"trainer": {"trackmux": {"samples": budget}}})


def test_rollout_batch_becomes_samples(tracker_env: dict[str, Path],
                                       tiny_assets: dict[str, Path]) -> None:
    import verl.trainer.ppo.metric_utils as metric_utils
    import verl.utils.tracking as vt
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_assets["model"]))
    try:
        tracking = _Trainer(tokenizer).fit(6)
        batch = _batch(tokenizer)
        metrics = metric_utils.compute_data_metrics(batch, use_critic=False)
        tracking.log(data=metrics, step=3)
        vt.ValidationGenerationsLogger("samples", "e").log(
            ["file"], [("q1", "a1", 1.0), ("q2", "a2", 0.0)], step=3)
        run_dir = tracking.run.dir
        assert tracking.finish().complete
    finally:
        verl_samples.disable()
    assert read.list_sample_keys(run_dir) == {"rollout/samples": [3], "val/generations": [3]}
    payload = read.step_payload(run_dir, "rollout/samples", 3)
    rows = [dict(zip(payload["columns"], r, strict=True)) for r in payload["rows"]]
    assert len(rows) == 6 and payload["group"] == "uid"
    assert sorted({r["uid"] for r in rows}) == ["u0", "u3"]  # whole groups, spread
    first = rows[0]
    assert first["prompt"].strip() == PROMPTS[0] and first["response"].strip() == ANSWERS[0]
    last = rows[-1]
    assert last["prompt"].strip() == PROMPTS[3] and last["response"].strip() == ANSWERS[11]
    assert {"score", "reward", "reward/acc", "reward/format", "advantage",
            "response_length", "data_source", "policy_version"} <= set(payload["columns"])
    assert last["reward/acc"] == 1.0 and last["score"] == 1.0
    width = batch.batch["responses"].shape[-1]
    assert last["reward"] == pytest.approx(1.0 - 0.1 * width)  # summed as verl sums it
    assert last["response_length"] == len(tokenizer.encode(ANSWERS[11]))
    tokens = payload["tokens"]
    assert set(tokens) == {"token", "old_log_probs", "ref_log_prob", "advantages"}
    assert "".join(tokens["token"]["values"][0]).strip() == ANSWERS[0]
    assert len(tokens["old_log_probs"]["values"][5]) == last["response_length"]
    val = list(read.iter_samples(run_dir, key="val/generations"))
    assert [(r["prompt"], r["response"], r["score"]) for r in val] == [
        ("q1", "a1", 1.0), ("q2", "a2", 0.0)]


def test_budget_must_be_a_count_or_bool(tracker_env: dict[str, Path]) -> None:
    import verl.utils.tracking as vt

    with pytest.raises(TypeError, match=r"trainer\.trackmux\.samples"):
        vt.Tracking(project_name="s", experiment_name="e", default_backend="file",
                    config={"trainer": {"trackmux": {"samples": "some"}}})


def test_chosen_rows_keep_groups() -> None:
    groups = [g for g in range(8) for _ in range(4)]
    assert verl_samples.chosen_rows(groups, None) == list(range(32))
    picked = verl_samples.chosen_rows(groups, 8)
    assert picked == [0, 1, 2, 3, 28, 29, 30, 31]


TURNS = [(True, 'I will search. <tool_call>{"name": "search", "arguments": {"q": "moons"}}'
               '</tool_call>'),
         (False, "<tool_response>Phobos and Deimos</tool_response>"),
         (True, "Mars has two moons.")]


def _agent_batch(tokenizer: Any, size: int = 4) -> Any:
    """An agent-loop batch as verl's AgentLoopManager returns it: the model's turns and
    the tool's reply in one response, response_mask 0 on the reply, ``__num_turns__``
    and ``raw_prompt`` beside."""
    import numpy as np

    from verl import DataProto

    pad = tokenizer.pad_token_id or 0
    ids: list[int] = []
    mask: list[int] = []
    for generated, text in TURNS:
        piece = tokenizer.encode(text, add_special_tokens=False)
        ids += piece
        mask += [int(generated)] * len(piece)
    width = len(ids) + 3
    responses = torch.tensor([ids + [pad] * 3] * size)
    response_mask = torch.tensor([mask + [0] * 3] * size)
    prompt = tokenizer.encode("How many moons has Mars?")
    prompts = torch.tensor([prompt] * size)
    attention = torch.cat([torch.ones(size, len(prompt), dtype=torch.long),
                           torch.tensor([[1] * len(ids) + [0] * 3] * size)], -1)
    raw = np.empty(size, dtype=object)
    for i in range(size):
        raw[i] = [{"role": "user", "content": "How many moons has Mars?"}]
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "response_mask": response_mask,
                 "attention_mask": attention,
                 "token_level_scores": torch.zeros(size, width),
                 "token_level_rewards": torch.zeros(size, width),
                 "advantages": torch.zeros(size, width), "returns": torch.zeros(size, width),
                 "old_log_probs": -torch.rand(size, width)},
        non_tensors={"uid": [f"u{i // 2}" for i in range(size)], "raw_prompt": raw,
                     "__num_turns__": np.array([3] * size, dtype=np.int32)})


def test_agent_loop_rollouts_become_conversations(tracker_env: dict[str, Path],
                                                  tiny_assets: dict[str, Path]) -> None:
    """A multi-turn / agent-loop batch (issue 37): ``messages`` holds each trajectory as a
    conversation (prompt, assistant turns with their tool calls, the tool's reply), and
    ``response`` is the whole response, not cut at the model's token count."""
    import verl.trainer.ppo.metric_utils as metric_utils
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_assets["model"]))
    try:
        tracking = _Trainer(tokenizer).fit(True)
        batch = _agent_batch(tokenizer)
        metric_utils.compute_data_metrics(batch, use_critic=False)
        tracking.log(data={"x": 1.0}, step=5)
        run_dir = tracking.run.dir
        assert tracking.finish().complete
    finally:
        verl_samples.disable()
    rows = list(read.iter_samples(run_dir, key="rollout/samples", step=5))
    assert len(rows) == 4
    talk = rows[0]["messages"]
    assert [m["role"] for m in talk] == ["user", "assistant", "tool", "assistant"]
    assert talk[0]["content"] == "How many moons has Mars?"
    assert talk[1]["tool_calls"][0]["name"] == "search"
    assert '"moons"' in talk[1]["tool_calls"][0]["arguments"]
    assert talk[2]["content"] == "Phobos and Deimos" and talk[2]["name"] == "search"
    assert talk[3]["content"].strip() == "Mars has two moons."
    assert rows[0]["num_turns"] == 3 and rows[0]["turns"] == 2 and rows[0]["tools"] == [
        "search"]
    assert rows[0]["response"].strip().endswith("Mars has two moons.")
