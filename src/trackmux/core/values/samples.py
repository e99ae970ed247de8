"""A batch of samples at the door (``Run.log_samples``): checked and converted once, in the
caller's thread, into a :class:`SamplesEvent` of plain data.

Samples come as columns (``{"prompt": [...], "reward": [...]}``) or as rows (a list of
dicts). Cells are what tables take (text, numbers, bools, None; numpy/torch scalars and
1-D arrays unwrapped). A column mixing text and numbers becomes text. Per-token arrays
(``tokens={"logprob": ...}``) are ragged lists, numpy arrays or torch tensors (any dtype,
bfloat16 too, any device), padded on the right when 2-D (``token_lengths`` says how many
values of each row are real; default: all). A ``messages`` column holds conversations
(lists of messages with tool calls), checked and encoded by core/values/trajectory.py.
Float arrays are stored as float16
(``token_dtype="float32"`` keeps full precision), integer arrays as int32, strings as
strings. numpy and torch are used only when the input already is numpy or torch, so
``import trackmux`` stays light.

Bad input never stops the loop by default: a cell that cannot be kept drops its sample
(the message names the column and the row), a column or token array of the wrong length
is cut or left out; each problem is returned as a message for the caller to report once.
With ``strict=True`` the first problem raises ``ValueError``/``TypeError`` instead.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from trackmux.core.events import Cell, SamplesEvent, TokenArray
from trackmux.core.values import normalize, trajectory

#: the most samples one call may hold, and the most values of one token array
MAX_SAMPLES = 1_000_000
MAX_TOKEN_VALUES = 1 << 31
TOKEN_DTYPES = {"float16": "f2", "float32": "f4"}


class SampleProblem(ValueError):
    """Raised in strict mode; in the default mode its message is reported once."""


def _is_array(value: object) -> bool:
    return type(value).__module__.split(".")[0] in ("numpy", "torch")


def _listed(value: object, name: str) -> list[Any]:
    """A column's cells as a list (numpy/torch 1-D arrays via tolist)."""
    if _is_array(value):
        module = type(value).__module__.split(".")[0]
        if module == "torch":
            tensor = value.detach()  # type: ignore[attr-defined]
            if str(tensor.dtype) == "torch.bfloat16":
                tensor = tensor.float()
            value = tensor.cpu()
        if getattr(value, "ndim", 1) != 1:
            raise SampleProblem(f"column {name!r} must be 1-D, got shape "
                                f"{tuple(value.shape)}")  # type: ignore[attr-defined]
        return list(value.tolist())  # type: ignore[attr-defined]
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise SampleProblem(f"column {name!r} must be a list of cells, got "
                            f"{type(value).__name__}")
    return list(value)


def _cell(value: object, column: str, row: int) -> Cell:
    if type(value) in (str, int, float, bool) or value is None:
        if type(value) is str and not value.isascii():
            normalize.check_text(value, f"column {column!r} row {row}")
        elif type(value) is int and not -normalize.MAX_INT - 1 <= value <= normalize.MAX_INT:
            return str(value)
        return value  # type: ignore[return-value]
    if isinstance(value, (Mapping, list, tuple, set)) or (
            _is_array(value) and getattr(value, "ndim", 0) != 0):
        raise SampleProblem(f"column {column!r} row {row}: a cell must be text, a number, "
                            f"a bool or None, got {type(value).__name__}")
    cell = normalize.to_cell(value)
    if isinstance(cell, str):
        cell = normalize.check_text(str.__str__(cell), f"column {column!r} row {row}")
    return cell


_PLAIN_NUMBERS = {int, float, bool, type(None)}


def _fast_column(values: list[Any], n: int) -> list[Cell] | None:
    """The column as it is when every cell is already plain (ASCII text, or numbers
    within 64 bits): checked at C speed, no per-cell Python call; None otherwise."""
    cells = values[:n] if len(values) != n else values
    kinds = set(map(type, cells))
    if kinds == {str}:
        return list(cells) if all(map(str.isascii, cells)) else None
    if kinds <= _PLAIN_NUMBERS:
        if int in kinds:
            ints = [v for v in cells if type(v) is int]
            if min(ints) < -normalize.MAX_INT - 1 or max(ints) > normalize.MAX_INT:
                return None
        return list(cells)
    return None


