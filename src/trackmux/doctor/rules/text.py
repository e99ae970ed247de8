"""``degenerate_text``: sample tables whose generations turn repetitive or garbled.

Every event kind that carries generated text has one small extractor that yields
``(row_index, column, text)``; the rule reads whatever an extractor gives, so the samples
ledger's event kind is one more function in :data:`EXTRACTORS`. A row is degenerate when
a phrase of 1-4 words repeated back to back covers most of it (``repeats`` times or
more), when it compresses far better than language does (zlib, texts of ``min_chars``
or more), or when a large share of its characters are control, private-use or
replacement characters.
"""

from __future__ import annotations

import operator
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from trackmux.core.events import Event, SamplesEvent, TableEvent
from trackmux.doctor.detector import Detector, KeyMatcher, Param
from trackmux.doctor.findings import Finding
from trackmux.doctor.stats import Latch

Text = tuple[int, str, str]  # row index, column, text


def table_texts(event: Any, columns: Callable[[str], bool], fallback: Callable[[str], bool]
                ) -> Iterator[Text]:
    """The text cells of a table: columns named like generations, else every column of
    strings that is not named like a prompt."""
    assert isinstance(event, TableEvent)
    names = list(event.columns)
    chosen = [i for i, c in enumerate(names) if columns(c)]
    if not chosen:
        chosen = [i for i, c in enumerate(names) if not fallback(c) and any(
            isinstance(row[i], str) for row in event.rows[:8] if i < len(row))]
    for r, row in enumerate(event.rows):
        for i in chosen:
            cell = row[i] if i < len(row) else None
            if isinstance(cell, str):
                yield r, names[i], cell


def samples_texts(event: Any, columns: Callable[[str], bool], fallback: Callable[[str], bool]
                  ) -> Iterator[Text]:
    """The samples ledger's event (core/events.py ``SamplesEvent``): ``columns`` names,
    ``values[j]`` the cells of column j, one per sample; chosen as a table's columns are."""
    assert isinstance(event, SamplesEvent)
    names = list(event.columns)
    chosen = [j for j, c in enumerate(names) if columns(c)] or [
        j for j, c in enumerate(names)
        if not fallback(c) and c not in event.trajectories  # conversations are JSON
        and any(isinstance(v, str) for v in event.values[j][:8])]
    for j in chosen:
        for r, value in enumerate(event.values[j]):
            if isinstance(value, str):
                yield r, names[j], value


#: event kind -> extractor of (row, column, text); add a kind here to check its text
EXTRACTORS: dict[str, Callable[[Any, Callable[[str], bool], Callable[[str], bool]],
                               Iterable[Text]]] = {
    "table": table_texts,
    "samples": samples_texts,
}


_RUNS = re.compile(rb"\x01+")


def tandem_repeat(words: list[str], repeats: int) -> tuple[float, str, int] | None:
    """The longest back-to-back repetition of a phrase of 1-4 words ("the the the",
    "this question this question ..."), as (share of the words, phrase, times).

    A phrase of ``n`` words repeated ``t`` times is a stretch where each word equals the
    one ``n`` before it, ``(t - 1) * n`` long: found with C-level comparisons (one
    ``map(eq)`` per ``n``) and a regular expression over the result, not a Python loop."""
    total = len(words)
    best: tuple[float, str, int] | None = None
    for n in (1, 2, 3, 4):
        if total < n * repeats:
            break
        same = bytes(map(operator.eq, words, words[n:]))
        length = max(map(len, _RUNS.findall(same)), default=0)
        times = (length + n) // n
        if times >= repeats and (best is None or times * n / total > best[0]):
            start = same.find(b"\x01" * length)
            best = (times * n / total, " ".join(words[start:start + n]), times)
    return best


def repeated_phrase(text: str, repeats: int, coverage: float) -> tuple[str, int] | None:
    """A phrase of 1-4 words repeated back to back at least ``repeats`` times and
    covering at least ``coverage`` of the words, if any. (Repetition that is not back to
    back, in a long text, shows as a high compression ratio instead.)"""
    words = text.split()
    if len(words) < repeats:
        return None
    tandem = tandem_repeat(words, repeats)
    if tandem is not None and tandem[0] >= coverage:
        return tandem[1], tandem[2]
    return None


