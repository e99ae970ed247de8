"""Which samples a backend shows, and as what: the cap and the stated selection policy.

The spool keeps every sample of a :class:`SamplesEvent`; a backend shows at most its cap
(``sample_rows``: its class default, or the backend option) chosen by a policy
(``sample_policy``), the same rows at every delivery and every sync:

- ``spread`` (default): evenly over the batch (first and last kept);
- ``best`` / ``worst``: highest / lowest reward first;
- ``extremes``: half the cap from the best, half from the worst;
- ``random``: a random choice seeded by ``sample_seed`` (default 0) and the step.

When the samples carry a group column (``group``, ``uid`` or ``group_id``: GRPO's prompt
groups) whole groups are chosen, ranked by their mean reward, so a shown sample is always
beside its siblings; a single group larger than the cap is cut to the cap. The reward is
the column ``reward`` (else ``score``); without one, ``best``/``worst``/``extremes`` fall
back to ``spread``.

A backend that does not show samples natively gets them as a table (:func:`to_table`):
``step`` and ``sample`` (the row in the spool's batch) first, then every column, then per
token array its length and mean (``<name>/mean``): the token values stay in the spool, the
report and ``trackmux samples``. A conversation column (``messages``,
core/values/trajectory.py) is shown as its transcript (plain text, a block per message),
followed by ``turns``, ``tool_calls``, ``tool_errors`` and ``tools`` (comma-separated).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

from trackmux.core.backends.contract import SAMPLE_POLICIES as POLICIES
from trackmux.core.events import Cell, SamplesEvent, TableEvent, TokenArray

GROUP_COLUMNS = ("group", "uid", "group_id")
REWARD_COLUMNS = ("reward", "score")


def check_policy(options: Mapping[str, Any], backend: str) -> tuple[str, int]:
    """The policy and seed named in a backend's options (errors name the option)."""
    policy = options.get("sample_policy", "spread")
    if policy not in POLICIES:
        raise ValueError(f"{backend} option sample_policy must be one of {list(POLICIES)}, "
                         f"got {policy!r}")
    seed = options.get("sample_seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"{backend} option sample_seed must be an int, got "
                        f"{type(seed).__name__}")
    return str(policy), seed


def column(event: SamplesEvent, names: tuple[str, ...]) -> tuple[Cell, ...] | None:
    for name in names:
        if name in event.columns:
            return event.values[event.columns.index(name)]
    return None


def _number(value: Cell) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) if math.isfinite(value) else None
    return None


def select(event: SamplesEvent, cap: int | None, policy: str = "spread",
           seed: int = 0) -> list[int]:
    """The indices of the samples to show (in batch order), at most ``cap``."""
    n = event.count
    if cap is None or n <= cap:
        return list(range(n))
    groups_col = column(event, GROUP_COLUMNS)
    units: list[list[int]]
    if groups_col is not None:
        by_group: dict[Any, list[int]] = {}
        for i, g in enumerate(groups_col):
            by_group.setdefault(g, []).append(i)
        units = list(by_group.values())
    else:
        units = [[i] for i in range(n)]
    rewards = column(event, REWARD_COLUMNS)
    order = _order(units, rewards, policy, seed, event.step)
    chosen: list[int] = []
    for unit in order:
        if len(chosen) + len(unit) > cap:
            if not chosen:
                chosen = unit[:cap]
            continue
        chosen.extend(unit)
        if len(chosen) >= cap:
            break
    return sorted(chosen)


def _order(units: list[list[int]], rewards: tuple[Cell, ...] | None, policy: str,
           seed: int, step: int) -> list[list[int]]:
    if policy == "random":
        picked = list(units)
        random.Random(f"{seed}:{step}").shuffle(picked)
        return picked
    if policy in ("best", "worst", "extremes") and rewards is not None:
        def mean(unit: list[int]) -> float:
            values = [v for v in (_number(rewards[i]) for i in unit) if v is not None]
            return sum(values) / len(values) if values else -math.inf

        ranked = sorted(units, key=mean, reverse=True)  # stable: ties keep batch order
        if policy == "best":
            return ranked
        if policy == "worst":
            return ranked[::-1]
        out: list[list[int]] = []
        lo, hi = 0, len(ranked) - 1
        while lo <= hi:
            out.append(ranked[lo])
            if lo != hi:
                out.append(ranked[hi])
            lo, hi = lo + 1, hi - 1
        return out
    # spread: evenly over the units, first and last first, then the middle ones
    total = len(units)
    if total <= 2:
        return units
    picks: list[int] = []
    seen: set[int] = set()
    parts = 1
    while len(picks) < total:
        parts *= 2
        for k in range(parts + 1):
            i = round(k * (total - 1) / parts)
            if i not in seen:
                seen.add(i)
                picks.append(i)
    return [units[i] for i in picks]


