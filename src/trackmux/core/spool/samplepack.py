"""The spool's encoding of a batch of samples (:class:`SamplesEvent`): columnar and compact.

A samples event is one small row in ``events`` (key, count, column and token-array names,
and the hash of its payload) and one payload in ``blobs``, so a reader lists every step of
every key from the small rows and decodes only the step it shows.

Payload layout (all integers little-endian)::

    b"TMS1" | u32 header length | header (zlib'd JSON) | section 0 | section 1 | ...

The header holds the columns: a text column whose cells repeat (a GRPO group's prompt is
the same for every sample of the group) is stored once per distinct string plus an index
per sample; other columns as plain JSON lists. Each token array is one section, its
values packed in their dtype (float16 by default, float32, bfloat16 or int32) one sample
after the other, with the per-sample lengths in the header (stored once for all arrays of
the same lengths); a section is zlib-compressed (level 1) only when a probe of its first
64 KB saves a quarter (float16 logprobs save ~11-18% for ~100 ms of CPU per 4 MB here, so
they are stored as they are; masks, small-vocabulary ids and constant arrays compress).
The header (text included) is zlib'd at level 1. Trajectory columns (conversations,
core/values/trajectory.py) are text columns of canonical JSON, named in the header's and
the row's ``trajectories``. Runs in the spool writer's thread,
never in the trainer's.
"""

from __future__ import annotations

import math
import struct
import zlib
from typing import Any

import orjson

from trackmux.core.events import Cell, SamplesEvent, TokenArray

MAGIC = b"TMS1"
_U32 = struct.Struct("<I")
#: a section is compressed only when that saves at least this share of it
MIN_SAVING = 0.25
PROBE_BYTES = 1 << 16
ITEM_SIZE = {"f2": 2, "f4": 4, "i4": 4, "b2": 2, "f8": 8, "i8": 8}
_NUMPY = {"f2": "<f2", "f4": "<f4", "i4": "<i4", "b2": "<u2", "f8": "<f8", "i8": "<i8"}
_STRUCT = {"f2": "e", "f4": "f", "i4": "i", "b2": "H"}


def packed(array: TokenArray) -> TokenArray:
    """``array`` packed sample after sample in its storage dtype (writer thread). Arrays
    still padded or in a wider dtype come only from numpy/torch input, so numpy is there."""
    store = array.store or array.dtype
    if not array.width and store == array.dtype:
        return array
    import numpy as np

    values = np.frombuffer(array.data, dtype=_NUMPY[array.dtype])
    if array.width:
        rows = values.reshape(-1, array.width)
        if any(n != array.width for n in array.lengths):
            values = np.concatenate([rows[i, :n] for i, n in enumerate(array.lengths)]
                                    or [values[:0]])
    if store != array.dtype:
        if array.dtype == "b2":  # bfloat16 bits -> float32 -> store
            values = (values.astype("<u4") << 16).view("<f4")
        with np.errstate(over="ignore"):
            values = values.astype(_NUMPY[store])
    return TokenArray(array.name, store, array.lengths, values.tobytes())


def _column_json(values: tuple[Cell, ...]) -> Any:
    texts = [v for v in values if type(v) is str]
    if len(texts) == len(values) and values:
        distinct: dict[str, int] = {}
        index = [distinct.setdefault(v, len(distinct)) for v in values]  # type: ignore[arg-type]
        if len(distinct) < len(values):
            return {"strings": list(distinct), "index": index}
    if any(type(v) is float and not math.isfinite(v) for v in values):
        return {"values": [_finite_or_tag(v) for v in values], "tagged": True}
    return {"values": list(values)}


