"""The watchers' findings, appended to the spool by the trainer while it lives.

The delivery process runs in the idle scheduling class. Had it appended the doctor's
findings itself, it would have held ``spool.db``'s write lock, and on a busy machine the
OS can keep it off the CPU for tens of milliseconds while it does: the trainer's spool
writer, and through backpressure a ``log()``, would wait that long (a priority inversion;
docs/performance.md B12; its cursors went to ``delivery.db`` for the same reason,
core/spool/acks.py). So while the trainer lives, the delivery process sends the findings
over its status pipe (``{"append": {"id": N, "events": [...]}}``); the trainer's monitor
thread appends them at the trainer's priority and answers on the control pipe
(``{"appended": {"id": N, "seq": S}}`` or ``{"id": N, "error": "..."}``). Once the trainer
has finished or is gone (or does not answer within ``ANSWER_WAIT``), the delivery process
appends them itself: nothing then contends for the lock. Findings (and the watchers' notes,
text events: core/delivery/watch.py) travel as spool rows (core/spool/codec.py), so what is
stored is what the watcher found, NaN included.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trackmux.core.delivery.watch import WatchEvent, identity, said_before
from trackmux.core.events import Event, FindingEvent, TextEvent
from trackmux.core.spool import codec
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.writer import append_events

#: how long the delivery process waits for the trainer's answer before appending itself
ANSWER_WAIT = 10.0


def encode(findings: list[WatchEvent]) -> list[dict[str, Any]]:
    out = []
    for finding in findings:
        (kind, step, ts, body), _blob = codec.encode(finding)
        out.append({"kind": kind, "step": step, "time": ts,
                    "body": base64.b64encode(body).decode("ascii")})
    return out


def decode(rows: list[dict[str, Any]]) -> list[WatchEvent]:
    out: list[WatchEvent] = []
    for row in rows:
        event = codec.decode(0, str(row["kind"]), int(row["step"]), float(row["time"]),
                             base64.b64decode(row["body"]))
        if not isinstance(event, (FindingEvent, TextEvent)):
            raise ValueError(f"not a finding or a note: {row['kind']!r}")
        out.append(event)
    return out


def append_requested(run_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """Trainer side: append the findings of one request; the answer to send back."""
    try:
        events: list[Event] = list(decode(request["events"]))
        return {"id": request["id"], "seq": append_events(run_dir, events)}
    except Exception as exc:  # the delivery process then tries itself and reports
        return {"id": request.get("id"), "error": f"{type(exc).__name__}: {exc}"}


class TrainerAppender:
    """Delivery side: the ``append`` of the process's WatchRunner."""

    def __init__(self, run_dir: Path, send: Callable[[dict[str, Any]], bool],
                 listening: Callable[[], bool]) -> None:
        self.run_dir = run_dir
        self._send = send
        self._listening = listening
        self._cond = threading.Condition()
        self._next = 0
        self._answers: dict[int, dict[str, Any]] = {}

    def answered(self, answer: dict[str, Any]) -> None:
        """The trainer's answer (read from the control pipe)."""
        with self._cond:
            if isinstance(answer.get("id"), int):
                self._answers[answer["id"]] = answer
                self._cond.notify_all()

    def stop_waiting(self) -> None:
        """The trainer is gone: a waiting append appends itself now."""
        with self._cond:
            self._cond.notify_all()

    def __call__(self, findings: list[WatchEvent]) -> int:
        if self._listening():
            with self._cond:
                self._next += 1
                ident = self._next
            if self._send({"append": {"id": ident, "events": encode(findings)}}):
                deadline = time.monotonic() + ANSWER_WAIT
                with self._cond:
                    while (ident not in self._answers and self._listening()
                           and time.monotonic() < deadline):
                        self._cond.wait(min(0.1, max(0.0, deadline - time.monotonic())))
                    answer = self._answers.pop(ident, None)
                if answer is not None and "seq" in answer:
                    return int(answer["seq"])
                # no answer (the trainer finished, died, or is stuck) or its append failed:
                # append here, only what did not arrive after all
                findings, last = self._missing(findings)
                if not findings:
                    return last
        return append_events(self.run_dir, list(findings))

    def _missing(self, findings: list[WatchEvent]) -> tuple[list[WatchEvent], int]:
        """Those of ``findings`` not in the spool, and the spool's last seq."""
        reader = SpoolReader(self.run_dir)
        try:
            stored = said_before(reader)
            return [f for f in findings if identity(f) not in stored], reader.last_seq()
        finally:
            reader.close()
