"""What happens to bad input at the door: dropped, named once, counted; or raised (strict).

A tracker must never kill training: by default a value that cannot be kept (a ``None``
metric, a ``str``, a nested list, an object whose ``float()`` raises, a key that cannot be
a key, a bad table row, an image that cannot be encoded) is dropped, the rest of the call
arrives, the first drop of each (kind, name) is logged once on the ``trackmux`` logger,
and every drop is counted. The counts are the run's input problems (``FinishSummary``,
``trackmux show``, the report read them from the spool's meta ``input_dropped``).

``strict=True`` (``init(strict=True)``, ``TRACKMUX_STRICT=1``) raises the same
``TypeError`` / ``ValueError`` instead, for development and tests. Lifecycle misuse (a call
after ``finish()``) is not bad input and raises either way.

One :class:`Intake` per run (and per ``DisabledRun`` and attached handle): the normalize
functions take its :meth:`Intake.drop` as their ``on_bad`` callback, so the rules of what
is bad live in ``normalize`` once and the policy lives here once.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trackmux.core.events import Cell, Scalar
from trackmux.core.values import normalize

log = logging.getLogger("trackmux")

#: Distinct (kind, name) entries kept with their own count; later new names are counted
#: under one "other" entry, so keys that differ every call cannot grow memory.
MAX_NAMED = 1000
_WHOLE = "the call is dropped"
#: what a conversion of user data may raise: an ``int()``/``float()`` of inf or of a
#: 400-digit int raises OverflowError, which is bad input like the others
BAD_INPUT = (TypeError, ValueError, OverflowError)
_REPAIRED = "kept with '?' for the characters UTF-8 cannot encode"


@dataclass
class Dropped:
    """One kind of bad input: what (``metric``, ``table``, ``image`` ...), its name (a key
    as ``repr`` shows it; another object with its type: ``None (NoneType)``), the first
    reason, and how many times it was dropped."""

    what: str
    name: str
    reason: str
    count: int = 1

    def as_dict(self) -> dict[str, Any]:
        return {"what": self.what, "name": self.name, "reason": self.reason,
                "count": self.count}


class Intake:
    """The bad-input policy of one run: :meth:`drop` raises in strict mode, else counts."""

    def __init__(self, strict: bool = False, where: str = "") -> None:
        self.strict = strict
        self._where = where  # "" for a run; "rank 3", "attached worker" for the others
        self._drops: dict[tuple[str, str], Dropped] = {}
        # other processes' drops (attached workers), each source's latest full list
        self._remote: dict[str, list[Dropped]] = {}
        self._lock = threading.Lock()
        self._version = 0
        self._reported_version = 0
        self._metric = self.on_bad("metric")

    @property
    def where(self) -> str:
        """Whose input this is: "" for a run, "attached worker rollout" and the like."""
        return self._where

    def drop(self, what: str, name: object, exc: Exception,
             outcome: str = "the rest of the call is kept") -> None:
        """Bad input: raise ``exc`` in strict mode; else count it, logging the first of each
        (what, name) with ``outcome`` (what became of the call). ``name`` is the key (any
        object: it is shown with ``repr``)."""
        if isinstance(exc, OverflowError):  # named like the others, never a bare overflow
            exc = ValueError(f"{what} {_label(name) if type(name) is not str else name!r}: "
                             f"{exc}")
        if self.strict:
            raise exc
        label = repr(name)[:200] if type(name) is str else _label(name)
        reason = str(exc)
        with self._lock:
            self._version += 1
            known = self._drops.get((what, label))
            if known is not None:
                known.count += 1
                return
            if len(self._drops) >= MAX_NAMED:
                other = self._drops.get((what, "(other names)"))
                if other is not None:
                    other.count += 1
                    return
                label = "(other names)"
            self._drops[(what, label)] = Dropped(what, label, reason)
        log.warning("trackmux: %sbad %s %s: %s; %s (said once per %s, counted in the run's "
                    "problems; init(strict=True) or TRACKMUX_STRICT=1 raises instead)",
                    f"{self._where}: " if self._where else "", what, label, reason, outcome,
                    what)

    def on_bad(self, what: str) -> Callable[[object, Exception], None]:
        """``drop`` bound to ``what``, as the ``on_bad`` callback of the normalize functions."""
        return lambda name, exc: self.drop(what, name, exc)

    # -- the door of each call: checked values, or None when the whole call is dropped --
    def metrics(self, data: object) -> dict[str, Scalar]:
        """``log()``'s payload; bad entries dropped (kind ``metric``), the whole call if it
        is not a mapping at all (kind ``log() data``, named by its type)."""
        if type(data) is dict or isinstance(data, Mapping):
            return normalize.normalize_metrics(data, self._metric)
        try:
            return normalize.normalize_metrics(data)
        except TypeError as exc:
            self.drop("log() data", type(data).__name__, exc, _WHOLE)
            return {}

    def step(self, step: object, what: str = "step") -> int | None:
        """An explicit step, or None: a bad step drops the call (its data has no place)."""
        try:
            return normalize.normalize_step(step)
        except BAD_INPUT as exc:
            self.drop(what, step, exc, _WHOLE)
            return None

    def key(self, key: object, what: str) -> str | None:
        """The key of a table, image, text or histogram; None drops the call."""
        try:
            return normalize.check_key(key)
        except BAD_INPUT as exc:
            self.drop(what, key, exc, _WHOLE)
            return None

    def table(self, key: str, columns: object, rows: object
              ) -> tuple[tuple[str, ...], tuple[tuple[Cell, ...], ...]] | None:
        """Columns and rows; a bad row is dropped (kind ``table row``, counted per row)
        and the others kept; bad columns drop the table."""
        try:
            return normalize.normalize_table(columns, rows,
                                             lambda where, exc: self._bad_row(key, where, exc))
        except BAD_INPUT as exc:
            self.drop("table", key, exc, _WHOLE)
            return None

    def _bad_row(self, key: str, where: object, exc: Exception) -> None:
        if str(where).count("[") == 2:  # rows[i][j]: a cell, kept repaired
            self.drop("table cell", key, exc, _REPAIRED)
        else:
            self.drop("table row", key, exc, "the other rows are kept")

    def text(self, key: str, text: object, argument: str = "text") -> str | None:
        """Free text; text UTF-8 cannot encode is kept repaired (and named), not-text drops
        the call."""
        try:
            return normalize.check_text(text, argument,
                                        lambda _, exc: self.drop(argument, key, exc, _REPAIRED))
        except BAD_INPUT as exc:
            self.drop(argument, key, exc,
                      "the image is kept without it" if argument == "caption" else _WHOLE)
            return None

    def image(self, key: str, image: object) -> Any:
        """The image encoded as PNG (``media.EncodedImage``), or None (kind ``image``)."""
        from trackmux.core.values.media import encode_image

        try:
            return encode_image(image)
        except BAD_INPUT as exc:
            self.drop("image", key, exc, _WHOLE)
            return None

    def image_later(self, key: str, image: object) -> Any:
        """The image checked and copied, its PNG not made yet (``media.PreparedImage``),
        or None (kind ``image``)."""
        from trackmux.core.values.media import prepare_image

        try:
            return prepare_image(image)
        except BAD_INPUT as exc:
            self.drop("image", key, exc, _WHOLE)
            return None

    def histogram(self, key: str, values: object, bins: object) -> Any:
        """The values binned (``histogram.Binned``), or None (kind ``histogram``)."""
        from trackmux.core.values.histogram import histogram

        try:
            return histogram(values, bins)
        except BAD_INPUT as exc:
            self.drop("histogram", key, exc, _WHOLE)
            return None

    def config(self, config: object) -> Any:
        """A config as JSON-compatible data, or None (kind ``config``)."""
        try:
            if not isinstance(config, Mapping):
                raise TypeError(f"config must be a mapping, got {type(config).__name__}")
            return normalize.to_json_value(config)
        except BAD_INPUT as exc:
            self.drop("config", "config", exc, _WHOLE)
            return None

    def artifact(self, path: object, name: str | None, type_: str, run_dir: Any,
                 copy_max_bytes: int | None) -> Any:
        """``artifacts.collect``'s result, or None (kind ``artifact``, named by ``name`` or
        the path): a missing, empty or unreadable path, a bad name, type or limit."""
        from trackmux.core.values import artifacts

        try:
            limit = artifacts.copy_limit(copy_max_bytes)
            return artifacts.collect(path, name, type_, run_dir, limit)
        except (*BAD_INPUT, OSError) as exc:
            self.drop("artifact", name if name is not None else _path_label(path), exc,
                      _WHOLE)
            return None

    def absorb(self, source: str, drops: object) -> None:
        """Another process's drops (an attached worker's whole list, as ``as_dict`` gives
        it), replacing what ``source`` sent before; they count in this run's problems.
        Malformed entries are skipped: they come over the wire."""
        got: list[Dropped] = []
        for item in drops if isinstance(drops, list) else []:
            try:
                got.append(Dropped(str(item["what"]), str(item["name"]),
                                   str(item["reason"]), int(item["count"])))
            except (KeyError, TypeError, ValueError):
                continue
        with self._lock:
            if len(self._remote) >= MAX_NAMED and source not in self._remote:
                return
            self._remote[source] = got[:MAX_NAMED]
            self._version += 1

    def version(self) -> int:
        """Grows with every drop (a sender compares it to what it last sent)."""
        with self._lock:
            return self._version

    def dropped(self) -> list[Dropped]:
        """Every kind of bad input seen so far, with counts (a copy); the drops of other
        processes (``absorb``) are summed by kind and name across them."""
        with self._lock:
            return self._all()

    @property
    def total(self) -> int:
        with self._lock:
            return sum(d.count for d in self._all())

    def _all(self) -> list[Dropped]:
        out = [Dropped(d.what, d.name, d.reason, d.count) for d in self._drops.values()]
        merged: dict[tuple[str, str], Dropped] = {}
        for drops in self._remote.values():
            for d in drops:
                known = merged.get((d.what, d.name))
                if known is None:
                    merged[(d.what, d.name)] = Dropped(d.what, d.name, d.reason, d.count)
                else:
                    known.count += d.count
        return out + list(merged.values())

    def changed(self) -> list[dict[str, Any]] | None:
        """The drops as plain data if any changed since the last call, else None (the spool
        writer asks at each commit, so the counts reach the spool's meta)."""
        with self._lock:
            if self._version == self._reported_version:
                return None
            self._reported_version = self._version
            return [d.as_dict() for d in self._all()]


def _path_label(path: object) -> object:
    return str(path) if isinstance(path, (str, os.PathLike)) else path


def _label(name: object) -> str:
    try:
        text = repr(name)[:80]
    except Exception:  # a key whose repr raises is still named
        text = "?"
    return f"{text} ({type(name).__name__})"


def input_dropped(meta: Mapping[str, Any]) -> list[str]:
    """A run's bad input as recorded in its spool (meta ``input_dropped``), one line per
    kind and name, for ``trackmux show`` and the report."""
    entries = meta.get("input_dropped")
    if not isinstance(entries, list):
        return []
    return [f"{d.get('what')} {d.get('name')}: {d.get('count')}x ({d.get('reason')})"
            for d in entries if isinstance(d, dict)]
