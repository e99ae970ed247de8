"""Events to spool rows and back: orjson bodies, a CRC per row, PNGs as content-addressed blobs.

The CRC covers the whole row (seq, kind, step, time and body), so a flipped bit in a
step or a timestamp is detected like one in the body; a blob is checked against its hash.

JSON has no NaN or infinity, and orjson writes them as ``null``; since a metric value can
never be ``None``, non-finite metric values are stored as the strings "nan", "inf" and
"-inf" and turned back into floats on reading. Table cells that are NaN come back as None.
"""

from __future__ import annotations

import hashlib
import math
import struct
import zlib
from typing import Any

import orjson

from trackmux.core.events import (
    ArtifactEvent,
    ArtifactFile,
    ConfigEvent,
    Event,
    FindingEvent,
    HistogramEvent,
    ImageEvent,
    MetricsEvent,
    ProvenanceEvent,
    SamplesEvent,
    TableEvent,
    TextEvent,
)

Row = tuple[str, int, float, bytes]  # kind, step, time, body (the spool adds seq and crc)
_HEADER = struct.Struct("<qqd")


def _nonfinite(value: float) -> str:
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def encode(event: Event) -> tuple[Row, tuple[str, bytes] | None]:
    """A spool row for ``event``, plus the blob (hash, bytes) it references, if any."""
    blob: tuple[str, bytes] | None = None
    body: bytes
    if isinstance(event, MetricsEvent):
        try:
            body = orjson.dumps(event.data)
        except TypeError:  # a str-subclass key that equals a known key took log()'s fast
            data = {str.__str__(k): v for k, v in event.data.items()}  # path: store it plain
            event = MetricsEvent(data, event.step, event.time, event.seq)
            body = orjson.dumps(data)
        if b"null" in body:
            body = orjson.dumps({
                k: _nonfinite(v) if isinstance(v, float) and not math.isfinite(v) else v
                for k, v in event.data.items()
            })
    elif isinstance(event, TableEvent):
        table: dict[str, Any] = {"key": event.key, "columns": event.columns,
                                 "rows": event.rows}
        if event.max_rows is not None:
            table["max_rows"] = event.max_rows
        body = orjson.dumps(table)
    elif isinstance(event, ImageEvent):
        digest = hashlib.sha256(event.png).hexdigest()
        blob = (digest, event.png)
        body = orjson.dumps({"key": event.key, "blob": digest, "width": event.width,
                             "height": event.height, "mode": event.mode,
                             "caption": event.caption})
    elif isinstance(event, TextEvent):
        body = orjson.dumps({"key": event.key, "text": event.text})
    elif isinstance(event, ConfigEvent):
        body = orjson.dumps(event.config)
    elif isinstance(event, ArtifactEvent):
        body = orjson.dumps({"name": event.name, "type": event.type, "source": event.source,
                             "files": [[f.path, f.size, f.sha256, f.mtime_ns, f.copied]
                                       for f in event.files]})
    elif isinstance(event, HistogramEvent):
        body = orjson.dumps({"key": event.key, "counts": event.counts, "edges": event.edges,
                             "count": event.count, "min": event.min, "max": event.max,
                             "mean": event.mean, "std": event.std, "nan": event.nan,
                             "inf": event.inf, "neginf": event.neginf})
    elif isinstance(event, ProvenanceEvent):
        body = orjson.dumps({"data": event.data, "diff": event.diff})
    elif isinstance(event, FindingEvent):
        finding: dict[str, Any] = {"rule": event.rule, "severity": event.severity,
                                   "keys": event.keys, "message": event.message,
                                   "evidence": event.evidence}
        if event.id:  # a finding that grows (issue 42): its episode and what it holds now
            finding.update(id=event.id, revision=event.revision, worst=event.worst,
                           latest=event.latest, moved=event.moved)
        body = orjson.dumps(finding)
    elif isinstance(event, SamplesEvent):  # issue 23: header row + payload blob
        from trackmux.core.spool import samplepack  # only runs that log samples pay for it

        header, payload = samplepack.pack(event)
        digest = hashlib.sha256(payload).hexdigest()
        blob = (digest, payload)
        body = orjson.dumps({**header, "blob": digest})
    else:  # pragma: no cover - the Event union is closed
        raise TypeError(f"not an event: {event!r}")
    return (event.kind, event.step, event.time, body), blob