def _finite_or_tag(value: Cell) -> Any:
    if type(value) is float and not math.isfinite(value):
        return {"f": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    return value


def _column_values(data: dict[str, Any]) -> tuple[Cell, ...]:
    if "strings" in data:
        strings = data["strings"]
        return tuple(strings[i] for i in data["index"])
    values = data["values"]
    if data.get("tagged"):
        return tuple(float(v["f"]) if isinstance(v, dict) else v for v in values)
    return tuple(values)


def _worth_compressing(data: bytes) -> bool:
    """Whether zlib saves ``MIN_SAVING`` of a section, judged on its first 64 KB (float
    logprobs save ~11% for a lot of CPU and are stored as they are; masks, token ids of
    short vocabularies and constant arrays compress well)."""
    if len(data) < 256:
        return False
    probe = data[:PROBE_BYTES]
    return len(zlib.compress(probe, 1)) <= len(probe) * (1 - MIN_SAVING)


def pack(event: SamplesEvent) -> tuple[dict[str, Any], bytes]:
    """The row header (small JSON-able dict) and the payload of ``event``."""
    sections: list[bytes] = []
    tokens: list[dict[str, Any]] = []
    lengths_seen: dict[tuple[int, ...], int] = {}
    lengths: list[list[int]] = []
    for array in event.tokens:
        array = packed(array)
        ref = lengths_seen.get(array.lengths)
        if ref is None:
            ref = lengths_seen[array.lengths] = len(lengths)
            lengths.append(list(array.lengths))
        data = array.data
        compressed = _worth_compressing(data)
        sections.append(zlib.compress(data, 1) if compressed else data)
        tokens.append({"name": array.name, "dtype": array.dtype, "lengths": ref,
                       "bytes": len(sections[-1]), "zlib": compressed})
    header = {"columns": {name: _column_json(values)
                          for name, values in zip(event.columns, event.values, strict=True)},
              "order": list(event.columns), "count": event.count, "tokens": tokens,
              "lengths": lengths}
    if event.trajectories:
        header["trajectories"] = list(event.trajectories)
    head = zlib.compress(orjson.dumps(header), 1)
    payload = b"".join([MAGIC, _U32.pack(len(head)), head, *sections])
    row = {"key": event.key, "count": event.count, "columns": list(event.columns),
           "tokens": [t.name for t in event.tokens]}
    if event.max_rows is not None:
        row["max_rows"] = event.max_rows
    if event.trajectories:
        row["trajectories"] = list(event.trajectories)
    return row, payload


def read_header(payload: bytes) -> tuple[dict[str, Any], int]:
    """The payload's header and where its first section starts (no token data decoded)."""
    if payload[:4] != MAGIC:
        raise ValueError("samples payload has no TMS1 header")
    (size,) = _U32.unpack_from(payload, 4)
    return orjson.loads(zlib.decompress(payload[8:8 + size])), 8 + size


def columns_of(header: dict[str, Any]) -> tuple[tuple[str, ...], tuple[tuple[Cell, ...], ...]]:
    """The column names and values a payload header holds."""
    columns = tuple(header["order"])
    return columns, tuple(_column_values(header["columns"][name]) for name in columns)


def unpack(row: dict[str, Any], payload: bytes, step: int, time: float,
           seq: int) -> SamplesEvent:
    """Rebuild the event from its row header and payload (raises ValueError if damaged)."""
    header, offset = read_header(payload)
    columns, values = columns_of(header)
    arrays = []
    for spec in header["tokens"]:
        raw = payload[offset:offset + spec["bytes"]]
        offset += spec["bytes"]
        data = zlib.decompress(raw) if spec["zlib"] else bytes(raw)
        arrays.append(TokenArray(spec["name"], spec["dtype"],
                                 tuple(header["lengths"][spec["lengths"]]), data))
    return SamplesEvent(row["key"], columns, values, tuple(arrays), step, time, seq,
                        row.get("max_rows"), tuple(header.get("trajectories", ())))


def token_values(array: TokenArray) -> list[list[Any]]:
    """The values of ``array`` per sample, as Python numbers (or strings), no numpy."""
    if array.dtype == "s":
        flat: list[Any] = orjson.loads(array.data)
    else:
        count = sum(array.lengths)
        flat = list(struct.unpack(f"<{count}{_STRUCT[array.dtype]}",
                                  array.data[:count * ITEM_SIZE[array.dtype]]))
        if array.dtype == "b2":
            flat = _bfloat16(flat)
    out, start = [], 0
    for n in array.lengths:
        out.append(flat[start:start + n])
        start += n
    return out


def token_row(array: TokenArray, index: int) -> list[Any]:
    """The values of one sample of ``array`` (decodes only that sample's bytes)."""
    start = sum(array.lengths[:index])
    n = array.lengths[index]
    if array.dtype == "s":
        return list(orjson.loads(array.data)[start:start + n])
    size = ITEM_SIZE[array.dtype]
    values = list(struct.unpack_from(f"<{n}{_STRUCT[array.dtype]}", array.data, start * size))
    return _bfloat16(values) if array.dtype == "b2" else values


def _bfloat16(bits: list[int]) -> list[float]:
    """bfloat16 bit patterns as floats (the high half of a float32)."""
    if not bits:
        return []
    return list(struct.unpack(f"<{len(bits)}f", struct.pack(f"<{len(bits)}I",
                                                            *(b << 16 for b in bits))))