def _columns(samples: object) -> dict[str, list[Any]]:
    if isinstance(samples, Mapping):
        return {normalize.check_key(k, "column name"): _listed(v, str(k))
                for k, v in samples.items()}
    if isinstance(samples, (str, bytes)) or not isinstance(samples, Sequence):
        raise TypeError("samples must be a dict of column -> list, or a list of dicts; got "
                        f"{type(samples).__name__}")
    names: dict[str, None] = {}
    for i, row in enumerate(samples):
        if not isinstance(row, Mapping):
            raise TypeError(f"samples[{i}] must be a dict (column -> cell), got "
                            f"{type(row).__name__}")
        for k in row:
            if k not in names:
                names[normalize.check_key(k, f"samples[{i}] column name")] = None
    return {name: [row.get(name) for row in samples]
            for name in names}


def to_event(key: str, samples: object, step: int, time: float, *, tokens: object = None,
             token_lengths: object = None, token_dtype: str = "float16",
             max_rows: int | None = None,
             strict: bool = False) -> tuple[SamplesEvent, list[str]]:
    """The event for one ``log_samples`` call, and the problems to report (empty in strict
    mode, where the first one raises)."""
    problems: list[str] = []

    def problem(message: str) -> None:
        if strict:
            raise SampleProblem(message)
        problems.append(message)

    if token_dtype not in TOKEN_DTYPES:
        raise ValueError(f"token_dtype must be one of {sorted(TOKEN_DTYPES)}, got "
                         f"{token_dtype!r}")
    raw = _columns(samples) if samples is not None else {}
    arrays = _token_inputs(tokens, problem)
    rows_of: dict[str, int] = {}
    for name, value in arrays.items():  # a None or scalar array drops itself, not the call
        try:
            rows_of[name] = _token_rows(value)
        except (TypeError, ValueError) as exc:
            problem(f"token array {name!r}: {exc}; it is left out")
    counts = {name: len(v) for name, v in raw.items()}
    n = min(counts.values()) if counts else None
    if counts and len(set(counts.values())) > 1:
        longest = max(counts, key=lambda c: counts[c])
        shortest = min(counts, key=lambda c: counts[c])
        problem(f"column {longest!r} has {counts[longest]} values but column {shortest!r} "
                f"has {counts[shortest]}; samples past row {counts[shortest] - 1} are left out")
    if n is None:
        n = next(iter(rows_of.values()), 0)
    if n > MAX_SAMPLES:
        raise ValueError(f"log_samples takes at most {MAX_SAMPLES} samples, got {n}")
    keep = [True] * n
    cols: dict[str, list[Cell]] = {}
    conversations: list[str] = []
    for name, values in raw.items():
        if trajectory.is_trajectory_column(name, values):  # messages (with tool calls)
            try:
                cols[name] = list(trajectory.encode_column(name, values, n, keep, problems,
                                                           strict))
            except trajectory.TrajectoryProblem as exc:
                raise SampleProblem(str(exc)) from None
            conversations.append(name)
            continue
        out = _fast_column(values, n)
        if out is None:  # something else than plain text / numbers: cell by cell
            out = []
            for i in range(n):
                try:
                    out.append(_cell(values[i], name, i))
                except (SampleProblem, ValueError, TypeError, OverflowError) as exc:
                    if strict:
                        raise SampleProblem(str(exc)) from None
                    keep[i] = False
                    out.append(None)
                    problems.append(f"{exc}; that sample is left out")
        kinds = set(map(type, out))
        if str in kinds and kinds - {str, type(None)}:
            out = [v if v is None or isinstance(v, str) else str(v) for v in out]
        cols[name] = out
    lengths = _lengths(token_lengths, n, problem) if token_lengths is not None else None
    kept_rows = None if all(keep) else [i for i in range(n) if keep[i]]
    packed: list[TokenArray] = []
    for name, rows in rows_of.items():
        if rows != n:
            problem(f"token array {name!r} has {rows} rows but there are {n} samples; it is "
                    "left out")
            continue
        try:
            packed.append(_pack_tokens(name, arrays[name], lengths, kept_rows, token_dtype))
        except (SampleProblem, ValueError, TypeError, OverflowError) as exc:
            problem(f"token array {name!r}: {exc}; it is left out")
    if kept_rows is not None:
        cols = {name: [v for v, k in zip(values, keep, strict=True) if k]
                for name, values in cols.items()}
    event = SamplesEvent(key, tuple(cols), tuple(tuple(v) for v in cols.values()),
                         tuple(packed), step, time, max_rows=max_rows,
                         trajectories=tuple(conversations))
    return event, problems