def compression_ratio(text: str) -> float:
    raw = text.encode("utf-8", "replace")
    return len(raw) / max(1, len(zlib.compress(raw, 6)))


# control characters (but tab and line breaks), surrogates, private use, U+FFFD
_GARBLED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ue000-\uf8ff"
                      "\ufffd\U000f0000-\U0010ffff]")


def garbled_share(text: str) -> float:
    return len(_GARBLED.findall(text)) / max(1, len(text))


def why_degenerate(text: str, params: Mapping[str, Any]) -> str | None:
    """Why one generation looks degenerate, in words; None if it does not."""
    phrase = repeated_phrase(text, params["repeats"], params["coverage"])
    if phrase is not None:
        shown = phrase[0] if len(phrase[0]) <= 40 else phrase[0][:40] + "…"
        return f"repeats {shown!r} {phrase[1]} times"
    if len(text) >= params["min_chars"]:
        ratio = compression_ratio(text)
        if ratio >= params["compression"]:
            return f"compresses {ratio:.1f}x"
    if len(text) >= 20:
        share = garbled_share(text)
        if share >= params["garbled"]:
            return f"is {share:.0%} garbled characters"
    return None


class DegenerateText(Detector):
    """A logged table (rollouts, validation generations) in which at least ``share`` of
    the rows (and ``min_rows``) are degenerate; the finding names the rows."""

    rule = "degenerate_text"
    params_spec = {
        "keys": Param(["*"], "patterns", "table keys to read"),
        "columns": Param(["response*", "output*", "completion*", "generation*", "*response*",
                          "text", "answer*"], "patterns", "text columns, by name"),
        "exclude_columns": Param(["prompt*", "input*", "question*", "*prompt*"], "patterns",
                                 "never read when no column matches ``columns``"),
        "repeats": Param(4, "count", "a phrase repeated this often"),
        "coverage": Param(0.5, "fraction", "share of the words the phrase covers"),
        "compression": Param(5.0, "positive", "zlib compression ratio"),
        "min_chars": Param(200, "count", "shortest text whose compression is judged"),
        "garbled": Param(0.2, "fraction", "share of garbled characters"),
        "share": Param(0.25, "fraction", "share of the rows that must be degenerate"),
        "min_rows": Param(2, "count"),
        "persist": Param(1, "count", "tables of one key in a row"),
        "severity": Param("warning", "severity"),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.kinds = frozenset(EXTRACTORS)  # read now: a kind added to EXTRACTORS counts
        self.match = KeyMatcher(self.params["keys"])
        self.columns = KeyMatcher(self.params["columns"])
        self.exclude = KeyMatcher(self.params["exclude_columns"])
        self.latches: dict[str, Latch] = {}

    def update(self, event: Event) -> Sequence[Finding]:
        extract = EXTRACTORS.get(event.kind)
        key = getattr(event, "key", "")
        if extract is None or not self.match(key):
            return ()
        rows: dict[int, str] = {}
        seen: set[int] = set()
        for row, column, text in extract(event, self.columns, self.exclude):
            seen.add(row)
            if row not in rows:
                why = why_degenerate(text, self.params)
                if why is not None:
                    rows[row] = f"{column} {why}" if column not in ("response", "output") \
                        else why
        if not seen:
            return ()
        self.note_read(key)
        bad = len(rows) >= self.params["min_rows"] and \
            len(rows) / len(seen) >= self.params["share"]
        if key not in self.latches and len(self.latches) >= 1024:
            return ()  # (bounded on user data: the run's first 1024 text keys)
        latch = self.latches.setdefault(key, Latch(self.params["persist"]))
        if not latch.check(bad, event.step):
            return ()
        listed = sorted(rows)
        names = ", ".join(str(r) for r in listed[:12]) + (" …" if len(listed) > 12 else "")
        first = listed[0]
        message = (f"generations in {key} at step {event.step} turned degenerate: "
                   f"{len(rows)} of {len(seen)} rows (rows {names}); row {first} "
                   f"{rows[first]}")
        return [self.finding(latch.onset, [key], message, time=event.time)]