def token_mean(array: TokenArray, index: int) -> float | None:
    from trackmux.core.spool.samplepack import token_row

    if array.dtype == "s":
        return None
    values = [v for v in token_row(array, index) if math.isfinite(v)]
    return round(sum(values) / len(values), 6) if values else None


def _conversation_cells(event: SamplesEvent, i: int) -> tuple[list[Cell], list[Cell]]:
    """Sample ``i``'s cells with each conversation as its transcript, and the summary
    cells of its first conversation column."""
    from trackmux.core.values import trajectory

    cells: list[Cell] = []
    summary: list[Cell] = []
    for name, col in zip(event.columns, event.values, strict=True):
        if name not in event.trajectories:
            cells.append(col[i])
            continue
        messages = trajectory.decode(col[i])
        cells.append(None if messages is None else trajectory.transcript(messages))
        if name == event.trajectories[0]:
            found = trajectory.summary_columns(messages)
            summary = [found["turns"], found["tool_calls"], found["tool_errors"],
                       ", ".join(found["tools"])]
    return cells, summary


def to_table(event: SamplesEvent, rows: list[int]) -> TableEvent:
    """The chosen samples as a table (see the module docstring for the columns)."""
    columns = ["step", "sample", *event.columns]
    if event.trajectories:
        columns.extend(("turns", "tool_calls", "tool_errors", "tools"))
    numeric = [t for t in event.tokens if t.dtype in ("f2", "f4")]
    if event.tokens:
        columns.append("tokens")
    columns.extend(f"{t.name}/mean" for t in numeric if f"{t.name}/mean" not in columns)
    seen: set[str] = set()
    keep = [i for i, c in enumerate(columns) if not (c in seen or seen.add(c))]  # type: ignore[func-returns-value]
    out = []
    for i in rows:
        if event.trajectories:
            shown, summary = _conversation_cells(event, i)
            cells: list[Cell] = [event.step, i, *shown, *summary]
        else:
            cells = [event.step, i, *(col[i] for col in event.values)]
        if event.tokens:
            cells.append(event.tokens[0].lengths[i])
        cells.extend(token_mean(t, i) for t in numeric)
        out.append(tuple(cells[j] for j in keep))
    return TableEvent(event.key, tuple(columns[j] for j in keep), tuple(out), event.step,
                      event.time, event.seq)


#: the characters of one transcript shown as text (the spool keeps it whole)
MAX_TRANSCRIPT = 20_000


def conversations_text(event: SamplesEvent, rows: list[int]) -> str:
    """The chosen samples' conversations as markdown for a backend that shows text but
    not tables (tensorboard): a heading per sample with its summary, then the transcript
    indented as a code block (model output can never turn into markup there)."""
    from trackmux.core.values import trajectory

    name = event.trajectories[0]
    col = event.values[event.columns.index(name)]
    rewards = column(event, REWARD_COLUMNS)
    parts = []
    for i in rows:
        messages = trajectory.decode(col[i])
        if messages is None:
            continue
        s = trajectory.summary(messages)
        head = (f"**sample {i}**: {s.turns} turns, {s.tool_calls} tool calls, "
                f"{s.tool_errors} failed")
        if rewards is not None and _number(rewards[i]) is not None:
            head += f", reward {rewards[i]:g}"
        body = trajectory.transcript(messages, MAX_TRANSCRIPT)
        parts.append(head + "\n\n" + "\n".join("    " + line for line in body.split("\n")))
    return "\n\n".join(parts)
