"""Console backend: one readable line per step, as verl's console logger prints it.

``step:10 - reward/mean:0.41 - kl/divergence:0.013``. Lines are rate-limited (at most
one per ``interval`` seconds, default 1.0; the last step is always printed at close) so a
fast loop does not flood the terminal. A table prints its first ``rows`` rows (default
``CONSOLE_ROWS``) as markdown and a count of the rest, and a text its first
``CONSOLE_TEXT_LINES`` lines: a terminal is no place for 100k rows, and the spool keeps
them all (``trackmux show``, the report, every other backend). A histogram is one summary line
``[reward/dist @ step 3] n=512 mean=0.41 std=0.2 min=-0.9 p50=0.4 max=1.0`` (with
``nan=``/``inf=`` counts when any values were not finite). A finding of the doctor is one
line ``[trackmux doctor] WARNING kl_blowup @ step 41: ...``, never rate-limited; so is the
doctor's coverage note (a text event of key ``doctor/coverage``, not a finding: what it
reads of the run, doctor/coverage.py), ``[trackmux doctor] coverage @ step 5: judged: read
reward and kl; read reward <- train/score, ...; not run: ...``. A finding
that grows comes again as an update of the same id (core/events.py ``FindingEvent``); the
console prints an update only when its severity rose above what it printed of that finding
(``... CRITICAL kl_blowup @ step 41 (update 2): ...``), so a terminal is not filled with a
KL's every new worst value, and the last state is in ``trackmux doctor``.

Findings come in onset-step order as far as a terminal allows. The doctor appends what
one read of the spool found in step order (core/delivery/watch.py), and findings that
arrive together here are printed sorted by step. A terminal cannot take a line back, so a
finding judged later (a rule that needs more steps to be sure) may still follow one with a
later onset, printed earlier; holding findings back to wait for it would delay every alert
by a bound nobody can name. Each line names its onset step.

Options: ``interval`` (seconds), ``stream`` ("stdout" or "stderr"), ``rows`` (table rows
shown, >= 0), ``every`` (steps, >= 1, default 1): a summary for long runs: of each key's
step lines, tables, samples, histograms and texts, only the first in each block of
``every`` steps is printed (the last step still is, at close), findings always; at close
one line counts what was not printed. Deterministic, unlike ``interval``: ``trackmux demo``
uses ``every`` so that 200 steps print under 300 lines on any machine.

Not run through the conformance kit: a terminal cannot take back a printed line, so a
redelivered batch is printed again (its own tests are in tests/backends/test_console.py).

Everything printed is logged text made inert first (core/terminal.py): a model's output
in a sample, a table cell or a text cannot drive the terminal with escape sequences,
control characters or bidi overrides.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from trackmux.core.backends.alerts import AlertGate
from trackmux.core.backends.contract import Backend, ResumeState, RunInfo
from trackmux.core.delivery.fallbacks import table_to_markdown
from trackmux.core.events import (
    Event,
    FindingEvent,
    HistogramEvent,
    MetricsEvent,
    ProvenanceEvent,
    SamplesEvent,
    TableEvent,
    TextEvent,
)
from trackmux.core.terminal import for_terminal
from trackmux.core.values.histogram import quantile
from trackmux.hookspecs import RegisterBackend, hookimpl

#: the key of the doctor's coverage note: doctor/coverage.py ``NOTE_KEY`` (a test holds them equal)
COVERAGE_NOTE = "doctor/coverage"


def format_value(value: float | int) -> str:
    """As verl's console logger prints numbers (``pprint.pformat``): the shortest repr."""
    return repr(value)


def format_histogram(event: HistogramEvent) -> str:
    """One line that says what a distribution looked like, non-finite counts included."""
    parts = [f"n={event.count}"]
    if event.count:
        median = quantile(event.counts, event.edges, 0.5)
        parts += [f"mean={event.mean:.4g}", f"std={event.std:.4g}", f"min={event.min:.4g}",
                  f"p50={median:.4g}", f"max={event.max:.4g}"]
    parts += [f"{name}={n}" for name, n in event.nonfinite.items() if n]
    return f"[{event.key} @ step {event.step}] " + " ".join(parts)


#: table rows the console prints by default (the option ``rows`` changes it)
CONSOLE_ROWS = 5
#: characters of one table cell the console prints
CONSOLE_CELL = 200
#: lines and characters of a text event the console prints
CONSOLE_TEXT_LINES = 20
CONSOLE_TEXT_CHARS = 4000