def _token_inputs(tokens: object, problem: Any) -> dict[str, Any]:
    """The token arrays by name; ``tokens`` that is not a dict is left out (the samples
    are kept), a bad name drops its array."""
    if tokens is None:
        return {}
    if not isinstance(tokens, Mapping):
        problem(f"tokens must be a dict of name -> per-token values, got "
                f"{type(tokens).__name__}; no token array is kept")
        return {}
    out = {}
    for k, v in tokens.items():
        try:
            out[normalize.check_key(k, "token array name")] = v
        except (TypeError, ValueError) as exc:
            problem(f"{exc}; that token array is left out")
    return out


def _token_rows(value: object) -> int:
    """How many samples a token array covers; TypeError for what is not an array of rows
    (None, a number, a 0-d array)."""
    shape = getattr(value, "shape", None)
    if shape is not None and _is_array(value):
        if not len(shape):
            raise TypeError("must be a list of per-sample values or a 2-D array, got a 0-d "
                            f"{type(value).__name__}")
        return int(shape[0])
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"must be a list of per-sample values, numpy or torch, got "
                        f"{'None' if value is None else type(value).__name__}")
    return len(value)


def _lengths(value: object, n: int, problem: Any) -> list[int] | None:
    """``token_lengths`` as counts, or None (arrays kept whole) when it is not one count
    per sample; every conversion is checked here, so inf, NaN or 10**400 is named, never
    an OverflowError."""
    try:
        listed = _listed(value, "token_lengths")
    except SampleProblem as exc:
        problem(f"{exc}; token arrays are kept whole")
        return None
    if len(listed) != n:
        problem(f"token_lengths has {len(listed)} values but there are {n} samples; "
                "token arrays are kept whole")
        return None
    out = []
    for i, v in enumerate(listed):
        if type(v) is int and v >= 0:
            out.append(v)
        elif (type(v) is float or isinstance(v, (int, float))) and not isinstance(v, bool) \
                and v == v and v >= 0 and v != math.inf and v == int(v):
            out.append(int(v))
        else:
            problem(f"token_lengths row {i} is {v!r}, not a count; token arrays are kept "
                    "whole")
            return None
    return out


INT32 = (-(1 << 31), (1 << 31) - 1)


def _out_of_int32(value: int) -> SampleProblem:
    return SampleProblem(f"integer {value} is out of the int32 range (token ids and other "
                         "integers are stored as int32; nothing is wrapped)")


