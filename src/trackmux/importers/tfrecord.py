"""TFRecord framing, streamed from a byte offset: the container of TensorBoard event files.

Each record is ``length`` (u64), the masked CRC-32C of those 8 bytes, ``length`` bytes of
data (a serialized ``Event``), and the masked CRC-32C of the data. tensorboard's own record
reader (``tensorboard.compat.tensorflow_stub.pywrap_tensorflow.PyRecordReader_New``)
checks both CRCs in pure Python, about 12 us a scalar record here (84k records/s), which
alone is below what an import of a 1M-point folder needs; this reader checks the same
CRCs with the ``crc32c`` C extension when it is installed (tensorboard's function
otherwise) and reads the file in 1 MB blocks, so memory stays flat whatever the size.

It yields each record with its byte range, so the importer's cursor is the offset after
the last record it committed. A record whose header CRC fails is skipped by looking for
the next position whose header and data both check (named as damage with the bytes
skipped); a record whose data CRC fails is skipped by its (checked) length. A record cut
at the end of the file is reported as a torn tail (a writer may still be finishing it).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

BLOCK = 1 << 20
HEADER = struct.Struct("<QI")
FOOTER = struct.Struct("<I")
#: a length above this is a damaged header, not a record (TensorBoard's are far smaller)
MAX_RECORD = 1 << 30


def _crc() -> Callable[[bytes], int]:
    """CRC-32C (unmasked): the ``crc32c`` C extension, else tensorboard's own."""
    try:
        import crc32c
    except ImportError:  # correct, about 40 times slower
        from tensorboard.compat.tensorflow_stub import pywrap_tensorflow

        return cast("Callable[[bytes], int]", pywrap_tensorflow.crc32c)
    return cast("Callable[[bytes], int]", crc32c.crc32c)


def _masker(crc: Callable[[bytes], int]) -> Callable[[bytes], int]:
    def masked(data: bytes) -> int:
        value = crc(data)
        return (((value >> 15) | (value << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    return masked


@dataclass(frozen=True)
class Bad:
    """Bytes ``start``..``end`` that held no readable record (``torn``: a record cut by
    the end of the file)."""

    start: int
    end: int
    what: str
    torn: bool = False


def records(path: Path, offset: int) -> Iterator[tuple[bytes, int] | Bad]:
    """``(data, end offset)`` of each record from ``offset`` on, or :class:`Bad` for a
    stretch that could not be read."""
    crc = _crc()
    masked = _masker(crc)  # the masked CRC TFRecord stores (inlined on the hot path)
    header = HEADER.unpack_from
    footer = FOOTER.unpack_from
    with open(path, "rb") as handle:
        handle.seek(offset)
        buf = handle.read(BLOCK)
        base, pos = offset, 0
        eof = not buf
        scanned = 1  # while looking past damage: where the look goes on (from pos)
        while True:
            have = len(buf) - pos
            need = 12
            if have >= 12:
                length, header_crc = header(buf, pos)
                value = crc(buf[pos:pos + 8])
                if ((((value >> 15) | (value << 17)) + 0xA282EAD8) & 0xFFFFFFFF != header_crc
                        or length > MAX_RECORD):
                    found, undecided = _resync(buf, pos + scanned, masked)
                    if found is None and not eof:  # look further: one more block
                        scanned = max(1, undecided - pos)
                        more = handle.read(BLOCK)
                        eof = not more
                        buf, base, pos = buf[pos:] + more, base + pos, 0
                        continue
                    scanned = 1
                    end = len(buf) if found is None else found
                    yield Bad(base + pos, base + end, "corrupt record header (CRC "
                              f"mismatch), {end - pos} bytes skipped")
                    if found is None:
                        return
                    pos = found
                    continue
                need = 16 + length
            if have < need:
                more = b"" if eof else handle.read(max(BLOCK, need - have))
                if more:  # keep the unread tail, add what is needed
                    buf, base, pos = buf[pos:] + more, base + pos, 0
                    continue
                eof = True
                if have:
                    yield Bad(base + pos, base + len(buf),
                              f"truncated record at the end ({have} bytes)", torn=True)
                return
            start = pos + 12
            data = buf[start:start + length]
            (data_crc,) = footer(buf, start + length)
            pos = start + length + 4
            value = crc(data)
            if (((value >> 15) | (value << 17)) + 0xA282EAD8) & 0xFFFFFFFF != data_crc:
                yield Bad(base + start - 12, base + pos,
                          f"corrupt record data (CRC mismatch), {length + 16} bytes skipped")
                continue
            yield data, base + pos


def _resync(buf: bytes, start: int, masked: Callable[[bytes], int]
            ) -> tuple[int | None, int]:
    """The first position from ``start`` where a whole record checks (or None), and the
    first position this buffer could not decide (a record running past its end)."""
    for pos in range(start, len(buf) - 15):
        length, header_crc = HEADER.unpack_from(buf, pos)
        if length > MAX_RECORD or masked(buf[pos:pos + 8]) != header_crc:
            continue
        end = pos + 12 + length
        if end + 4 > len(buf):
            return None, pos
        if masked(buf[pos + 12:end]) == FOOTER.unpack_from(buf, end)[0]:
            return pos, pos
    return None, max(start, len(buf) - 15)
