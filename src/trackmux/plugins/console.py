"""Console backend: one readable line per step, as verl's console logger prints it.

``step:10 - reward/mean:0.41 - kl/divergence:0.013``. Lines are rate-limited (at most
one per ``interval`` seconds, default 1.0; the last step is always printed at close) so a
fast loop does not flood the terminal; tables arrive as markdown text through core's
fallback and are printed as such. A histogram is one summary line
``[reward/dist @ step 3] n=512 mean=0.41 std=0.2 min=-0.9 p50=0.4 max=1.0`` (with
``nan=``/``inf=`` counts when any values were not finite).

Options: ``interval`` (seconds), ``stream`` ("stdout" or "stderr").

Not run through the conformance kit: a terminal cannot take back a printed line, so a
redelivered batch is printed again (its own tests are in tests/backends/test_console.py).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from trackmux.core.backends.contract import Backend, ResumeState, RunInfo
from trackmux.core.events import Event, HistogramEvent, MetricsEvent, SamplesEvent, TextEvent
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


def format_step(step: int, data: dict[str, Any]) -> str:
    return " - ".join([f"step:{step}", *(f"{k}:{format_value(v)}" for k, v in data.items())])


SAMPLE_TEXT = 80


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class ConsoleBackend(Backend):
    name = "console"
    capabilities = frozenset({"metrics", "text", "histogram", "samples"})
    max_sample_rows = 4  # samples shown per log_samples batch (docs/samples.md)

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        unknown = sorted(set(self.options) - {"interval", "stream"})
        if unknown:
            raise ValueError(f"unknown console option(s) {unknown}; known: interval, stream")
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
                print(f"[{event.key} @ step {event.step}]\n{event.text}", file=self.stream)
            elif isinstance(event, HistogramEvent):
                self._emit_pending(force=True)
                print(format_histogram(event), file=self.stream)
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
        for record in records(event, rows):
            text = str(record.get("response", ""))
            text = text if len(text) <= SAMPLE_TEXT else text[:SAMPLE_TEXT - 1] + "…"
            fields = [f"{name}={_short(record[name])}" for name in record
                      if name not in ("step", "sample", "prompt", "response")][:6]
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