def _pack_tokens(name: str, value: Any, lengths: list[int] | None,
                 kept: list[int] | None, token_dtype: str) -> TokenArray:
    if _is_array(value):
        return _pack_array(name, value, lengths, kept, token_dtype)
    rows = list(value)
    if kept is not None:
        rows = [rows[i] for i in kept]
        lengths = None if lengths is None else [lengths[i] for i in kept]
    ragged = _pack_ragged_arrays(name, rows, lengths, token_dtype)
    if ragged is not None:
        return ragged
    flat: list[Any] = []
    sizes: list[int] = []
    for i, row in enumerate(rows):
        if _is_array(row):
            row = _listed(row, f"row {i}")
        if isinstance(row, (str, bytes)) or not isinstance(row, Sequence):
            raise SampleProblem(f"row {i} must be a list of values, got {type(row).__name__}")
        part = list(row) if lengths is None else list(row)[:lengths[i]]
        sizes.append(len(part))
        flat.extend(part)
    if len(flat) > MAX_TOKEN_VALUES:
        raise SampleProblem(f"holds {len(flat)} values, more than {MAX_TOKEN_VALUES}")
    kinds = {type(v) for v in flat}
    if kinds <= {str}:
        return TokenArray(name, "s", tuple(sizes), orjson.dumps(flat) if flat else b"[]")
    if kinds <= {int, bool}:
        try:
            return TokenArray(name, "i4", tuple(sizes), struct.pack(f"<{len(flat)}i", *flat))
        except struct.error:
            raise _out_of_int32(next(v for v in flat if not INT32[0] <= v <= INT32[1])
                                ) from None
    for i, v in enumerate(flat):
        if type(v) not in (int, float, bool):
            raise SampleProblem(f"value {i} is {type(v).__name__}, not a number")
    dtype = TOKEN_DTYPES[token_dtype]
    fmt = "e" if dtype == "f2" else "f"
    try:
        data = struct.pack(f"<{len(flat)}{fmt}", *flat)
    except (struct.error, OverflowError):  # beyond float16's range: inf, as numpy does
        data = struct.pack(f"<{len(flat)}{fmt}", *(_clamp16(v) for v in flat))
    return TokenArray(name, dtype, tuple(sizes), data)


def _clamp16(value: float) -> float:
    try:
        big = math.isfinite(value) and abs(value) > 65504.0
    except OverflowError:  # an int beyond float range
        raise SampleProblem(f"an integer of {len(str(abs(value)))} digits is beyond the "
                            "float range") from None
    return math.copysign(math.inf, value) if big else value


def _pack_ragged_arrays(name: str, rows: list[Any], lengths: list[int] | None,
                        token_dtype: str) -> TokenArray | None:
    """Rows that are all numpy arrays, or all torch tensors (one per sample, of different
    lengths): cut to ``lengths`` and joined in one ``concatenate``/``cat``, so the cost is
    that of the bytes, as for a padded array. None when the rows are something else."""
    if not rows:
        return None
    modules = {kind.__module__.split(".")[0] for kind in set(map(type, rows))}
    if len(modules) != 1 or not modules <= {"numpy", "torch"}:
        return None
    (module,) = modules
    import numpy as np

    if module == "torch":
        import torch

        for i, dims in enumerate(map(torch.Tensor.dim, rows)):  # ints: no tuple per row
            if dims != 1:
                raise SampleProblem(f"row {i} must be 1-D, got shape {tuple(rows[i].shape)}")
        tensors = rows
        if lengths is not None:
            tensors = [t[:n] for t, n in zip(tensors, lengths, strict=True)]
        sizes = list(map(torch.Tensor.numel, tensors))
        direct = _joined_in_place(tensors, sum(sizes), token_dtype)
        if direct is not None:  # one copy, straight into the event's bytes
            array, dtype, store, data = direct
            return _ragged(name, array, dtype, store, sizes, data)
        with torch.no_grad():  # no autograd graph (rows may require grad)
            try:
                joined = torch.cat(tensors)
            except RuntimeError:  # rows on different devices
                joined = torch.cat([t.cpu() for t in tensors])
        array, dtype, store = _from_torch(joined, token_dtype)
    else:
        arrays = [np.asarray(r) for r in rows]
        for i, a in enumerate(arrays):
            if a.ndim != 1:
                raise SampleProblem(f"row {i} must be 1-D, got shape {a.shape}")
        if lengths is not None:
            arrays = [a[:n] for a, n in zip(arrays, lengths, strict=True)]
        sizes = [int(a.shape[0]) for a in arrays]
        kinds = {a.dtype.str for a in arrays}
        if len(kinds) == 1 and (code := _DIRECT_NUMPY.get(next(iter(kinds)))) is not None:
            buffer = bytearray(sum(sizes) * arrays[0].dtype.itemsize)
            array = np.frombuffer(buffer, dtype=arrays[0].dtype)
            np.concatenate(arrays, out=array)  # one copy, straight into the event's bytes
            return _ragged(name, array, code, _store(code, token_dtype), sizes, buffer)
        flat = np.concatenate(arrays)
        if flat.dtype.kind in "UO":
            return None  # text: the list path stores it as strings
        array, dtype, store = _from_numpy(flat, token_dtype)
    return _ragged(name, array, dtype, store, sizes, None)