def row_crc(seq: int, kind: str, step: int, time: float, body: bytes) -> int:
    """CRC-32 of a whole spool row, so damage anywhere in it is detected."""
    return zlib.crc32(body, zlib.crc32(_HEADER.pack(seq, step, time) + kind.encode()))


def crc_ok(seq: int, kind: str, step: int, time: float, body: bytes, crc: int) -> bool:
    try:
        return row_crc(seq, kind, step, time, body) == crc
    except (struct.error, TypeError, AttributeError):  # a damaged column of the wrong type
        return False


def blob_ok(ref: str, blob: bytes) -> bool:
    """True when ``blob`` still hashes to the reference it is stored under."""
    return hashlib.sha256(blob).hexdigest() == ref


def decode(seq: int, kind: str, step: int, time: float, body: bytes,
           blob: bytes | None = None) -> Event:
    """Rebuild the event of one row (``blob`` is the PNG of an image row, the payload of a
    samples row)."""
    data: Any = orjson.loads(body)
    if kind == "metrics":
        for key, value in data.items():
            if type(value) is str:
                data[key] = float(value)
        return MetricsEvent(data, step, time, seq)
    if kind == "table":
        rows = tuple(tuple(r) for r in data["rows"])
        return TableEvent(data["key"], tuple(data["columns"]), rows, step, time, seq,
                          data.get("max_rows"))
    if kind == "image":
        if blob is None:
            raise ValueError(f"image event {seq} references missing blob {data['blob']}")
        return ImageEvent(data["key"], blob, data["width"], data["height"], data["mode"],
                          step, time, data.get("caption"), seq)
    if kind == "text":
        return TextEvent(data["key"], data["text"], step, time, seq)
    if kind == "config":
        return ConfigEvent(data, step, time, seq)
    if kind == "artifact":
        files = tuple(ArtifactFile(p, size, digest, mtime, bool(copied))
                      for p, size, digest, mtime, copied in data["files"])
        return ArtifactEvent(data["name"], data["type"], data["source"], files, step, time,
                             seq)
    if kind == "histogram":
        return HistogramEvent(data["key"], tuple(data["counts"]), tuple(data["edges"]),
                              data["count"], data["min"], data["max"], data["mean"],
                              data["std"], step, time, data.get("nan", 0), data.get("inf", 0),
                              data.get("neginf", 0), seq)
    if kind == "provenance":
        return ProvenanceEvent(data["data"], data.get("diff", ""), step, time, seq)
    if kind == "finding":
        worst, latest = data.get("worst"), data.get("latest")
        return FindingEvent(data["rule"], data["severity"], tuple(data["keys"]),
                            data["message"], step, time, seq,
                            tuple((str(k), int(st), v if isinstance(v, str) else float(v))
                                  for k, st, v in data.get("evidence") or ()),
                            id=str(data.get("id") or ""), revision=int(data.get("revision") or 0),
                            worst=(str(worst[0]), int(worst[1]), float(worst[2]))
                            if worst else None,
                            latest=(str(latest[0]), int(latest[1]), float(latest[2]))
                            if latest else None,
                            moved=tuple((str(k), str(how), float(a), float(b))
                                        for k, how, a, b in data.get("moved") or ()))
    if kind == "samples":
        if blob is None:
            raise ValueError(f"samples event {seq} references missing blob {data['blob']}")
        from trackmux.core.spool import samplepack

        return samplepack.unpack(data, blob, step, time, seq)
    raise ValueError(f"unknown event kind {kind!r} at seq {seq}")


def blob_ref(kind: str, body: bytes) -> str | None:
    """The blob hash an image (or samples) row points to."""
    if kind not in ("image", "samples"):
        return None
    ref = orjson.loads(body).get("blob")
    return ref if isinstance(ref, str) else None
