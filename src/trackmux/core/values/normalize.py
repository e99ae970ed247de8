"""Checking and converting what the trainer passes in, at the door, once.

The rules (documented in docs/values.md):

- Keys are non-empty ``str`` of at most ``MAX_KEY_LENGTH`` characters without control
  characters or lone surrogates; ``str`` subclasses (a str-mixin enum member, ``numpy.str_``)
  are stored as the plain ``str`` they hold. Unicode, ``/``, ``@`` and spaces are kept;
  each backend maps them to what it accepts (mlflow as verl does).
- Metric values: ``int`` and ``float`` pass; ``bool`` becomes ``int``; numpy/torch scalars
  and 0-d arrays/tensors (anything with ``.item()`` and no dimensions) become ``int`` or
  ``float``; ints beyond 64 bits become ``float``; NaN and inf are kept. A nested dict is
  flattened with ``/`` (``{"a": {"b": 1}}`` is ``a/b``); a nested and a flat key that
  flatten to the same name are a ``ValueError`` (one would silently overwrite the other).
  An int beyond float range is a ``ValueError``. Everything else (str, None,
  lists, arrays with elements, objects whose conversion raises) is a ``TypeError`` that
  names the key and the type.
- Steps are ints ``>= 0`` (numpy ints and integral floats accepted); bools, other floats,
  negatives are errors naming ``step``.

These functions raise; given an ``on_bad`` callback (core/values/intake.py: drop, name
once, count; or raise in strict mode) they hand each bad entry to it and keep the rest.
"""

from __future__ import annotations

import gc
import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from trackmux.core.events import Cell, Scalar

MAX_KEY_LENGTH = 1000
MAX_INT = 2**63 - 1
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0 and C1 control characters
_FAST_TYPES = (float, int)
_FAST_SET = frozenset(_FAST_TYPES)
_FLOAT_ONLY = frozenset({float})
_known_keys: set[str] = set()
_KNOWN_KEYS_LIMIT = 200_000


def plain_str(value: object, argument: str) -> str:
    """``value`` as an exact ``str`` (subclasses unwrapped: the spool's encoder and the
    backends take only plain ``str``); a ``TypeError`` naming ``argument`` otherwise."""
    if type(value) is str:
        return value
    if not isinstance(value, str):
        raise TypeError(f"{argument} must be str, got {type(value).__name__}: {value!r:.80}")
    return str.__str__(value)


def check_key(key: object, argument: str = "key") -> str:
    """Return ``key`` if it is acceptable, else raise an error naming ``argument``."""
    if type(key) is str and key in _known_keys:
        return key
    key = plain_str(key, argument)
    if not key:
        raise ValueError(f"{argument} must not be empty")
    if len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"{argument} is {len(key)} characters long; the limit is {MAX_KEY_LENGTH}")
    if _CONTROL.search(key):
        raise ValueError(f"{argument} {key!r:.80} contains control characters")
    if not key.isascii():
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: no backend (nor JSON) can store them
            raise ValueError(f"{argument} {key!r:.80} is not valid unicode") from None
    if len(_known_keys) < _KNOWN_KEYS_LIMIT:
        _known_keys.add(key)
    return key


def check_name(value: object, argument: str, max_length: int = MAX_KEY_LENGTH) -> str:
    """A run name, project or tag: a non-empty plain ``str`` UTF-8 can encode. Separators,
    ``..`` and control characters are allowed: every place that makes a path of a name
    maps them safely (``settings.safe_dirname``, ``fallbacks.path_component``)."""
    value = check_text(value, argument)
    if not value:
        raise ValueError(f"{argument} must not be empty")
    if len(value) > max_length:
        raise ValueError(f"{argument} is {len(value)} characters long; the limit is "
                         f"{max_length}")
    return value


def check_text(value: object, argument: str, on_bad: OnBad | None = None) -> str:
    """Free text (``log_text``, a caption): a plain ``str`` that UTF-8 can encode.

    With ``on_bad``, text UTF-8 cannot encode (lone surrogates) is handed to it and kept
    with those characters replaced by ``?``; the rest of the text arrives."""
    value = plain_str(value, argument)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            exc = ValueError(f"{argument} is not valid unicode (lone surrogates)")
            if on_bad is None:
                raise exc from None
            on_bad(argument, exc)
            return value.encode("utf-8", "replace").decode("utf-8")
    return value


def exit_code(value: object) -> int:
    """``finish(exit_code=...)``: an int (numpy integers accepted, bools refused)."""
    if type(value) is int:
        return value
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"exit_code must be an int, got {type(value).__name__}")
    return int(value.__index__())