#: dtypes whose bytes are stored as they are (or converted by the spool writer), by
#: numpy's dtype string and torch's dtype name
_DIRECT_NUMPY = {"<f2": "f2", "<f4": "f4", "<f8": "f8", "<i4": "i4", "<i8": "i8"}
_DIRECT_TORCH = {"float16": "f2", "bfloat16": "b2", "float32": "f4", "float64": "f8",
                 "int32": "i4", "int64": "i8"}


def _store(dtype: str, token_dtype: str) -> str:
    """The dtype the spool keeps for values given in ``dtype``."""
    if dtype in ("f4", "f8"):
        return TOKEN_DTYPES[token_dtype]
    return "i4" if dtype == "i8" else dtype


def _joined_in_place(tensors: list[Any], total: int, token_dtype: str
                     ) -> tuple[Any, str, str, bytearray] | None:
    """CPU tensors of one plain dtype concatenated by ``torch.cat`` straight into a new
    buffer that becomes the event's bytes (the only copy); None for anything else (mixed
    dtypes, other devices), which takes the general path."""
    import numpy as np
    import torch

    kinds = {t.dtype for t in tensors}
    if len(kinds) != 1:
        return None
    (kind,) = kinds
    code = _DIRECT_TORCH.get(str(kind).removeprefix("torch."))
    if code is None:
        return None
    size = torch.empty((), dtype=kind).element_size()
    buffer = bytearray(total * size)
    if total:
        with torch.no_grad():  # no autograd graph (rows may require grad)
            try:
                torch.cat(tensors, out=torch.frombuffer(buffer, dtype=kind))
            except RuntimeError:  # a row on another device than the CPU buffer
                return None
    array = np.frombuffer(buffer, dtype="<u2" if code == "b2" else f"<{code}")
    return array, code, _store(code, token_dtype), buffer


def _ragged(name: str, array: Any, dtype: str, store: str, sizes: list[int],
            data: bytearray | None) -> TokenArray:
    """The joined rows as a token array: checked (size, the int32 range), and ``data``
    (the array's own buffer) used as it is, or the array's bytes copied once."""
    import numpy as np

    if int(array.size) > MAX_TOKEN_VALUES:
        raise SampleProblem(f"holds {array.size} values, more than {MAX_TOKEN_VALUES}")
    _check_int32(array, dtype, None)
    raw = data if data is not None else np.ascontiguousarray(array).tobytes()
    return TokenArray(name, dtype, tuple(sizes), raw,  # type: ignore[arg-type]
                      store=store)


def _from_torch(tensor: Any, token_dtype: str) -> tuple[Any, str, str]:
    """A tensor as a CPU numpy array, with the dtype its bytes are in and the dtype to
    store (bfloat16 travels as its bits; floats and ints are never narrowed here)."""
    import torch

    floats = TOKEN_DTYPES[token_dtype]
    if tensor.is_complex():
        raise SampleProblem("complex values cannot be kept")
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).cpu().contiguous().numpy(), "b2", "b2"
    if tensor.dtype == torch.float16:
        return tensor.cpu().contiguous().numpy(), "f2", "f2"
    if tensor.dtype == torch.float32:
        return tensor.cpu().contiguous().numpy(), "f4", floats
    if tensor.is_floating_point():  # float64 and the float8 kinds
        dtype = "f8" if tensor.dtype == torch.float64 else "f4"
        if dtype == "f4":
            tensor = tensor.to(torch.float32)
        return tensor.cpu().contiguous().numpy(), dtype, floats
    try:
        array = tensor.cpu().contiguous().numpy()
    except (TypeError, RuntimeError):  # an integer kind numpy lacks
        array = tensor.to(torch.int64).cpu().contiguous().numpy()
    return _from_numpy(array, token_dtype)