def format_table(event: TableEvent, rows: int = CONSOLE_ROWS) -> str:
    """A header line, the first ``rows`` rows as markdown, and how many are not shown."""
    shown = min(rows, len(event.rows), event.max_rows or len(event.rows))
    head = (f"[{event.key} @ step {event.step}] table: {len(event.rows)} rows x "
            f"{len(event.columns)} columns")
    cut = tuple(tuple(c[:CONSOLE_CELL] + "…" if isinstance(c, str) and len(c) > CONSOLE_CELL
                      else c for c in row) for row in event.rows[:shown])
    body = table_to_markdown(dataclasses.replace(event, rows=cut))
    rest = len(event.rows) - shown
    tail = (f"\n... {rest} more rows not printed (all are in the spool: trackmux show, "
            "trackmux report)" if rest else "")
    return f"{head}\n{body}{tail}"


def format_text(event: TextEvent) -> str:
    """The text's first lines (and characters), and how much is not shown."""
    text = event.text
    lines = text.splitlines()
    cut = "\n".join(lines[:CONSOLE_TEXT_LINES])
    if len(cut) > CONSOLE_TEXT_CHARS:
        cut = cut[:CONSOLE_TEXT_CHARS]
    more = ""
    if len(cut) < len(text.rstrip("\n")):
        more = (f"\n... {max(0, len(lines) - CONSOLE_TEXT_LINES)} more lines, {len(text)} "
                "characters in all (the spool keeps it whole)")
    return f"[{event.key} @ step {event.step}]\n{cut}{more}"


def format_step(step: int, data: dict[str, Any]) -> str:
    return " - ".join([f"step:{step}", *(f"{k}:{format_value(v)}" for k, v in data.items())])


SAMPLE_TEXT = 80


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _message_text(message: dict[str, Any]) -> str:
    """A message's words: its text (or text parts), else the tools it calls."""
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(str(p.get("text", "")) for p in content
                           if isinstance(p, dict) and p.get("type") == "text")
    text = " ".join(str(content or "").split())
    if not text and message.get("tool_calls"):
        from trackmux.core.values.trajectory import summary

        text = "calls " + ", ".join(summary([message]).tools)
    return text


def conversation_line(cell: Any) -> str:
    """A conversation as its first user turn and its last assistant turn (its counts are
    the line's ``turns=`` fields). Every conversation of a run starts with the same system
    prompt, so its opening words tell the samples apart no better than nothing."""
    from trackmux.core.values.trajectory import decode

    messages = [m for m in decode(cell) or () if isinstance(m, dict)]
    user = next((m for m in messages if m.get("role") == "user"), None)
    last = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    parts = []
    if user is not None:
        parts.append(f"user {_clip(_message_text(user), SAMPLE_TEXT // 2)!r}")
    if last is not None:
        parts.append(f"assistant {_clip(_message_text(last), SAMPLE_TEXT)!r}")
    if not parts:  # no user or assistant turn (or unreadable): the stored text
        return repr(_clip(str(cell or ""), SAMPLE_TEXT))
    return " -> ".join(parts)


def _findings_in_step_order(events: Sequence[Event]) -> Sequence[Event]:
    """Each run of adjacent findings sorted by onset step (stable), the rest in place."""
    out = list(events)
    start = 0
    while start < len(out):
        if not isinstance(out[start], FindingEvent):
            start += 1
            continue
        end = start
        while end < len(out) and isinstance(out[end], FindingEvent):
            end += 1
        out[start:end] = sorted(out[start:end], key=lambda e: e.step)
        start = end
    return out