def _to_float(value: int, key: str) -> float:
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"metric {key!r} is an int beyond float range ({len(str(value))} "
                         "digits); log it as text or scale it") from None


def to_scalar(value: object, key: str) -> Scalar:
    """Convert one metric value; errors name ``key`` and the offending type."""
    kind = type(value)
    if kind is float:
        return value  # type: ignore[return-value]
    if kind is int:
        return value if -MAX_INT - 1 <= value <= MAX_INT else _to_float(value, key)  # type: ignore[operator,return-value,arg-type]
    if kind is bool:
        return 1 if value else 0
    if isinstance(value, (str, bytes, bytearray)) or value is None:
        raise TypeError(
            f"metric {key!r} has a {kind.__name__} value ({value!r:.60}); metric values must be "
            "numbers (use log_text for text)"
        )
    item = getattr(value, "item", None)
    if item is not None and callable(item):
        ndim = getattr(value, "ndim", 0)
        if ndim not in (0, None):
            raise TypeError(
                f"metric {key!r} is a {kind.__name__} with {ndim} dimensions; only scalars and "
                "0-d arrays/tensors can be logged as metrics"
            )
        try:
            converted = item()
        except Exception as exc:
            raise TypeError(f"metric {key!r}: converting {kind.__name__} failed: {exc}") from exc
        if isinstance(converted, (bool, int, float)):
            return to_scalar(converted, key)
        if isinstance(converted, numbers.Real):  # np.longdouble.item() is a longdouble
            try:
                result = float(converted)
            except OverflowError:
                result = math.inf
            if math.isinf(result) and abs(converted) != math.inf:
                raise ValueError(f"metric {key!r} is beyond float range") from None
            return result
        raise TypeError(f"metric {key!r}: {kind.__name__} holds {type(converted).__name__}, "
                        "not a real number")
    if isinstance(value, int):  # int subclasses (IntEnum, ...)
        return to_scalar(int(value), key)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (list, tuple, set, dict)):
        raise TypeError(f"metric {key!r} has a {kind.__name__} value; metric values must be "
                        "numbers (log each element under its own key, or use log_table)")
    if hasattr(value, "__float__"):
        try:
            return float(value)
        except Exception as exc:
            raise TypeError(f"metric {key!r}: float() of {kind.__name__} failed: {exc}") from exc
    raise TypeError(f"metric {key!r} has a {kind.__name__} value; metric values must be numbers")


def _ints_fit(data: dict[str, object]) -> bool:
    return all(-MAX_INT - 1 <= v <= MAX_INT for v in data.values()
               if type(v) is int)


#: ``on_bad(name, exc)``: called instead of raising for one bad entry (see core/values/intake.py);
#: it may raise ``exc`` itself (strict mode). None raises.
OnBad = Callable[[object, Exception], None]


def normalize_metrics(data: object, on_bad: OnBad | None = None) -> dict[str, Scalar]:
    """Check and convert one ``log()`` payload. Fast when keys repeat and values are floats.

    With ``on_bad``, a bad entry (key or value) is handed to it and left out, and the rest
    is kept; a payload that is not a mapping is handed over as a whole (name ``data``)."""
    if type(data) is dict and _known_keys.issuperset(data):
        kinds = set(map(type, data.values()))
        if kinds <= _FLOAT_ONLY or (kinds <= _FAST_SET and _ints_fit(data)):
            return dict(data)
    if not isinstance(data, Mapping):
        exc = TypeError(f"data must be a mapping of str to number, got {type(data).__name__}")
        if on_bad is None:
            raise exc
        on_bad("data", exc)
        return {}
    if type(data) is dict and on_bad is not None:
        # A call with a bad entry among known floats (an eval metric that is None this
        # step): one scan picks the entries that are not (known key, float); only those go
        # through the checks below (benchmarks/bad_input.py).
        known = _known_keys
        odd = [k for k, v in data.items() if type(v) is not float or k not in known]
        out: dict[str, Scalar] = dict(data)
        for key in odd:
            del out[key]
        _collect({key: data[key] for key in odd}, "", out, on_bad)
        return out
    out = {}
    _collect(data, "", out, on_bad)
    return out


