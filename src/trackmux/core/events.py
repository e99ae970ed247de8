"""Typed, immutable events: the one data model between the trainer and every backend.

Events are plain data (str, int, float, bytes, lists, dicts) so they can be written to
the spool, sent across processes (a future Ray sink actor) and replayed later exactly
as they were logged. Each carries the step and wall time of the original call; the
spool gives it a sequence number (``seq``) when it is committed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Union

EventKind = Literal["metrics", "config", "table", "image", "text", "histogram", "artifact",
                    "provenance", "finding", "samples"]
#: Every kind of event; backends declare which of these they show natively.
EVENT_KINDS: frozenset[str] = frozenset({"metrics", "config", "table", "image", "text",
                                         "histogram", "artifact", "provenance",
                                         "finding", "samples"})

Scalar = Union[int, float]  # noqa: UP007 - runtime alias, kept readable on 3.10
Cell = Union[str, int, float, bool, None]  # noqa: UP007


@dataclass(frozen=True, slots=True)
class MetricsEvent:
    """Scalar values logged together at one step (one ``Run.log`` call)."""

    data: dict[str, Scalar]
    step: int
    time: float
    seq: int = 0
    kind: Literal["metrics"] = field(default="metrics", init=False)


@dataclass(frozen=True, slots=True)
class ConfigEvent:
    """The run's hyperparameters: nested JSON-compatible data, secrets already redacted.

    In the spool each event holds the keys of one ``log_config`` call; a backend receives
    the config merged so far (nested, :mod:`trackmux.core.configmerge`)."""

    config: dict[str, Any]
    step: int
    time: float
    seq: int = 0
    kind: Literal["config"] = field(default="config", init=False)


@dataclass(frozen=True, slots=True)
class TableEvent:
    """Rows of samples (e.g. prompt, response, reward) logged under ``key`` at ``step``.

    ``max_rows`` caps what each backend shows of this table (the spool keeps every row)."""

    key: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    step: int
    time: float
    seq: int = 0
    max_rows: int | None = None
    kind: Literal["table"] = field(default="table", init=False)


@dataclass(frozen=True, slots=True)
class ImageEvent:
    """One image, already encoded as PNG; size in pixels, ``mode`` as PIL names it."""

    key: str
    png: bytes
    width: int
    height: int
    mode: str
    step: int
    time: float
    caption: str | None = None
    seq: int = 0
    kind: Literal["image"] = field(default="image", init=False)


@dataclass(frozen=True, slots=True)
class TextEvent:
    """Free text (markdown) logged under ``key`` at ``step``."""

    key: str
    text: str
    step: int
    time: float
    seq: int = 0
    kind: Literal["text"] = field(default="text", init=False)


@dataclass(frozen=True, slots=True)
class HistogramEvent:
    """A distribution binned at the door: ``counts[i]`` finite values fell in
    ``[edges[i], edges[i + 1])``; ``count``/``min``/``max``/``mean``/``std`` describe the
    finite values (None when there were none); NaN, +inf and -inf are counted apart."""

    key: str
    counts: tuple[int, ...]
    edges: tuple[float, ...]
    count: int
    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    step: int
    time: float
    nan: int = 0
    inf: int = 0
    neginf: int = 0
    seq: int = 0
    kind: Literal["histogram"] = field(default="histogram", init=False)

    @property
    def nonfinite(self) -> dict[str, int]:
        """``{"nan": n, "inf": n, "neginf": n}``: the values that could not be binned."""
        return {"nan": self.nan, "inf": self.inf, "neginf": self.neginf}


@dataclass(frozen=True, slots=True)
class ArtifactFile:
    """One file of an artifact: ``path`` inside the artifact (``/``-separated), its size,
    sha256 and mtime when logged. ``copied``: kept in the run folder under its hash;
    otherwise referenced at ``<ArtifactEvent.source>/<path>`` (or ``source`` itself)."""

    path: str
    size: int
    sha256: str
    mtime_ns: int
    copied: bool


@dataclass(frozen=True, slots=True)
class ArtifactEvent:
    """A file or folder (checkpoint, eval outputs, resolved config) logged as ``name``."""

    name: str
    type: str
    source: str
    files: tuple[ArtifactFile, ...]
    step: int
    time: float
    seq: int = 0
    #: set by core at delivery (never spooled): where each of ``files`` can be read now
    local: tuple[str, ...] = ()
    kind: Literal["artifact"] = field(default="artifact", init=False)

    @property
    def key(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class ProvenanceEvent:
    """What produced the run (issue 25): code, command, packages, host, GPUs.

    ``data`` is small nested JSON, secrets already redacted, in the sections that
    trackmux/provenance/collect.py documents (``git``, ``command``, ``python``,
    ``packages``, ``host``, ``gpu``, ``env``); ``diff`` is the capped uncommitted diff of
    tracked files (kept apart so a backend can put it in a file, not in its config)."""

    data: dict[str, Any]
    diff: str
    step: int
    time: float
    seq: int = 0
    kind: Literal["provenance"] = field(default="provenance", init=False)


# -- added for the doctor (issue 22): what a watcher of the run found -----------------------
#: Severities of a finding, mildest first.
SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")


@dataclass(frozen=True, slots=True)
class FindingEvent:
    """Something a watcher of the run (the doctor, trackmux/doctor/) found in its events:
    ``rule`` that fired, ``severity`` (one of :data:`SEVERITIES`), the onset ``step``, the
    ``keys`` it concerns and a ``message`` in a researcher's words. Appended to the spool by
    the delivery process, so every backend, a resync and every reader see it. ``evidence``
    holds ``(key, step, value)`` for every number the message quotes at a step, each the
    value logged at that step, so a reader can check it against the curve (a non-finite
    value as the string ``"nan"``, ``"inf"`` or ``"-inf"``: strict JSON has no NaN).

    A finding is an episode that grows (issue 42): ``id`` names it for as long as it lasts
    and ``revision`` counts its events, 0 when it is found, then 1, 2 ... for each update
    (the same ``id``, ``rule`` and onset ``step``, a new ``time``, ``message`` and maybe a
    higher ``severity``). ``worst`` and ``latest`` are ``(key, step, value)`` of the
    finding's first key: its worst value so far and the last one logged. ``moved`` holds
    ``(key, how, then, now)`` of the other signals beside it (``how``: ``"flat"``, ``"up"``
    or ``"down"``; ``then`` the median before the onset, ``now`` the recent one). A store
    that cannot change a row appends each update; a reader takes the latest event per
    ``id`` (:func:`latest_findings`)."""

    rule: str
    severity: str
    keys: tuple[str, ...]
    message: str
    step: int
    time: float
    seq: int = 0
    evidence: tuple[tuple[str, int, float | str], ...] = ()
    id: str = ""
    revision: int = 0
    worst: tuple[str, int, float] | None = None
    latest: tuple[str, int, float] | None = None
    moved: tuple[tuple[str, str, float, float], ...] = ()
    kind: Literal["finding"] = field(default="finding", init=False)

    @property
    def key(self) -> str:
        return f"doctor/{self.rule}"

    @property
    def finding_id(self) -> str:
        """``id``, or for a finding an older trackmux stored, the one it would have had."""
        return self.id or finding_id(self.rule, self.step, self.keys)

    def line(self) -> str:
        """The finding as one line of text (console, text fallbacks)."""
        update = f" (update {self.revision})" if self.revision else ""
        return f"[trackmux doctor] {self.severity.upper()} {self.rule} @ step {self.step}" \
               f"{update}: {self.message}"

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "rule": self.rule, "severity": self.severity, "step": self.step,
            "keys": list(self.keys), "message": self.message,
            "evidence": [{"key": k, "step": st, "value": v} for k, st, v in self.evidence],
            "id": self.finding_id, "revision": self.revision}
        for name in ("worst", "latest"):
            point = getattr(self, name)
            out[name] = None if point is None else \
                {"key": point[0], "step": point[1], "value": point[2]}
        out["moved"] = [{"key": k, "how": how, "then": then, "now": now}
                        for k, how, then, now in self.moved]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], time: float = 0.0) -> FindingEvent:
        """The event :meth:`as_dict` gave (``time`` apart: as_dict leaves it out)."""
        def point(value: Any) -> tuple[str, int, float] | None:
            if not value:
                return None
            return str(value["key"]), int(value["step"]), float(value["value"])

        return cls(str(data["rule"]), str(data["severity"]), tuple(data["keys"]),
                   str(data["message"]), int(data["step"]), time,
                   evidence=tuple((str(e["key"]), int(e["step"]), e["value"])
                                  for e in data.get("evidence") or ()),
                   id=str(data.get("id") or ""), revision=int(data.get("revision") or 0),
                   worst=point(data.get("worst")), latest=point(data.get("latest")),
                   moved=tuple((str(m["key"]), str(m["how"]), float(m["then"]),
                                float(m["now"])) for m in data.get("moved") or ()))


def finding_id(rule: str, step: int, keys: tuple[str, ...] | list[str]) -> str:
    """The id of a finding episode: its rule, onset step and first key (stable: the live
    doctor and a re-run over the same events give the same id)."""
    return f"{rule}@{step}" + (f":{keys[0]}" if keys else "")


def latest_findings(findings: Iterable[FindingEvent]) -> list[FindingEvent]:
    """One finding per id, its latest state (the highest ``revision``; of equal ones the
    last given), in the order each id was first seen: what a reader shows of findings
    that grew."""
    latest: dict[str, FindingEvent] = {}
    for finding in findings:
        fid = finding.finding_id
        held = latest.get(fid)
        if held is None or finding.revision >= held.revision:
            latest[fid] = finding
    return list(latest.values())


# -- samples (issue 23: the rollout ledger) ------------------------------------------

@dataclass(frozen=True, slots=True)
class TokenArray:
    """One per-token array of a batch of samples (logprob, entropy, token ids ...).

    ``lengths[i]`` values belong to sample ``i``; ``data`` holds them, little-endian in
    ``dtype``: ``"f2"`` (float16), ``"f4"`` (float32), ``"b2"`` (bfloat16), ``"i4"``
    (int32), or ``"s"`` (UTF-8 JSON list of strings). In the spool they are packed one
    sample after the other. Between the caller and the spool (so the trainer only copies
    bytes) ``data`` may still be rows padded to ``width`` values, and in ``"f8"`` or
    ``"i8"``; the spool writer packs them and converts them to ``store``."""

    name: str
    dtype: str
    lengths: tuple[int, ...]
    data: bytes
    width: int = 0
    store: str = ""


@dataclass(frozen=True, slots=True)
class SamplesEvent:
    """A batch of samples (prompt, response, reward, its components, advantage, group,
    ...) logged under ``key`` at ``step``, stored as columns: ``values[j]`` is column
    ``columns[j]`` (one cell per sample), plus per-token arrays. The spool keeps every
    sample; ``max_rows`` caps what each backend shows (see trackmux/samples/).
    ``trajectories`` names the columns whose cells are conversations, stored as canonical
    JSON text (core/values/trajectory.py)."""

    key: str
    columns: tuple[str, ...]
    values: tuple[tuple[Cell, ...], ...]
    tokens: tuple[TokenArray, ...]
    step: int
    time: float
    seq: int = 0
    max_rows: int | None = None
    trajectories: tuple[str, ...] = ()
    kind: Literal["samples"] = field(default="samples", init=False)

    @property
    def count(self) -> int:
        """How many samples the event holds."""
        if self.values:
            return len(self.values[0])
        return len(self.tokens[0].lengths) if self.tokens else 0


Event = Union[  # noqa: UP007
    MetricsEvent, ConfigEvent, TableEvent, ImageEvent, TextEvent, HistogramEvent,
    ArtifactEvent, ProvenanceEvent, FindingEvent, SamplesEvent]


class DeferredEvent:
    """An event the spool writer finishes on its own thread before storing it: work too
    slow for the trainer's call (an image's PNG encoding) but whose input was checked and
    copied at the call. ``resolve`` returns the finished event; an exception drops this
    event alone (counted and reported once, as an event the codec cannot store)."""

    __slots__ = ()
    kind: str
    step: int

    def resolve(self) -> Event:
        raise NotImplementedError

    def size(self) -> int:
        """Rough bytes held in memory while queued (the writer's buffer bound)."""
        raise NotImplementedError