class ConsoleBackend(Backend):
    name = "console"
    capabilities = frozenset({"metrics", "text", "histogram", "table", "provenance",
                              "finding", "samples"})
    max_sample_rows = 4  # samples shown per log_samples batch (docs/samples.md)

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        unknown = sorted(set(self.options) - {"interval", "stream", "rows", "every"})
        if unknown:
            raise ValueError(f"unknown console option(s) {unknown}; known: interval, stream, "
                             "rows, every")
        every = self.options.get("every", 1)
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"console option every must be an int >= 1 (steps), got {every!r}")
        self.every = every
        #: (kind, key) -> the block of ``every`` steps last printed; and what was held back
        self._blocks: dict[tuple[str, str], int] = {}
        self._held: dict[str, int] = {}
        rows = self.options.get("rows", CONSOLE_ROWS)
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
            raise ValueError(f"console option rows must be an int >= 0, got {rows!r}")
        self.rows = rows
        interval = self.options.get("interval", 1.0)
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval < 0:
            raise ValueError(f"console option interval must be seconds >= 0, got {interval!r}")
        self.interval = float(interval)
        stream = self.options.get("stream", "stdout")
        if stream not in ("stdout", "stderr"):
            raise ValueError(f"console option stream must be 'stdout' or 'stderr', got {stream!r}")
        self._stream_name = stream
        self._last_print = -math.inf
        self._pending: tuple[int, dict[str, Any]] | None = None
        self._skipped = 0
        #: a finding's update is printed only when its severity rose
        self._alerts = AlertGate()

    @property
    def stream(self) -> TextIO:
        return sys.stdout if self._stream_name == "stdout" else sys.stderr

    def _print(self, text: str) -> None:
        """Every line this backend prints: logged text, made inert for the terminal."""
        print(for_terminal(text), file=self.stream)

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        self._run = run

    def write(self, events: Sequence[Event]) -> None:
        events = _findings_in_step_order(events)
        for event in events:
            if isinstance(event, MetricsEvent):
                if self._pending is not None and self._pending[0] == event.step:
                    self._pending[1].update(event.data)
                    continue
                self._emit_pending(force=False)
                self._pending = (event.step, dict(event.data))
            elif isinstance(event, TextEvent) and event.key == COVERAGE_NOTE:
                self._emit_pending(force=True)  # the doctor's own line, never rate-limited
                self._print(f"[trackmux doctor] coverage @ step {event.step}: {event.text}")
            elif isinstance(event, TextEvent):
                if self._due("text", event.key, event.step):
                    self._emit_pending(force=True)
                    self._print(format_text(event))
            elif isinstance(event, TableEvent):
                if self._due("table", event.key, event.step):
                    self._emit_pending(force=True)
                    self._print(format_table(event, self.rows))
            elif isinstance(event, HistogramEvent):
                if self._due("histogram", event.key, event.step):
                    self._emit_pending(force=True)
                    self._print(format_histogram(event))
            elif isinstance(event, ProvenanceEvent):  # one line; `trackmux show` has the rest
                from trackmux.provenance.text import summary_line

                self._print(f"[provenance] {summary_line(event.data)}")
            elif isinstance(event, FindingEvent):  # the doctor: one line, never rate-limited
                if self._alerts.due(event):
                    self._emit_pending(force=True)
                    self._print(event.line())
            elif isinstance(event, SamplesEvent) and self._due("samples", event.key,
                                                                event.step):
                self._emit_pending(force=True)
                self._print(self._format_samples(event))
        self._emit_pending(force=False, keep_latest=True)

    def _format_samples(self, event: SamplesEvent) -> str:
        """A count line, then one short line per chosen sample (cap ``sample_rows``)."""
        from trackmux.samples.projection import chosen, records

        rows = chosen(event, self)
        lines = [f"[{event.key} @ step {event.step}] {event.count} samples, showing "
                 f"{len(rows)} ({self.sample_policy})"]
        hide = {"step", "sample", "prompt", "response", *event.trajectories}
        raw = (event.values[event.columns.index(event.trajectories[0])]
               if event.trajectories else None)
        for row, record in zip(rows, records(event, rows), strict=True):
            if "response" in record or raw is None:
                text = repr(_clip(str(record.get("response", "")), SAMPLE_TEXT))
            else:  # the stored conversation, not its transcript (records gives that)
                text = conversation_line(raw[row])
            fields = [f"{name}={_short(record[name])}" for name in record
                      if name not in hide][:6]
            lines.append(f"  #{record['sample']} " + " ".join(fields)
                         + f" | {text}".replace("\n", " "))
        return "\n".join(lines)

    def _due(self, kind: str, key: str, step: int) -> bool:
        """Whether an event of ``kind`` and ``key`` at ``step`` is printed (``every``): the
        first of its block of steps. A rewind back into a printed block prints again."""
        if self.every == 1:
            return True
        block = step // self.every
        last = self._blocks.get((kind, key))
        if last is not None and block == last:
            self._held[kind] = self._held.get(kind, 0) + 1
            return False
        self._blocks[(kind, key)] = block
        return True

    def _emit_pending(self, force: bool, keep_latest: bool = False,
                      closing: bool = False) -> None:
        if self._pending is None:
            return
        now = time.monotonic()
        step, data = self._pending
        new_block = self.every == 1 or self._blocks.get(("metrics", "")) != step // self.every
        if closing or (new_block and (force or now - self._last_print >= self.interval)):
            shown = self._skipped and self.every == 1
            suffix = f"  ({self._skipped} earlier steps not shown)" if shown else ""
            self._print(format_step(step, data) + suffix)
            self._blocks[("metrics", "")] = step // self.every
            self._last_print = now
            self._pending = None
            self._skipped = 0
        elif not keep_latest and not (force and not new_block):
            # (forced by another event in a printed block: kept, in case it is the last step)
            self._skipped += 1
            if self.every > 1:
                self._held["step lines"] = self._held.get("step lines", 0) + 1
            self._pending = None

    def flush(self) -> None:
        self.stream.flush()

    def close(self, status: str) -> None:
        self._emit_pending(force=True, closing=True)
        if self._held:
            counts = ", ".join(f"{n} {kind}" for kind, n in self._held.items())
            self._print(f"[console] one of each key every {self.every} steps shown; not "
                        f"printed: {counts} (all in the spool: trackmux show, trackmux "
                        "samples, trackmux report)")
        self.stream.flush()


@hookimpl
def trackmux_register_backends(register: RegisterBackend) -> None:
    register("console", ConsoleBackend, description="one line per step on the terminal",
             in_trainer=True)  # its output is the trainer's own terminal