def _collect(data: Mapping[Any, Any], prefix: str, out: dict[str, Scalar],
             on_bad: OnBad | None) -> None:
    """Flatten ``data`` into ``out``: nested dicts become ``a/b``, the rest is converted."""
    known = _known_keys
    for key, value in data.items():
        try:
            if not prefix and type(value) in _FAST_TYPES and type(key) is str and key in known:
                if type(value) is int and not -MAX_INT - 1 <= value <= MAX_INT:
                    value = _to_float(value, key)
                name = key
            else:
                if prefix:
                    key = prefix + "/" + str.__str__(key) if isinstance(key, str) else key
                name = check_key(key)
                if isinstance(value, Mapping):
                    _collect(value, name, out, on_bad)
                    continue
                value = to_scalar(value, name)
            if name in out:
                raise ValueError(f"data has two values for key {name!r} (a nested dict and "
                                 "a flat key flatten to the same name)")
        except (TypeError, ValueError) as exc:
            if on_bad is None:
                raise
            on_bad(key, exc)
            continue
        out[name] = value


def normalize_step(step: object) -> int:
    """An explicit step: a non-negative int (integral floats and numpy ints accepted)."""
    if type(step) is int:
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        if step > MAX_INT:
            raise ValueError(f"step must fit in 64 bits, got {step}")
        return step
    if isinstance(step, bool):
        raise TypeError("step must be an int, got bool")
    item = getattr(step, "item", None)
    if item is not None and callable(item) and getattr(step, "ndim", 0) == 0:
        try:
            value = item()
        except Exception as exc:  # a meta or otherwise data-less tensor
            raise TypeError(f"step: {type(step).__name__}.item() failed ({exc}); pass an int"
                            ) from None
        if type(value) not in (int, float, bool):  # np.longdouble.item() is itself
            raise TypeError(f"step must be an int, got {type(step).__name__}")
        return normalize_step(value)
    if isinstance(step, int):
        return normalize_step(int(step))
    if isinstance(step, float):
        if math.isfinite(step) and step.is_integer():
            return normalize_step(int(step))
        raise ValueError(f"step must be a whole number, got {step!r}")
    raise TypeError(f"step must be an int, got {type(step).__name__}")


def to_cell(value: object) -> Cell:
    """A table cell: str/int/float/bool/None kept, numpy/torch scalars unwrapped, others str().
    Ints beyond 64 bits become str (exact; JSON stores cannot hold them as numbers)."""
    if type(value) is int and not -MAX_INT - 1 <= value <= MAX_INT:
        return str(value)
    if value is None or type(value) in (str, int, float, bool):
        return value  # type: ignore[return-value]
    item = getattr(value, "item", None)
    if item is not None and callable(item) and getattr(value, "ndim", 0) == 0:
        try:
            return to_cell(item())
        except Exception:
            pass
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    try:
        return str(value)
    except Exception as exc:  # an object whose __str__ raises
        return f"<unprintable {type(value).__name__}: {exc}>"


def normalize_table(
    columns: object, rows: object, on_bad: OnBad | None = None
) -> tuple[tuple[str, ...], tuple[tuple[Cell, ...], ...]]:
    """Check a table. Rows must have one cell per column; a column mixing text and
    numbers becomes all text (wandb and others reject mixed columns).

    With ``on_bad``, a bad row is handed to it (named ``rows[i]``) and left out, and a
    cell UTF-8 cannot encode is handed over and kept repaired; the other rows arrive.
    Bad ``columns`` or ``rows`` that is not a list always raise (no row can be kept)."""
    if isinstance(columns, (str, bytes)) or not isinstance(columns, Sequence):
        raise TypeError(f"columns must be a list of str, got {type(columns).__name__}")
    cols = tuple(check_key(c, f"columns[{i}]") for i, c in enumerate(columns))
    if not cols:
        raise ValueError("columns must not be empty")
    if len(set(cols)) != len(cols):
        raise ValueError(f"columns must be unique, got {list(cols)}")
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence):
        raise TypeError(f"rows must be a list of rows, got {type(rows).__name__}")
    plain = _plain_rows(cols, rows)
    if plain is not None:
        return cols, plain
    out: list[list[Cell]] = []
    for i, row in enumerate(rows):
        try:
            out.append(_row(cols, row, i, on_bad))
        except (TypeError, ValueError) as exc:
            if on_bad is None:
                raise
            on_bad(f"rows[{i}]", exc)
    for j in range(len(cols)):
        kinds = {type(r[j]) for r in out if r[j] is not None}
        if str in kinds and len(kinds) > 1:
            for r in out:
                if r[j] is not None and type(r[j]) is not str:
                    r[j] = str(r[j])
    return cols, tuple(tuple(r) for r in out)


_PLAIN_CELLS = frozenset({str, int, float, bool, type(None)})


