"""``stall``: steps stop arriving for many times the usual interval while the trainer is
alive (a hang in rollout or in a collective), or the step time jumps.

It reads the wall time of each new step (the event's own time, stamped in the trainer);
on a live run the engine ticks it every second with the clock and whether the trainer is
alive, which the delivery process knows (its control pipe is open and no finish came).
Over a finished run the same rule finds the gaps the run recovered from.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from trackmux.core.events import Event, MetricsEvent
from trackmux.doctor.detector import Detector, Param
from trackmux.doctor.findings import Finding
from trackmux.doctor.stats import Latch, median


def seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.2g} s"


class Stall(Detector):
    rule = "stall"
    kinds = frozenset({"metrics"})
    params_spec = {
        "factor": Param(10.0, "positive", "a gap of this many usual step intervals"),
        "min_seconds": Param(300.0, "positive", "and at least this long (a validation pass "
                             "or a checkpoint save can take minutes)"),
        "window": Param(20, "count", "step intervals in the usual interval"),
        "min_steps": Param(5, "count", "steps seen before judging"),
        "jump": Param(4.0, "positive", "step time this many times the usual one"),
        "jump_seconds": Param(5.0, "positive", "and at least this much longer"),
        "persist": Param(3, "count", "slow steps in a row before a jump counts"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.intervals: deque[float] = deque(maxlen=self.params["window"])
        self.last_step = -1
        self.last_time = 0.0
        self.steps = 0
        self.stalled = False
        self.jumps = Latch(self.params["persist"])
        self.recent: deque[float] = deque(maxlen=self.params["persist"])

    def usual(self) -> float | None:
        if self.steps < self.params["min_steps"] or not self.intervals:
            return None
        return median(self.intervals)

    def update(self, event: Event) -> Sequence[Finding]:
        if not isinstance(event, MetricsEvent) or event.step <= self.last_step:
            return ()
        if not self.read:
            self.note_read("(the steps' wall times)")
        out: list[Finding] = []
        if self.last_step >= 0:
            gap = event.time - self.last_time
            usual = self.usual()
            if usual is not None and gap >= max(self.params["factor"] * usual,
                                                self.params["min_seconds"]):
                if not self.stalled:  # a live stall already said so
                    out.append(self.finding(self.last_step, [], (
                        f"no step for {seconds(gap)} after step {self.last_step} (usual "
                        f"interval {seconds(usual)}); the run went on at step {event.step}"),
                        time=event.time))
            else:
                self.recent.append(gap)
                if usual is not None and len(self.recent) == self.recent.maxlen:
                    now = median(self.recent)
                    slow = now >= self.params["jump"] * usual and \
                        now - usual >= self.params["jump_seconds"]
                    if self.jumps.check(slow, self.last_step):
                        out.append(self.finding(self.jumps.onset, [], (
                            f"step time jumped from {seconds(usual)} to {seconds(now)} at "
                            f"step {self.jumps.onset}"), time=event.time, severity="info"))
                if not self.jumps.active:
                    self.intervals.append(gap)
        self.stalled = False
        self.last_step, self.last_time = event.step, event.time
        self.steps += 1
        return out

    def tick(self, now: float, alive: bool) -> Sequence[Finding]:
        usual = self.usual()
        if not alive or self.stalled or usual is None:
            return ()
        gap = now - self.last_time
        if gap < max(self.params["factor"] * usual, self.params["min_seconds"]):
            return ()
        self.stalled = True
        return [self.finding(self.last_step, [], (
            f"no new step for {seconds(gap)} since step {self.last_step} (usual interval "
            f"{seconds(usual)}) while the trainer is alive: a hang in rollout, a reward "
            f"call or a collective?"), time=now)]
