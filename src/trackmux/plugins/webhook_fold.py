"""How the webhook backend groups findings into POSTs, and caps them (issue 34 item 13).

A run where 300 keys go NaN at different steps raises 300 findings of one rule; a chat
channel wants one alert and a count, not 300 pings. The rules, in order:

- a finding whose rule was not alerted in the last ``fold_seconds`` (default 60), or
  that is more severe than the rule's last alert, goes out at once, if the cap allows;
- other findings of that rule are folded into the rule's held group (the same episode):
  the group goes out as ONE POST when ``fold_seconds`` have passed since the rule's last
  alert, saying how many findings it folds, their steps and keys;
- at most ``max_per_minute`` POSTs (default 10) in any 60 s, over all rules; what the cap
  holds back waits in its group and goes out in the next free slot;
- at ``close`` every held group goes out (one POST per rule, past the cap: the run is
  over), so nothing is lost; held groups are also part of the backend's ``state()``,
  stored with each acknowledgement, so a retry or a restarted delivery sends them too.

Pure bookkeeping (no I/O, no threads): the backend asks :meth:`Folder.due` what to send
now and when to ask again.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from trackmux.core.events import SEVERITIES, FindingEvent

DEFAULT_MAX_PER_MINUTE = 10
DEFAULT_FOLD_SECONDS = 60.0
WINDOW = 60.0
#: the findings listed one by one in a POST (the count says how many there were)
MAX_LISTED = 50
MAX_KEYS = 20


def _rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else -1


@dataclass
class Group:
    """Findings of one rule waiting to go out together."""

    rule: str
    findings: list[dict[str, Any]] = field(default_factory=list)
    count: int = 0
    first_step: int = 0
    last_step: int = 0
    keys: list[str] = field(default_factory=list)
    more_keys: int = 0

    def add(self, finding: dict[str, Any]) -> None:
        if not self.count:
            self.first_step = self.last_step = int(finding["step"])
        self.count += 1
        self.first_step = min(self.first_step, int(finding["step"]))
        self.last_step = max(self.last_step, int(finding["step"]))
        for key in finding["keys"]:
            if key in self.keys:
                continue
            if len(self.keys) < MAX_KEYS:
                self.keys.append(key)
            else:
                self.more_keys += 1
        if len(self.findings) < MAX_LISTED:
            self.findings.append(finding)
        elif _rank(finding["severity"]) > max(_rank(f["severity"]) for f in self.findings):
            self.findings[-1] = finding  # the most severe one is always listed

    def head(self) -> dict[str, Any]:
        """The most severe finding (the first of those): the body's main fields."""
        return max(self.findings, key=lambda f: (_rank(f["severity"]), -f["seq"]))

    def as_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "findings": self.findings, "count": self.count,
                "first_step": self.first_step, "last_step": self.last_step,
                "keys": self.keys, "more_keys": self.more_keys}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Group:
        return cls(str(data["rule"]), list(data["findings"]), int(data["count"]),
                   int(data["first_step"]), int(data["last_step"]), list(data["keys"]),
                   int(data["more_keys"]))


def finding_dict(event: FindingEvent) -> dict[str, Any]:
    return {"seq": event.seq, **event.as_dict(), "time": event.time, "text": event.line()}


class Folder:
    """Held groups, the POST times of the last minute and each rule's last alert."""

    def __init__(self, max_per_minute: int = DEFAULT_MAX_PER_MINUTE,
                 fold_seconds: float = DEFAULT_FOLD_SECONDS,
                 clock: Any = time.time) -> None:
        self.max_per_minute = max_per_minute
        self.fold_seconds = fold_seconds
        self.clock = clock
        self.held: dict[str, Group] = {}
        self.posts: deque[float] = deque()
        #: rule -> (wall time, severity rank) of its last alert
        self.last: dict[str, tuple[float, int]] = {}

    def add(self, event: FindingEvent) -> None:
        group = self.held.get(event.rule)
        if group is None:
            group = self.held[event.rule] = Group(event.rule)
        group.add(finding_dict(event))

    def _free(self, now: float) -> bool:
        while self.posts and now - self.posts[0] >= WINDOW:
            self.posts.popleft()
        return len(self.posts) < self.max_per_minute

    def _ready_at(self, group: Group) -> float:
        """When a group may go (cap aside): at once for a new rule or a worse severity."""
        last = self.last.get(group.rule)
        if last is None or max(_rank(f["severity"]) for f in group.findings) > last[1]:
            return 0.0
        return last[0] + self.fold_seconds

    def due(self, final: bool = False) -> tuple[list[Group], float | None]:
        """The groups to send now (taken out of ``held``; put back with :meth:`failed`),
        and the wall time to ask again (None: nothing is held). ``final``: all of them."""
        now = self.clock()
        out: list[Group] = []
        for rule, group in sorted(self.held.items(), key=lambda item: -max(
                _rank(f["severity"]) for f in item[1].findings)):
            if final or (self._ready_at(group) <= now and self._free(now)):
                del self.held[rule]
                out.append(group)
                self.sent(group, now)
        if not self.held:
            return out, None
        self._free(now)
        slot = self.posts[0] + WINDOW if len(self.posts) >= self.max_per_minute else now
        return out, max(slot, min(self._ready_at(g) for g in self.held.values()), now)

    def sent(self, group: Group, now: float) -> None:
        self.posts.append(now)
        self.last[group.rule] = (now, max(_rank(f["severity"]) for f in group.findings))

    def failed(self, group: Group) -> None:
        """A POST failed: hold its findings again (merged with any held since)."""
        again = self.held.pop(group.rule, None)
        self.held[group.rule] = group
        if again is not None:
            for finding in again.findings:
                group.add(finding)
            group.count += again.count - len(again.findings)

    def state(self) -> dict[str, Any]:
        return {"held": [g.as_json() for g in self.held.values()],
                "last": {rule: list(value) for rule, value in self.last.items()},
                "posts": list(self.posts)}

    def restore(self, state: Any) -> None:
        """From a stored ``state()``; a malformed one is ignored (nothing held)."""
        if not isinstance(state, dict):
            return
        try:
            held = [Group.from_json(g) for g in state.get("held", [])]
            last = {str(r): (float(v[0]), int(v[1])) for r, v in state.get("last", {}).items()}
            posts = deque(sorted(float(t) for t in state.get("posts", [])))
        except (KeyError, TypeError, ValueError, IndexError):
            return
        self.held = {g.rule: g for g in held if g.findings}
        self.last, self.posts = last, posts


def digest_text(group: Group, head_line: str) -> str:
    """The one-line ``text`` of a POST: the head finding's line, and what was folded."""
    if group.count <= 1:
        return head_line
    steps = (f"step {group.first_step}" if group.first_step == group.last_step
             else f"steps {group.first_step}-{group.last_step}")
    keys = ", ".join(group.keys) + (f" (+{group.more_keys} more)" if group.more_keys else "")
    return (f"{head_line} (+{group.count - 1} more {group.rule} finding(s) folded into this "
            f"alert: {steps}; keys {keys})")