def _plain_rows(cols: tuple[str, ...], rows: Sequence[Any]
                ) -> tuple[tuple[Cell, ...], ...] | None:
    """The rows as they are when nothing in them needs a change: lists or tuples of the
    right length whose cells are plain str (valid UTF-8), int (64-bit), float, bool or
    None, no column mixing text with numbers. Checked a column at a time with built-ins,
    so a table of 200k rows costs about what copying it does (the cell-by-cell path took
    1-3 s); None: take that careful path (it converts, repairs and names what it drops)."""
    if not rows or not {type(r) for r in rows} <= {list, tuple}:
        return None
    if set(map(len, rows)) != {len(cols)}:
        return None
    for j in range(len(cols)):
        kinds = set(map(type, map(itemgetter(j), rows)))
        if not kinds <= _PLAIN_CELLS:
            return None
        if str in kinds:
            if len(kinds) > 1:  # text mixed with numbers or None: the careful path
                return None
            text = "".join(map(itemgetter(j), rows))
            if not text.isascii():
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    return None
        elif int in kinds:
            ints = [c for c in map(itemgetter(j), rows) if type(c) is int]
            if min(ints) < -MAX_INT - 1 or max(ints) > MAX_INT:
                return None
    # a copy (the caller may change its lists after the call); the collector is paused
    # for it: 200k new tuples would otherwise set off a full collection or two
    paused = gc.isenabled()
    gc.disable()
    try:
        return tuple(map(tuple, rows))
    finally:
        if paused:
            gc.enable()


def _row(cols: tuple[str, ...], row: object, i: int, on_bad: OnBad | None) -> list[Cell]:
    if isinstance(row, Mapping):
        row = [row.get(c) for c in cols]
    if isinstance(row, (str, bytes)) or not isinstance(row, Sequence):
        raise TypeError(f"rows[{i}] must be a list of cells, got {type(row).__name__}")
    if len(row) != len(cols):
        raise ValueError(f"rows[{i}] has {len(row)} cells; the table has {len(cols)} columns")
    cells = [to_cell(v) for v in row]
    for j, cell in enumerate(cells):
        if type(cell) is str and not cell.isascii():
            cells[j] = check_text(cell, f"rows[{i}][{j}]", on_bad)
        elif isinstance(cell, str):
            cells[j] = str.__str__(cell)
    return cells


MAX_CONFIG_DEPTH = 100


def to_json_value(value: object, path: str = "config", _parents: tuple[int, ...] = ()) -> Any:
    """Config values become JSON-compatible: containers recurse, scalars unwrap, the rest str().
    Ints beyond 64 bits become str (exact; JSON stores cannot hold them as numbers). Keys and
    strings become plain ``str``; a cycle (or nesting deeper than ``MAX_CONFIG_DEPTH``) and
    text UTF-8 cannot encode are a ``ValueError`` naming the path."""
    if len(_parents) > MAX_CONFIG_DEPTH:
        raise ValueError(f"{path[:200]} is nested more than {MAX_CONFIG_DEPTH} levels deep")
    if isinstance(value, str):
        return check_text(value, path)
    if type(value) is int and not -MAX_INT - 1 <= value <= MAX_INT:
        return str(value)
    if value is None or type(value) in (str, bool, int):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (Mapping, list, tuple, set, frozenset)):
        if id(value) in _parents:
            raise ValueError(f"{path[:200]} contains itself (a cycle); configs must be trees")
        _parents = (*_parents, id(value))
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            name = check_text(k if isinstance(k, str) else _safe_str(k), f"{path} key")
            out[name] = to_json_value(v, f"{path}.{name}", _parents)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json_value(v, f"{path}[{i}]", _parents) for i, v in enumerate(value)]
    item = getattr(value, "item", None)
    if item is not None and callable(item) and getattr(value, "ndim", 0) == 0:
        try:
            return to_json_value(item(), path, _parents)
        except ValueError:
            raise
        except Exception:
            pass
    tolist = getattr(value, "tolist", None)
    if tolist is not None and callable(tolist):
        try:
            return to_json_value(tolist(), path, _parents)
        except ValueError:
            raise
        except Exception:
            pass
    if isinstance(value, (int, float)):
        return to_json_value(int(value) if isinstance(value, int) else float(value), path,
                             _parents)
    return check_text(_safe_str(value), path)


def _safe_str(value: object) -> str:
    try:
        return str.__str__(str(value))
    except Exception as exc:
        return f"<unprintable {type(value).__name__}: {exc}>"


def flatten(config: Mapping[str, Any], sep: str = ".", prefix: str = "") -> dict[str, Any]:
    """Flatten nested config for backends with flat params (``a.b.c``); lists stay values."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{sep}{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, sep, name))
        else:
            out[name] = value
    return out