def _from_numpy(array: Any, token_dtype: str) -> tuple[Any, str, str]:
    """A numeric numpy array little-endian, with the dtype its bytes are in and the dtype
    to store. 64-bit and unsigned 32-bit integers keep their width here: the range check
    (:func:`_check_int32`) decides whether they fit int32, never a silent wrap."""
    import numpy as np

    floats = TOKEN_DTYPES[token_dtype]
    kind, size = array.dtype.kind, array.dtype.itemsize
    if kind == "f" and size in (2, 4, 8):
        dtype = {2: "f2", 4: "f4", 8: "f8"}[size]
        return array.astype(f"<f{size}", copy=False), dtype, "f2" if dtype == "f2" else floats
    if kind == "i" and size == 8:
        return array.astype("<i8", copy=False), "i8", "i4"
    if kind == "u" and size >= 4:  # beyond int32 (checked next), then exact as int64
        if size == 8 and array.size and array.max() > np.iinfo(np.int64).max:
            raise _out_of_int32(int(array.max()))
        return array.astype("<i8"), "i8", "i4"
    if kind in "iub":
        return array.astype("<i4", copy=False), "i4", "i4"
    raise SampleProblem(f"dtype {array.dtype} cannot be kept")


def _check_int32(array: Any, dtype: str, real: Any) -> None:
    """Refuse 64-bit integers beyond int32 as the list form refuses them (the spool keeps
    int32). ``real``: a mask of the values that are not padding, used only when the whole
    array is out of range (padding may hold anything)."""
    if dtype != "i8" or not array.size:
        return
    low, high = int(array.min()), int(array.max())
    if INT32[0] <= low and high <= INT32[1]:
        return
    values = array if real is None else array[real]
    if not values.size:
        return
    outside = values[(values < INT32[0]) | (values > INT32[1])]
    if outside.size:
        raise _out_of_int32(int(outside[0]))


def _pack_array(name: str, value: Any, lengths: list[int] | None, kept: list[int] | None,
                token_dtype: str) -> TokenArray:
    """numpy or torch, 2-D (samples x tokens, padded on the right). Only the bytes are
    copied here; the spool writer drops the padding and converts to the stored dtype
    (core/spool/samplepack.py), off the trainer's thread."""
    import numpy as np

    module = type(value).__module__.split(".")[0]
    if module == "torch":
        import torch

        tensor = value.detach()
        if tensor.dim() != 2:
            raise SampleProblem(f"must be 2-D (samples x tokens), got shape "
                                f"{tuple(tensor.shape)}")
        if kept is not None:
            tensor = tensor[torch.as_tensor(kept, dtype=torch.long, device=tensor.device)]
        array, dtype, store = _from_torch(tensor, token_dtype)
    else:
        array = np.asarray(value)
        if array.ndim != 2:
            raise SampleProblem(f"must be 2-D (samples x tokens), got shape {array.shape}")
        if array.dtype.kind in "UO":
            return _pack_tokens(name, array.tolist(), lengths, kept, token_dtype)
        if kept is not None:
            array = array[kept]
        array, dtype, store = _from_numpy(array, token_dtype)
    width = int(array.shape[1])
    if lengths is None:
        sizes = [width] * int(array.shape[0])
    else:
        rows = lengths if kept is None else [lengths[i] for i in kept]
        sizes = [min(n, width) for n in rows]
    if dtype == "i8":
        _check_int32(array, dtype, np.arange(width) < np.asarray(sizes)[:, None])
    return TokenArray(name, dtype, tuple(sizes), np.ascontiguousarray(array).tobytes(),
                      width=width, store=store)


_ROW = re.compile(r"\brow \d+|\bturn \d+|\[\d+\]|, got [\w.]+| has \d+ (values|rows)|past row \d+")


def report_once(problems: list[str], key: str, seen: dict[str, int], log: Any) -> None:
    """Log each kind of problem of ``key`` once (WARNING) and count every occurrence in
    ``seen`` (message pattern, row numbers and types elided -> count)."""
    for message in problems:
        pattern = f"{key}: " + _ROW.sub("…", message)
        count = seen.get(pattern, 0)
        seen[pattern] = count + 1
        if count == 0:
            log.warning("trackmux: log_samples %r: %s (reported once; the rest of the call "
                        "is kept)", key, message)
