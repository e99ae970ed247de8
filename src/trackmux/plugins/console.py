"""Console backend: one readable line per step, as verl's console logger prints it.

``step:10 - reward/mean:0.41 - kl/divergence:0.013``. Lines are rate-limited (at most
one per ``interval`` seconds, default 1.0; the last step is always printed at close) so a
fast loop does not flood the terminal. A table prints its first ``rows`` rows (default
``CONSOLE_ROWS``) as markdown and a count of the rest, and a text its first
``CONSOLE_TEXT_LINES`` lines: a terminal is no place for 100k rows, and the spool keeps
them all (``trackmux show``, the report, every other backend). A histogram is one summary line
``[reward/dist @ step 3] n=512 mean=0.41 std=0.2 min=-0.9 p50=0.4 max=1.0`` (with
``nan=``/``inf=`` counts when any values were not finite). A finding of the doctor is one
line ``[trackmux doctor] WARNING kl_blowup @ step 41: ...``.

Options: ``interval`` (seconds), ``stream`` ("stdout" or "stderr"), ``rows`` (table rows
shown, >= 0).

Not run through the conformance kit: a terminal cannot take back a printed line, so a
redelivered batch is printed again (its own tests are in tests/backends/test_console.py).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

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
from trackmux.core.values.histogram import quantile
from trackmux.hookspecs import RegisterBackend, hookimpl


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


class ConsoleBackend(Backend):
    name = "console"
    capabilities = frozenset({"metrics", "text", "histogram", "table", "provenance",
                              "finding", "samples"})
    max_sample_rows = 4  # samples shown per log_samples batch (docs/samples.md)

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        unknown = sorted(set(self.options) - {"interval", "stream", "rows"})
        if unknown:
            raise ValueError(f"unknown console option(s) {unknown}; known: interval, stream, "
                             "rows")
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

    @property
    def stream(self) -> TextIO:
        return sys.stdout if self._stream_name == "stdout" else sys.stderr

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        self._run = run

    def write(self, events: Sequence[Event]) -> None:
        for event in events:
            if isinstance(event, MetricsEvent):
                if self._pending is not None and self._pending[0] == event.step:
                    self._pending[1].update(event.data)
                    continue
                self._emit_pending(force=False)
                self._pending = (event.step, dict(event.data))
            elif isinstance(event, TextEvent):
                self._emit_pending(force=True)
                print(format_text(event), file=self.stream)
            elif isinstance(event, TableEvent):
                self._emit_pending(force=True)
                print(format_table(event, self.rows), file=self.stream)
            elif isinstance(event, HistogramEvent):
                self._emit_pending(force=True)
                print(format_histogram(event), file=self.stream)
            elif isinstance(event, ProvenanceEvent):  # one line; `trackmux show` has the rest
                from trackmux.provenance.text import summary_line

                print(f"[provenance] {summary_line(event.data)}", file=self.stream)
            elif isinstance(event, FindingEvent):  # the doctor: one line, never rate-limited
                self._emit_pending(force=True)
                print(event.line(), file=self.stream)
            elif isinstance(event, SamplesEvent):
                self._emit_pending(force=True)
                print(self._format_samples(event), file=self.stream)
        self._emit_pending(force=False, keep_latest=True)

    def _format_samples(self, event: SamplesEvent) -> str:
        """A count line, then one short line per chosen sample (cap ``sample_rows``)."""
        from trackmux.samples.projection import chosen, records

        rows = chosen(event, self)
        lines = [f"[{event.key} @ step {event.step}] {event.count} samples, showing "
                 f"{len(rows)} ({self.sample_policy})"]
        hide = {"step", "sample", "prompt", "response", *event.trajectories}
        for record in records(event, rows):
            text = str(record.get("response", "") if "response" in record or not
                       event.trajectories else record[event.trajectories[0]] or "")
            text = text if len(text) <= SAMPLE_TEXT else text[:SAMPLE_TEXT - 1] + "…"
            fields = [f"{name}={_short(record[name])}" for name in record
                      if name not in hide][:6]
            lines.append(f"  #{record['sample']} " + " ".join(fields)
                         + f" | {text!r}".replace("\n", " "))
        return "\n".join(lines)

    def _emit_pending(self, force: bool, keep_latest: bool = False) -> None:
        if self._pending is None:
            return
        now = time.monotonic()
        if force or now - self._last_print >= self.interval:
            step, data = self._pending
            suffix = f"  ({self._skipped} earlier steps not shown)" if self._skipped else ""
            print(format_step(step, data) + suffix, file=self.stream)
            self._last_print = now
            self._pending = None
            self._skipped = 0
        elif not keep_latest:
            self._skipped += 1
            self._pending = None

    def flush(self) -> None:
        self.stream.flush()

    def close(self, status: str) -> None:
        self._emit_pending(force=True)
        self.stream.flush()


@hookimpl
def trackmux_register_backends(register: RegisterBackend) -> None:
    register("console", ConsoleBackend, description="one line per step on the terminal",
             in_trainer=True)  # its output is the trainer's own terminal
