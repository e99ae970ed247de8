"""Trajectories in the samples ledger (issue 37): a ``messages`` column of conversations
with tool calls comes back exactly from ``trackmux samples --json``; ``--where`` filters on
turns, tools and tool status; bad shapes are dropped, named once and counted, or raised
with strict naming the column, row and turn."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import trackmux
from trackmux.cli.samples import samples
from trackmux.core.values.samples import SampleProblem, to_event
from trackmux.core.values.trajectory import summary, transcript
from trackmux.samples import read

ODD = "naïve ✓ \u2028 para\u2029 \u0000nul 🎉 <script>alert(1)</script>"


def conversation(i: int, fail: bool = False, tools: tuple[str, ...] = ("search",)
                 ) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "tools: search, python"},
        {"role": "user", "content": [{"type": "text", "text": f"task {i} {ODD}"},
                                     {"type": "image_url", "image_url": {"url": "x.png"}}]}]
    for n, tool in enumerate(tools):
        out.append({"role": "assistant", "content": None, "reward": 0.125, "latency_ms": 31,
                    "tokens": [1, 2, 3], "logprobs": [-0.5, -1.25, -0.0625],
                    "tool_calls": [{"id": f"call_{n}", "type": "function", "function": {
                        "name": tool,
                        "arguments": '{"q": "a\\u2028b \\"quoted\\"", "deep": {"x": [1.5]}}'}}]})
        out.append({"role": "tool", "tool_call_id": f"call_{n}", "name": tool,
                    "status": "error" if fail else "ok", "content": f"{tool} said {ODD}"})
    out.append({"role": "assistant", "content": f"final {i} {ODD}", "reward": 1,
                "latency_ms": 12.75, "tokens": 9})
    return out


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(samples, [*args])
    return result.exit_code, result.output


@pytest.fixture
def agent_run(tmp_path: Path) -> Path:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    batch = [conversation(0), conversation(1, fail=True),
             conversation(2, tools=("search", "python", "search", "search", "python", "x")),
             conversation(3, tools=())]
    run.log_samples("agent", {"messages": batch, "reward": [0.5, 0.0, 1.0, 0.25],
                              "uid": ["g0", "g0", "g1", "g1"]}, step=7, strict=True)
    run.finish(timeout=30)
    return run.dir


def test_json_gives_each_trajectory_back_exactly(agent_run: Path) -> None:
    code, out = _cli(str(agent_run), "--key", "agent", "--step", "7", "--json")
    assert code == 0, out
    rows = orjson.loads(out)["rows"]
    expected = [conversation(0), conversation(1, fail=True),
                conversation(2, tools=("search", "python", "search", "search", "python", "x")),
                conversation(3, tools=())]
    assert [r["messages"] for r in rows] == expected
    assert "\u2028" in out or "\\u2028" in out  # carried, however JSON spells it
    args = rows[0]["messages"][2]["tool_calls"][0]["function"]["arguments"]
    assert orjson.loads(args) == {"q": "a\u2028b \"quoted\"", "deep": {"x": [1.5]}}
    assert [(r["turns"], r["tool_calls"], r["tool_errors"], r["tools"]) for r in rows] == [
        (2, 1, 0, ["search"]), (2, 1, 1, ["search"]), (7, 6, 0, ["search", "python", "x"]),
        (1, 0, 0, [])]


@pytest.mark.parametrize("where,matched", [
    ("turns > 5", [2]),
    ("'search' in tools", [0, 1, 2]),
    ("tool_errors > 0", [1]),
    ("not ('search' in tools) and turns == 1", [3]),
    ("'python' in tools and reward >= 1", [2]),
    ("tool_calls >= 1 and tool_errors == 0", [0, 2]),
])
def test_where_filters_on_turns_tools_and_status(agent_run: Path, where: str,
                                                 matched: list[int]) -> None:
    code, out = _cli(str(agent_run), "-k", "agent", "-s", "7", "--json", "--where", where)
    assert code == 0, out
    assert [r["sample"] for r in orjson.loads(out)["rows"]] == matched


def test_table_view_names_the_conversation_not_its_json(agent_run: Path) -> None:
    code, out = _cli(str(agent_run), "-k", "agent", "-s", "7")
    assert code == 0, out
    assert "5 messages" in out and "15 messages" in out and "search,pyth" in out
    assert "tool_call_id" not in out and "0 messages" not in out


def test_browser_payload_marks_the_conversation_column(agent_run: Path) -> None:
    payload = read.step_payload(agent_run, "agent", 7)
    assert payload["trajectories"] == ["messages"]
    assert payload["kinds"]["messages"] == "trajectory"
    column = payload["columns"].index("messages")
    assert payload["rows"][1][column] == conversation(1, fail=True)
    assert payload["rows"][2][payload["columns"].index("tools")] == ["search", "python", "x"]


def test_numpy_and_torch_per_turn_values_are_unwrapped() -> None:
    np = pytest.importorskip("numpy")
    messages = [{"role": "assistant", "content": "a", "reward": np.float32(0.5),
                 "latency_ms": np.int64(40), "tokens": np.array([4, 5]),
                 "logprobs": np.array([-0.5, -0.25], dtype=np.float16)}]
    event, problems = to_event("k", {"messages": [messages]}, 1, 0.0, strict=True)
    assert not problems
    assert orjson.loads(str(event.values[0][0])) == [
        {"role": "assistant", "content": "a", "reward": 0.5, "latency_ms": 40,
         "tokens": [4, 5], "logprobs": [-0.5, -0.25]}]


BAD = [
    ("not a list", "must be a list of messages, got str"),
    ([{"content": "no role"}], "turn 0: 'role' must be non-empty text"),
    ([{"role": "user", "content": {"x": 1}}], "turn 0: content must be text, a list of parts"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [
        {"id": "c", "name": "f", "arguments": {"a": 1}}]}],
     "turn 1: tool_calls[0].arguments must be a JSON string"),
    ([{"role": "assistant", "tool_calls": [{"id": "c", "arguments": "{}"}]}],
     "turn 0: tool_calls[0].name must be text"),
    ([{"role": "tool", "status": "failed"}], "turn 0: status must be 'ok', 'error' or None"),
    ([{"role": "assistant", "reward": float("nan")}], "turn 0: reward must be a finite number"),
    ([{"role": "assistant", "logprobs": [-1.0, "x"]}], "turn 0: logprobs[1] must be a number"),
    ([{"role": "assistant", "tokens": -3}], "turn 0: tokens must be a count"),
    ([{"role": "user", "content": "lone \ud800 surrogate"}], "row 0"),
    (["not a message"], "turn 0 must be a dict"),
]


@pytest.mark.parametrize("cell,named", BAD)
def test_strict_raises_naming_column_row_and_turn(cell: Any, named: str) -> None:
    with pytest.raises(SampleProblem) as info:
        to_event("k", {"messages": [conversation(0), cell]}, 1, 0.0, strict=True)
    assert "column 'messages' row 1" in str(info.value) or named == "row 0"
    assert named.replace("row 0", "") in str(info.value)


def test_bad_shapes_drop_their_sample_named_once_and_counted(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    bad_args = [{"role": "assistant", "tool_calls": [
        {"id": "c", "name": "f", "arguments": {"a": 1}}]}]
    with caplog.at_level(logging.WARNING, logger="trackmux"):
        for step in range(3):
            cells = [conversation(0), bad_args, conversation(2), [{"role": 3}]]
            run.log_samples("agent", {"messages": cells, "reward": [1.0, 2.0, 3.0, 4.0]},
                            step=step)
    run.finish(timeout=30)
    warned = [r.getMessage() for r in caplog.records if "log_samples" in r.getMessage()]
    assert len(warned) == 2, warned  # each kind once, though it happened at every step
    assert any("arguments must be a JSON string" in w and "row 1 turn 0" in w
               for w in warned)
    assert sum(run.samples_problems.values()) == 6
    rows = list(read.iter_samples(run.dir, "agent", 2))
    assert [r["reward"] for r in rows] == [1.0, 3.0]  # the rest of the call is kept
    assert rows[1]["messages"] == conversation(2)


def test_rows_form_and_missing_cells() -> None:
    event, problems = to_event("k", [{"messages": conversation(0), "reward": 1.0},
                                     {"reward": 0.0}], 1, 0.0, strict=True)
    assert not problems and event.trajectories == ("messages",)
    assert event.values[0][1] is None


def test_a_conversation_column_is_found_by_its_cells() -> None:
    event, _ = to_event("k", {"chat": [conversation(0)], "reward": [1.0]}, 1, 0.0,
                        strict=True)
    assert event.trajectories == ("chat",)


def test_summary_and_transcript() -> None:
    messages = conversation(1, fail=True)
    s = summary(messages)
    assert (s.turns, s.tool_calls, s.tool_errors, s.tools, s.ends_open) == (
        2, 1, 1, ["search"], False)
    assert summary(messages[:-1]).ends_open
    text = transcript(messages)
    assert "[tool search error]" in text and "[assistant] (reward 0.125, 31 ms)" in text
    assert '-> search({"q": "a\\u2028b \\"quoted\\"", "deep": {"x": [1.5]}})' in text
    assert transcript(messages, limit=40).endswith("more characters in the spool)")


def test_any_text_comes_back_exactly_through_the_spool_encoding() -> None:
    """Property: whatever text (any code point UTF-8 holds, U+2028, quotes, backslashes,
    JSON inside arguments) and numbers a conversation holds, the spool's payload gives the
    same messages back."""
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    from trackmux.core.spool import samplepack
    from trackmux.core.values.trajectory import decode

    text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
    number = st.one_of(st.integers(-2**53, 2**53),
                       st.floats(allow_nan=False, allow_infinity=False))
    message = st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", "system"]),
         "content": st.one_of(st.none(), text)},
        optional={"reward": number, "latency_ms": number, "name": text,
                  "tool_calls": st.lists(st.fixed_dictionaries(
                      {"id": text, "name": text, "arguments": text}), max_size=2),
                  "status": st.sampled_from(["ok", "error"])})

    @hypothesis.settings(max_examples=150, deadline=None)
    @hypothesis.given(st.lists(st.lists(message, max_size=5), min_size=1, max_size=4))
    def check(cells: list[list[dict[str, Any]]]) -> None:
        event, _ = to_event("k", {"messages": cells}, 1, 0.0, strict=True)
        row, payload = samplepack.pack(event)
        back = samplepack.unpack(row, payload, 1, 0.0, 1)
        assert back.trajectories == ("messages",)
        assert [decode(c) for c in back.values[0]] == cells

    check()


def test_attached_workers_send_conversations_whole() -> None:
    """A Ray worker's ``log_samples`` crosses to the driver as plain data (attached/wire.py):
    the conversation column stays one."""
    from trackmux.attached import wire

    event, _ = to_event("k", {"messages": [conversation(0)], "reward": [1.0]}, 1, 0.0,
                        strict=True)
    [back] = wire.decode(wire.encode([event]))
    assert back == event and back.trajectories == ("messages",)
