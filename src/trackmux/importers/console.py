"""Console logs: verl's ``step:N - key:value - ...`` lines and transformers/TRL dict lines.

A training job's captured output mixes the metric lines with everything else: ANSI
colours, Ray's ``(TaskRunner pid=123, ip=...)`` prefixes, tqdm bars redrawn with carriage
returns, logger prefixes. Each line is split at carriage returns, cleaned of colours and
Ray prefixes, and read when it holds one of:

- verl: ``step:12 - actor/entropy:0.53 - critic/score/mean:np.float64(0.8) - ...``
  (the step is verl's global step);
- transformers/TRL: ``{'loss': 0.52, 'grad_norm': 1.3, 'learning_rate': 5e-06,
  'epoch': 0.1}``; the step is the dict's ``step``/``global_step`` when it has one, else
  the line's number among such lines (transformers prints ``logging_steps`` apart).

Values: numbers, ``np.float64(x)``, ``tensor(x)``, ``nan``, ``inf``; other values (text)
are left out. A metric line cut in half keeps its complete pairs and is named as damage.
Times: a live (followed) log stamps each line when it is read; a finished log has no
times of its own, so its lines get the file's modification time.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trackmux.core.events import MetricsEvent
from trackmux.importers.base import Chunk, Damage, SourceError, SourceRun, number
from trackmux.importers.lines import LineFile

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][A-Za-z0-9]")
RAY_PREFIX = re.compile(r"^\s*\([A-Za-z_][\w.]*(?:\s+pid=\d+)?(?:,\s*ip=[^)]*)?\)\s*")
VERL_LINE = re.compile(r"(?:^|[\s|:\]])step:(\d+)\s+-\s+(.*)$")
DICT_START = re.compile(r"^\s*(?:[\w.\-\[\]: ]*?\s)?\{\s*'")
DICT_PAIR = re.compile(r"'([^']*)'\s*:\s*((?:[^,{}()']|\([^()]*\)|'[^']*')+?)\s*(?=,|\}|$)")


def clean(segment: str) -> str:
    """A piece of a console line without colours and Ray's prefix."""
    return RAY_PREFIX.sub("", ANSI.sub("", segment), count=1).rstrip()


def parse_verl(text: str) -> tuple[int, dict[str, float | int], int] | None:
    """(step, values, unreadable parts) of a verl metrics line, or None."""
    match = VERL_LINE.search(text)
    if match is None:
        return None
    values: dict[str, float | int] = {}
    bad = 0
    for part in match.group(2).split(" - "):
        key, colon, raw = part.strip().rpartition(":")
        value = number(raw) if colon else None
        if not key or value is None:
            bad += 1
            continue
        values[key] = value
    return int(match.group(1)), values, bad


def parse_dict(text: str) -> tuple[dict[str, float | int], bool] | None:
    """(numeric values, complete) of a transformers-style dict line, or None."""
    if DICT_START.match(text) is None:
        return None
    body = text[text.index("{"):]
    closed = body.rstrip().endswith("}")
    values: dict[str, float | int] = {}
    pairs = list(DICT_PAIR.finditer(body))
    if not closed and pairs:
        pairs = pairs[:-1]  # the last pair of a cut line may itself be cut
    for match in pairs:
        value = number(match.group(2))
        if value is not None:
            values[match.group(1)] = value
    if not values and closed:
        return None
    return values, closed


class ConsoleLog(LineFile):
    format = "console"

    def take_line(self, raw: bytes, complete: bool, cursor: dict[str, Any], chunk: Chunk,
                  offset: int, mtime: float, live: bool) -> bool:
        when = time.time() if live else mtime
        text = raw.decode("utf-8", errors="replace")
        if complete:
            self._line(text, when, cursor, chunk, offset, complete)
            return True
        # a last line with no newline: taken only if it reads whole
        trial, counted = Chunk(), dict(cursor)
        if not self._line(text, when, counted, trial, offset, complete):
            chunk.damage.append(Damage(str(self.path), offset, 1,
                                       "truncated line at the end (no newline yet)",
                                       lasting=False))
            return False
        chunk.events += trial.events
        cursor.update(counted)
        return True

    def _line(self, text: str, when: float, cursor: dict[str, Any], chunk: Chunk,
              offset: int, complete: bool) -> bool:
        """Read one line into ``chunk``; False when it is a metric line cut short."""
        whole = True
        for segment in text.split("\r"):
            segment = clean(segment)
            if "step:" in segment:
                verl = parse_verl(segment)
                if verl is not None:
                    step, values, bad = verl
                    if values:
                        chunk.events.append(MetricsEvent(values, step, when))
                    if bad:
                        whole = False
                        if complete:
                            chunk.damage.append(Damage(str(self.path), offset, bad,
                                                       "unreadable key:value parts in a verl "
                                                       "line (cut or garbled)"))
                    continue
            if "{" in segment:
                found = parse_dict(segment)
                if found is None:
                    continue
                values, closed = found
                cursor["ordinal"] = int(cursor.get("ordinal", 0)) + 1
                step = values.get("step", values.get("global_step", cursor["ordinal"]))
                if values:
                    chunk.events.append(MetricsEvent(values, int(step), when))
                if not closed:
                    whole = False
                    if complete:
                        chunk.damage.append(Damage(str(self.path), offset, 1,
                                                   "a dict line cut before its closing brace"))
        return whole


def find(source: str, options: Mapping[str, Any]) -> list[SourceRun]:
    path = Path(source).expanduser()
    if not path.is_file():
        raise SourceError(f"{source}: not a file (a console log is one file)")
    return [ConsoleLog(path)]
