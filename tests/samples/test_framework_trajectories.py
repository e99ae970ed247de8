"""What verl and TRL expose of agentic rollouts becomes conversations the ledger takes
(issue 37): verl's agent-loop response (model turns and tool replies told apart by
``response_mask``, Hermes tool calls) and TRL's conversational GRPO completions (tool
calls with dict arguments). The frameworks' own runs are in tests/verl and tests/hf."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trackmux.core.values.samples import to_event
from trackmux.core.values.trajectory import summary
from trackmux.integrations import trl_samples, verl_trajectories

np = pytest.importorskip("numpy")


class CharTokenizer:
    """One token per character (ids are code points), as a tokenizer's batch_decode."""

    def batch_decode(self, ids: list[list[int]], skip_special_tokens: bool = True
                     ) -> list[str]:
        return ["".join(map(chr, row)) for row in ids]


def _agent_row(parts: list[tuple[bool, str]], width: int) -> tuple[list[int], list[int]]:
    ids: list[int] = []
    mask: list[int] = []
    for generated, text in parts:
        ids += [ord(c) for c in text]
        mask += [int(generated)] * len(text)
    return ids + [0] * (width - len(ids)), mask + [0] * (width - len(mask))


CALL = '<tool_call>{"name": "search", "arguments": {"q": "ü\\u2028x"}}</tool_call>'
PARTS = [(True, "let me search " + CALL),
         (False, "\nuser\n<tool_response>\nno results\n</tool_response>\nassistant\n"),
         (True, '<tool_call>{"name": "python", "arguments": "print(1)"}</tool_call>'
                '<tool_call>not json</tool_call>'),
         (False, "<tool_response>1</tool_response><tool_response>?</tool_response>"),
         (True, "the answer is 1")]


def test_verl_agent_loop_response_becomes_a_conversation() -> None:
    rows = [_agent_row(PARTS, 400), _agent_row([(True, "no tools needed")], 400)]
    responses = np.array([r[0] for r in rows])
    mask = np.array([r[1] for r in rows])
    lengths = [sum(len(t) for _, t in PARTS), len("no tools needed")]
    raw = [[{"role": "system", "content": "use tools"}, {"role": "user", "content": "q1"}],
           None]
    talks = verl_trajectories.batch_conversations(CharTokenizer(), responses, mask, lengths,
                                                  raw, ["q1", "plain prompt"])
    first = talks[0]
    assert [m["role"] for m in first] == ["system", "user", "assistant", "tool", "assistant",
                                          "tool", "tool", "assistant"]
    assert first[2]["tool_calls"] == [{"id": "call_1_0", "name": "search",
                                       "arguments": json.dumps({"q": "ü\u2028x"},
                                                               ensure_ascii=False)}]
    assert first[3] == {"role": "tool", "content": "no results", "tool_call_id": "call_1_0",
                        "name": "search"}
    assert [c["name"] for c in first[4]["tool_calls"]] == ["python", "unparsed"]
    assert first[4]["tool_calls"][0]["arguments"] == "print(1)"
    assert [m.get("name") for m in first[5:7]] == ["python", "unparsed"]
    assert first[7]["content"] == "the answer is 1"
    assert talks[1] == [{"role": "user", "content": "plain prompt"},
                        {"role": "assistant", "content": "no tools needed"}]
    event, problems = to_event("rollout/samples", {"messages": talks}, 3, 0.0, strict=True)
    assert not problems and event.trajectories == ("messages",)
    s = summary(first)
    assert (s.turns, s.tool_calls, s.tools) == (3, 3, ["search", "python", "unparsed"])


def test_runs_split_generated_and_inserted_tokens() -> None:
    assert verl_trajectories.runs([1, 1, 0, 0, 1, 0], 5) == [(0, 2, True), (2, 4, False),
                                                            (4, 5, True)]
    assert verl_trajectories.runs([], 0) == []


class GRPOTrainer:
    num_generations = 2
    reward_weights = [1.0]

    def __init__(self, logs: dict[str, Any]) -> None:
        self._logs = logs


def test_trl_tool_using_grpo_completions_become_conversations() -> None:
    prompt = [{"role": "user", "content": "weather in Paris?"}]
    completion = [
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather",
                                              "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "name": "get_weather", "content": "rain"},
        {"role": "assistant", "content": [{"type": "text", "text": "It rains."},
                                          {"type": "image", "image": object()}]}]
    trainer = GRPOTrainer({"prompt": [prompt, prompt],
                           "completion": [completion, [{"role": "assistant",
                                                        "content": "no idea"}]],
                           "rewards": {"acc": [1.0, 0.0]}, "advantages": [0.5, -0.5]})
    cols = trl_samples.grpo_samples(trainer)
    assert cols is not None
    talk = cols["messages"][0]
    assert talk[0] == {"role": "user", "content": "weather in Paris?"}
    assert talk[1]["tool_calls"] == [{"id": "call_0", "name": "get_weather",
                                      "arguments": '{"city": "Paris"}'}]
    assert talk[3]["content"] == [{"type": "text", "text": "It rains."}, {"type": "image"}]
    event, problems = to_event("train/completions", cols, 1, 0.0, strict=True)
    assert not problems and event.trajectories == ("messages",)
    assert cols["response"][0].startswith("assistant: ")  # the text column stays


def test_trl_plain_completions_get_no_conversation() -> None:
    trainer = GRPOTrainer({"prompt": ["a", "b"], "completion": ["x", "y"]})
    cols = trl_samples.grpo_samples(trainer)
    assert cols is not None and "messages" not in cols
