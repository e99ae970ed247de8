"""Synthetic agentic runs for the trajectory rules: batches of conversations with tool
calls, healthy or breaking in one way from step ``at`` on."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from trackmux.core.events import SamplesEvent
from trackmux.core.values.samples import to_event

TOOLS = ("search", "python", "browse")
LIMIT = 8  # the rollout's turn limit


def conversation(rng: random.Random, calls: int, fail: float, weights: list[float],
                 open_end: bool) -> list[dict[str, Any]]:
    """A task, ``calls`` tool calls (each failing with probability ``fail``), then a final
    answer (none when ``open_end``: cut at the turn limit)."""
    out: list[dict[str, Any]] = [{"role": "user", "content": "solve task"}]
    for c in range(calls):
        tool = rng.choices(TOOLS, weights)[0]
        out.append({"role": "assistant", "content": f"calling {tool}",
                    "tool_calls": [{"id": f"c{c}", "name": tool,
                                    "arguments": f'{{"q": "{rng.random():.3f}"}}'}],
                    "latency_ms": rng.uniform(50, 400)})
        failed = rng.random() < fail
        out.append({"role": "tool", "tool_call_id": f"c{c}", "name": tool,
                    "status": "error" if failed else "ok",
                    "content": "Traceback: boom" if failed else f"result {rng.random():.4f}"})
    if not open_end:
        out.append({"role": "assistant", "content": f"answer {rng.random():.5f}",
                    "reward": rng.random()})
    return out


def agentic_run(steps: int = 160, batch: int = 32, seed: int = 0, breaks: str = "",
                at: int = 100) -> Iterator[SamplesEvent]:
    """One batch of conversations per step. Healthy: 2-4 tool calls (fewer as it learns),
    5-10% of them failing, a mixed choice of tools that drifts a little, a rare rollout cut
    at the limit. ``breaks`` from step ``at``: ``failing`` (60% of calls fail), ``runaway``
    (the policy loops to the limit), ``collapse`` (no tool calls), ``truncation`` (half
    the rollouts cut at the limit) or ``dominance`` (almost only search)."""
    rng = random.Random(seed)
    for step in range(steps):
        broken = breaks if step >= at else ""
        fail = 0.6 if broken == "failing" else rng.uniform(0.05, 0.1)
        drift = step / steps
        weights = [0.97, 0.015, 0.015] if broken == "dominance" else \
            [0.4 + 0.1 * drift, 0.35, 0.25 - 0.1 * drift]
        cells = []
        for _ in range(batch):
            calls = rng.randint(2, 4) - (1 if rng.random() < drift * 0.5 else 0)
            open_end = rng.random() < 0.02
            if broken == "runaway" or (broken == "truncation" and rng.random() < 0.5):
                calls, open_end = LIMIT, True
            elif broken == "collapse":
                calls = 0
            if open_end:
                calls = LIMIT
            cells.append(conversation(rng, calls, fail, weights, open_end))
        event, problems = to_event(
            "agent/rollouts", {"messages": cells, "uid": [f"g{i // 4}" for i in range(batch)],
                               "reward": [rng.random() for _ in range(batch)]},
            step, 1000.0 + 10 * step, strict=True)
        assert not problems
        yield event
