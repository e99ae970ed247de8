"""Conversations (a ``messages`` column with tool calls) for the backends' own read-back
tests (issue 37): 6 agentic samples per step in 3 groups of 2, tool calls that fail, per-turn
reward and latency, and text a backend could mangle (unicode, U+2028, markup, JSON inside
tool arguments). Each backend test delivers :func:`trajectory_spool` and checks what its
own storage shows with :func:`check_transcript`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trackmux.core.events import SamplesEvent
from trackmux.core.values.samples import to_event

STEPS = (1, 2)
KEY = "agent/rollouts"
OPTIONS = {"sample_rows": 4, "sample_policy": "best"}
BEST = [2, 3, 4, 5]  # the two best groups by reward (reward = the sample's index)
ODD = "naïve ✓ \u2028 <b>bold</b>"


def messages(step: int, i: int) -> list[dict[str, Any]]:
    """Sample ``i`` of ``step``: a search that fails on odd samples, then an answer."""
    status = "error" if i % 2 else "ok"
    return [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": f"step {step} question {i}: {ODD}"},
        {"role": "assistant", "content": "let me look",
         "tool_calls": [{"id": f"c{i}", "name": "search",
                         "arguments": '{"q": "x\\u2028y", "k": [1, 2]}'}],
         "reward": 0.25, "latency_ms": 120},
        {"role": "tool", "tool_call_id": f"c{i}", "name": "search", "status": status,
         "content": "timeout" if status == "error" else "found it"},
        {"role": "assistant", "content": f"answer {i} at step {step}", "reward": 1.0,
         "latency_ms": 80.5},
    ]


def trajectory_events(t0: float) -> list[SamplesEvent]:
    out = []
    for step in STEPS:
        event, problems = to_event(
            KEY, {"messages": [messages(step, i) for i in range(6)],
                  "uid": [f"g{i // 2}" for i in range(6)],
                  "reward": [float(i) for i in range(6)]},
            step, t0 + step, strict=True)
        assert not problems and event.trajectories == ("messages",)
        out.append(event)
    return out


def trajectory_spool(tmp_path: Path, t0: float = 1.7e9) -> Path:
    """A finished run's spool holding :func:`trajectory_events` (the run dir)."""
    from trackmux.core.spool.writer import SpoolWriter

    run_dir = tmp_path / "spool" / "p" / "agent"
    writer = SpoolWriter(run_dir)
    writer.set_meta(run_id="agent", project="p", name="agent", state="finished",
                    started_at=t0)
    for event in trajectory_events(t0):
        writer.append(event)
    writer.close()
    return run_dir


def check_transcript(text: str, step: int, i: int) -> None:
    """A backend's text of sample ``i`` at ``step``: every turn, in order, as text."""
    expected = [f"step {step} question {i}: {ODD}", "[assistant] (reward 0.25, 120 ms)",
                '-> search({"q": "x\\u2028y", "k": [1, 2]})',
                f"[tool search {'error' if i % 2 else 'ok'}]",
                f"answer {i} at step {step}"]
    at = 0
    for part in expected:
        found = text.find(part, at)
        assert found >= 0, (part, text)
        at = found + len(part)


def check_table_row(row: dict[str, Any], step: int) -> None:
    """One row of core's table fallback as a backend keeps it (cells may be text)."""
    i = int(row["sample"])
    assert int(row["step"]) == step and i in BEST
    check_transcript(str(row["messages"]), step, i)
    assert int(row["turns"]) == 2 and int(row["tool_calls"]) == 1
    assert int(row["tool_errors"]) == i % 2 and row["tools"] == "search"


#: core's fallback table of these conversations (the columns a backend keeps)
COLUMNS = ("step", "sample", "messages", "uid", "reward", "turns", "tool_calls",
           "tool_errors", "tools")


def check_table(step: int, rows: list[list[Any]]) -> None:
    """A step's table as a backend keeps it (rows of cells in :data:`COLUMNS` order): the
    best groups, each conversation as its transcript beside its summary."""
    assert [int(r[1]) for r in rows] == BEST, rows
    for row in rows:
        check_table_row(dict(zip(COLUMNS, row, strict=True)), step)
