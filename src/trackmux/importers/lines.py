"""Reading a growing text file line by line from a byte offset (console logs, JSONL, CSV).

The cursor of a text file is the byte offset after the last line imported. A last line
with no newline yet is a line still being written: ``--follow`` waits for the rest of it;
a one-off import reads it if it parses whole, else names it as a truncated line and keeps
the cursor before it, so a later import reads it again once it is complete.
:class:`LineFile` is that loop once, for every one-file line format (console, JSONL, CSV).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from trackmux.importers.base import Chunk, Damage, SourceRun

BLOCK = 1 << 20
#: a "line" longer than this is read as it is (memory stays bounded without newlines)
MAX_LINE = 16 << 20
#: lines per chunk (one commit each, at most)
CHUNK_LINES = 20_000


def lines_from(path: Path, offset: int, live: bool) -> Iterator[tuple[bytes, int, bool]]:
    """``(line, end, complete)`` for each line from ``offset`` on: the line without its
    newline, the offset after it, and whether it ended with a newline (only the last
    line of a file may not, and only when not ``live``)."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        carry = b""
        start = offset
        while True:
            block = handle.read(BLOCK)
            if not block:
                break
            data = carry + block
            pos = 0
            while True:
                newline = data.find(b"\n", pos)
                if newline < 0:
                    break
                yield data[pos:newline], start + newline + 1, True
                pos = newline + 1
            carry = data[pos:]
            start += pos
            if len(carry) > MAX_LINE:  # tqdm redrawing with \r for hours: not one line
                yield carry, start + len(carry), True
                start += len(carry)
                carry = b""
        if carry and not live:
            yield carry, start + len(carry), False


def shrunk(path: Path, offset: int) -> Damage | None:
    """Damage when ``path`` is now shorter than what was imported from it (rewritten)."""
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        return Damage(str(path), -1, 1, f"cannot read: {exc.strerror or exc}")
    if size < offset:
        return Damage(str(path), size, 0, f"the file is shorter ({size} bytes) than what was "
                      f"imported from it ({offset} bytes): rewritten? nothing read")
    return None


def grown(path: Path, offset: int) -> bool:
    """Whether ``path`` holds bytes past ``offset`` (one stat: a ``--follow`` poll)."""
    try:
        return os.stat(path).st_size > offset
    except OSError:
        return False


class LineFile(SourceRun):
    """One text file read line by line: one run. Subclasses read a line in ``take_line``;
    the cursor (``offset``, ``ordinal`` and what ``take_line`` keeps) is the file's own."""

    def __init__(self, path: Path) -> None:
        resolved = path.resolve()
        super().__init__(str(resolved), path.stem, str(path))
        self.path = resolved

    def read(self, cursors: Mapping[str, Any], live: bool) -> Iterator[Chunk]:
        key = self.path.name
        cursor = dict(cursors.get(key) or {"offset": 0, "ordinal": 0})
        offset = int(cursor["offset"])
        problem = shrunk(self.path, offset)
        if problem is not None:
            yield Chunk(damage=[problem])
            return
        if not grown(self.path, offset):
            return
        mtime = os.stat(self.path).st_mtime
        chunk, lines = Chunk(), 0
        for raw, end, complete in lines_from(self.path, offset, live):
            if not self.take_line(raw, complete, cursor, chunk, offset, mtime, live):
                break
            offset = end
            cursor["offset"] = end
            lines += 1
            if lines >= CHUNK_LINES:
                chunk.cursors[key] = dict(cursor)
                yield chunk
                chunk, lines = Chunk(), 0
        chunk.cursors[key] = dict(cursor)
        yield chunk

    def take_line(self, raw: bytes, complete: bool, cursor: dict[str, Any], chunk: Chunk,
                  offset: int, mtime: float, live: bool) -> bool:
        """Read the line ``raw`` (at byte ``offset``; ``complete``: it ended with a newline)
        into ``chunk`` and ``cursor``; False to stop before it, the cursor left there (a
        torn last line, named as damage by the subclass)."""
        raise NotImplementedError
