"""Rules over agentic trajectories (a ``messages`` column of the samples ledger, issue 37).

Each batch of conversations (one ``log_samples`` call with a conversation column,
core/values/trajectory.py) is reduced once to a few counts (:class:`Batch`): trajectories,
turns, tool calls and failed ones (per tool), and how many ended cut at the turn limit.
Four rules compare the last ``window`` batches of a key with the batches before them (at
most ``history``), so a rule speaks of a change, not of a level a task may simply have:

- ``tool_failures``: the share of failed tool calls rises;
- ``turn_count_shift``: the mean number of turns runs away or collapses;
- ``turn_limit_truncation``: many trajectories stop at the turn limit without an answer;
- ``tool_dominance``: one tool takes over the calls of a run that used several.

Thresholds and their reasons are in docs/doctor.md ("Agentic trajectories").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trackmux.core.events import Event, SamplesEvent
from trackmux.core.values import trajectory
from trackmux.doctor.detector import Detector, KeyMatcher, Param
from trackmux.doctor.findings import Finding
from trackmux.doctor.stats import Latch, median

#: a ``truncated``-like column, when the trainer logs one, marks a cut trajectory
TRUNCATED_COLUMNS = ("truncated", "turn_limit", "hit_max_turns")
STOP_COLUMNS = ("finish_reason", "stop_reason", "termination")
STOP_AT_LIMIT = {"max_turns", "turn_limit", "length", "max_steps", "truncated"}


@dataclass
class Batch:
    """One batch of conversations, reduced to counts."""

    step: int
    trajectories: int = 0
    turns: list[int] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    cut: int = 0  # ended open (no final answer) at the batch's most turns, or marked

    @property
    def tool_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def tool_errors(self) -> int:
        return sum(self.errors.values())

    @property
    def mean_turns(self) -> float:
        return sum(self.turns) / len(self.turns) if self.turns else 0.0


def _errors_by_tool(messages: list[dict[str, Any]], into: dict[str, int]) -> None:
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            body = call.get("function", call) if isinstance(call, dict) else {}
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                names[call["id"]] = str(body.get("name"))
        if message.get("role") == "tool" and message.get("status") == "error":
            name = message.get("name") or names.get(str(message.get("tool_call_id")), "?")
            into[str(name)] = into.get(str(name), 0) + 1


def _marked(event: SamplesEvent) -> list[bool] | None:
    """Per sample, whether the trainer marked it cut (a truncated/stop-reason column)."""
    for name in TRUNCATED_COLUMNS:
        if name in event.columns:
            return [v is True or v == 1 for v in event.values[event.columns.index(name)]]
    for name in STOP_COLUMNS:
        if name in event.columns:
            return [isinstance(v, str) and v.lower() in STOP_AT_LIMIT
                    for v in event.values[event.columns.index(name)]]
    return None


_last: tuple[SamplesEvent, Batch] | None = None


def batch_of(event: SamplesEvent) -> Batch | None:
    """The counts of ``event``'s first conversation column (None without one); the four
    rules share one reduction per event."""
    global _last
    if not event.trajectories:
        return None
    if _last is not None and _last[0] is event:
        return _last[1]
    column = event.values[event.columns.index(event.trajectories[0])]
    batch = Batch(event.step)
    open_at: list[tuple[int, bool]] = []
    for cell in column:
        messages = trajectory.decode(cell)
        if messages is None:
            continue
        s = trajectory.summary(messages)
        batch.trajectories += 1
        batch.turns.append(s.turns)
        for name, count in s.tool_counts.items():
            batch.calls[name] = batch.calls.get(name, 0) + count
        if s.tool_errors:
            _errors_by_tool(messages, batch.errors)
        open_at.append((s.turns, s.ends_open))
    marked = _marked(event)
    if marked is not None:
        batch.cut = sum(marked)
    elif open_at:
        limit = max(t for t, _ in open_at)
        batch.cut = sum(1 for t, ends_open in open_at if ends_open and t == limit)
    _last = (event, batch)
    return batch


class TrajectoryRule(Detector):
    """Shared: the batches of each key with conversations, and a latch per key."""

    kinds = frozenset({"samples"})
    base_params = {
        "keys": Param(["*"], "patterns", "sample keys to read"),
        "window": Param(5, "count", "recent batches judged together"),
        "history": Param(50, "count", "earlier batches the recent ones are compared with"),
        "min_history": Param(5, "count", "earlier batches needed before judging"),
        "persist": Param(2, "count", "batches in a row"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.match = KeyMatcher(self.params["keys"])
        self.batches: dict[str, list[Batch]] = {}
        self.latches: dict[str, Latch] = {}

    def update(self, event: Event) -> Sequence[Finding]:
        if not isinstance(event, SamplesEvent) or not self.match(event.key):
            return ()
        batch = batch_of(event)
        if batch is None or not batch.trajectories:
            return ()
        batches = self.batches.setdefault(event.key, [])
        batches.append(batch)
        window, history = self.params["window"], self.params["history"]
        del batches[:-(window + history)]
        recent, before = batches[-window:], batches[:-window]
        if len(before) < self.params["min_history"]:
            return ()
        message = self.judge(event.key, recent, before)
        latch = self.latches.setdefault(event.key, Latch(self.params["persist"]))
        if not latch.check(message is not None, event.step) or message is None:
            return ()
        return [self.finding(latch.onset, [event.key], message, time=event.time)]

    def judge(self, key: str, recent: list[Batch], before: list[Batch]) -> str | None:
        raise NotImplementedError


def _steps(batches: list[Batch]) -> str:
    return f"steps {batches[0].step}-{batches[-1].step}"


def _failure_share(batches: list[Batch]) -> float | None:
    calls = sum(b.tool_calls for b in batches)
    return sum(b.tool_errors for b in batches) / calls if calls else None


class ToolFailures(TrajectoryRule):
    """The share of failed tool calls (tool results with ``status: error``) rises: over
    the last ``window`` batches it is at least ``min_share``, ``rise`` above and ``ratio``
    times the share of the batches before, with ``min_calls`` calls or more."""

    rule = "tool_failures"
    params_spec = {
        **TrajectoryRule.base_params,
        "min_share": Param(0.2, "fraction", "failed share of the recent calls"),
        "rise": Param(0.15, "fraction", "above the earlier share by this much"),
        "ratio": Param(2.0, "positive", "and this many times the earlier share"),
        "min_calls": Param(20, "count", "tool calls the recent batches need"),
    }

    def judge(self, key: str, recent: list[Batch], before: list[Batch]) -> str | None:
        now, then = _failure_share(recent), _failure_share(before)
        calls = sum(b.tool_calls for b in recent)
        if now is None or then is None or calls < self.params["min_calls"]:
            return None
        if now < self.params["min_share"] or now < then + self.params["rise"] or \
                now < then * self.params["ratio"]:
            return None
        errors: dict[str, int] = {}
        for b in recent:
            for name, count in b.errors.items():
                errors[name] = errors.get(name, 0) + count
        worst = sorted(errors.items(), key=lambda item: -item[1])[:3]
        named = ", ".join(f"{name} {count}" for name, count in worst)
        return (f"tool calls in {key} fail more: {now:.0%} of {calls} calls failed over "
                f"{_steps(recent)}, against {then:.0%} over {_steps(before)} (failed: "
                f"{named}); a tool or its sandbox broke, or the policy now writes calls "
                f"the tools reject (see their arguments with trackmux samples --where "
                f"'tool_errors > 0')")


class TurnCountShift(TrajectoryRule):
    """The mean number of turns (assistant messages) per trajectory runs away (the median
    of the recent batches at least ``grow`` times, and ``min_change`` turns above, the
    earlier median) or collapses (at most ``shrink`` times it, ``min_change`` below)."""

    rule = "turn_count_shift"
    params_spec = {
        **TrajectoryRule.base_params,
        "grow": Param(1.8, "positive", "runaway: recent / earlier turns at least this"),
        "shrink": Param(0.5, "positive", "collapse: recent / earlier turns at most this"),
        "min_change": Param(1.0, "positive", "turns of change, either way"),
    }

    def judge(self, key: str, recent: list[Batch], before: list[Batch]) -> str | None:
        now = median(b.mean_turns for b in recent)
        then = median(b.mean_turns for b in before)
        if then <= 0 or abs(now - then) < self.params["min_change"]:
            return None
        if now >= then * self.params["grow"]:
            return (f"turns per trajectory in {key} ran away: {now:.1f} on average over "
                    f"{_steps(recent)}, against {then:.1f} over {_steps(before)}; the policy "
                    f"loops on tools without answering, or an environment stopped ending "
                    f"episodes")
        if now <= then * self.params["shrink"]:
            return (f"turns per trajectory in {key} collapsed: {now:.1f} on average over "
                    f"{_steps(recent)}, against {then:.1f} over {_steps(before)}; the policy "
                    f"stopped using its tools (answers at once), or rollouts end early")
        return None


class TurnLimitTruncation(TrajectoryRule):
    """At least ``share`` of the trajectories of the recent batches stop at the turn limit
    without a final answer (they end on a tool call or result at the batch's most turns,
    or the trainer marked them in a ``truncated``/``finish_reason`` column), and at least
    ``rise`` more than before: their reward is judged on an unfinished episode."""

    rule = "turn_limit_truncation"
    params_spec = {
        **TrajectoryRule.base_params,
        "min_history": Param(1, "count", "earlier batches needed before judging"),
        "share": Param(0.3, "fraction", "share of the recent trajectories cut"),
        "rise": Param(0.1, "fraction", "above the earlier share by this much"),
    }

    def judge(self, key: str, recent: list[Batch], before: list[Batch]) -> str | None:
        total = sum(b.trajectories for b in recent)
        cut = sum(b.cut for b in recent)
        earlier = sum(b.cut for b in before) / max(1, sum(b.trajectories for b in before))
        share = cut / total if total else 0.0
        if share < self.params["share"] or share < earlier + self.params["rise"]:
            return None
        limit = max(max(b.turns, default=0) for b in recent)
        return (f"{share:.0%} of the trajectories in {key} stopped at the turn limit "
                f"({limit} turns) without a final answer over {_steps(recent)} ({cut} of "
                f"{total}; {earlier:.0%} before): their rewards judge unfinished episodes; "
                f"raise the limit or penalise looping")


class ToolDominance(TrajectoryRule):
    """One tool takes over: over the recent batches it makes at least ``share`` of the
    calls (``min_calls`` or more) of a run whose earlier batches used ``min_tools`` tools
    or more, and its earlier share was at least ``rise`` lower."""

    rule = "tool_dominance"
    params_spec = {
        **TrajectoryRule.base_params,
        "share": Param(0.9, "fraction", "the tool's share of the recent calls"),
        "rise": Param(0.2, "fraction", "above its earlier share by this much"),
        "min_tools": Param(2, "count", "tools the earlier batches used"),
        "min_calls": Param(20, "count", "tool calls the recent batches need"),
    }

    def judge(self, key: str, recent: list[Batch], before: list[Batch]) -> str | None:
        now: dict[str, int] = {}
        then: dict[str, int] = {}
        for batches, into in ((recent, now), (before, then)):
            for b in batches:
                for name, count in b.calls.items():
                    into[name] = into.get(name, 0) + count
        calls, earlier = sum(now.values()), sum(then.values())
        if calls < self.params["min_calls"] or not earlier or \
                len(then) < self.params["min_tools"]:
            return None
        name, count = max(now.items(), key=lambda item: item[1])
        share, before_share = count / calls, then.get(name, 0) / earlier
        if share < self.params["share"] or share < before_share + self.params["rise"]:
            return None
        others = ", ".join(sorted(n for n in then if n != name)[:5])
        return (f"one tool dominates {key}: {name} made {share:.0%} of {calls} calls over "
                f"{_steps(recent)}, against {before_share:.0%} over {_steps(before)} (the "
                f"others: {others}); the policy collapsed onto one tool")


BUILTIN: tuple[type[Detector], ...] = (ToolFailures, TurnCountShift, TurnLimitTruncation,
                                       ToolDominance)
