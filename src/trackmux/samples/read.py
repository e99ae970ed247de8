"""Reading the rollout ledger back from a run's spool: the contract the report, the UI, the
doctor and ``trackmux samples`` code against.

- :func:`list_sample_keys`: ``{key: [steps]}`` from the small event rows only;
- :func:`step_payload`: one step of one key as a JSON-able dict for a browser (columns,
  rows, groups, reward components, token arrays); only that step's payload is decoded;
- :func:`iter_samples`: dict rows (``key``, ``step``, ``sample`` and every column).

Events superseded by a resumed attempt's ``rewind_to`` are skipped, as delivery skips
them; rows whose CRC or payload hash fails are skipped and counted in
:attr:`Ledger.damaged`. Reading never writes to the spool (read-only connection), so it is
safe beside a live writer.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from trackmux.core.events import SamplesEvent
from trackmux.core.spool import codec, samplepack
from trackmux.core.spool.writer import SPOOL_FILE, connect
from trackmux.core.values import trajectory

GROUP_COLUMNS = ("group", "uid", "group_id")
REWARD_COLUMNS = ("reward", "score")
#: columns shown as reward components: ``reward/<name>`` (also ``reward_<name>``)
COMPONENT_PREFIXES = ("reward/", "reward_", "rewards/")


@dataclass
class StepRows:
    """The samples of one key at one step (several calls at one step are concatenated)."""

    key: str
    step: int
    columns: list[str]
    values: dict[str, list[Any]]  # cells; a trajectory column's are decoded message lists
    tokens: dict[str, tuple[str, list[int], list[list[Any]] | None]] = field(
        default_factory=dict)  # name -> (dtype, lengths, values or None when not decoded)
    trajectories: list[str] = field(default_factory=list)  # conversation columns

    @property
    def count(self) -> int:
        return len(next(iter(self.values.values()))) if self.values else 0


@dataclass
class _Ref:
    seq: int
    step: int
    time: float
    body: bytes
    crc: int
    header: dict[str, Any]


class Ledger:
    """The samples events of one run (opened read-only)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        path = self.run_dir / SPOOL_FILE
        if not path.is_file():
            raise FileNotFoundError(f"no spool at {path}")
        self._conn = connect(path, readonly=True)
        self.damaged: list[int] = []
        self.errors: list[str] = []  # what a damaged spool did not let us read
        self._refs: dict[str, dict[int, list[_Ref]]] = {}
        self._load()

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _load(self) -> None:
        try:
            rows = self._conn.execute(
                "SELECT e.seq, e.step, e.time, e.body, e.crc FROM events e WHERE "
                "e.kind = 'samples' AND NOT EXISTS (SELECT 1 FROM superseded s "
                "WHERE s.seq = e.seq) ORDER BY e.seq").fetchall()
        except sqlite3.OperationalError:  # a spool from before attempts: no superseded
            rows = self._select_plain()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # a damaged spool
            self.errors.append(f"samples index: {exc}")
            rows = []
        for seq, step, ts, body, crc in rows:
            if not isinstance(body, bytes) or not codec.crc_ok(seq, "samples", step, ts,
                                                               body, crc):
                self.damaged.append(seq)
                continue
            header = orjson.loads(body)
            self._refs.setdefault(header["key"], {}).setdefault(step, []).append(
                _Ref(seq, step, ts, body, crc, header))

    def _select_plain(self) -> list[Any]:
        try:
            return self._conn.execute(
                "SELECT seq, step, time, body, crc FROM events WHERE kind = 'samples' "
                "ORDER BY seq").fetchall()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            self.errors.append(f"samples index: {exc}")
            return []

    def keys(self) -> dict[str, list[int]]:
        return {key: sorted(steps) for key, steps in sorted(self._refs.items())}

    def _payload(self, ref: _Ref) -> bytes | None:
        try:
            found = self._conn.execute("SELECT data FROM blobs WHERE hash = ?",
                                       (ref.header["blob"],)).fetchone()
        except sqlite3.DatabaseError as exc:
            self.errors.append(f"samples payload of event {ref.seq}: {exc}")
            found = None
        if found is None or not codec.blob_ok(ref.header["blob"], found[0]):
            self.damaged.append(ref.seq)
            return None
        return bytes(found[0])

    def step(self, key: str, step: int, tokens: bool = True,
             limit: int | None = None) -> StepRows | None:
        """The samples of ``key`` at ``step`` (None if there are none); token values are
        decoded only with ``tokens=True`` (lengths always), and only for the first
        ``limit`` samples of each call when given (the others get ``[]``)."""
        refs = self._refs.get(key, {}).get(step)
        if not refs:
            return None
        out = StepRows(key, step, [], {})
        for ref in refs:
            payload = self._payload(ref)
            if payload is None:
                continue
            arrays: list[tuple[str, str, list[int], list[list[Any]] | None]]
            if tokens:
                event = samplepack.unpack(ref.header, payload, ref.step, ref.time, ref.seq)
                columns, values = event.columns, event.values
                conversations = event.trajectories
                arrays = [(t.name, t.dtype, list(t.lengths), _token_values(t, limit))
                          for t in event.tokens]
            else:
                header, _ = samplepack.read_header(payload)
                columns, values = samplepack.columns_of(header)
                conversations = tuple(header.get("trajectories", ()))
                arrays = [(t["name"], t["dtype"], header["lengths"][t["lengths"]], None)
                          for t in header["tokens"]]
            count = len(values[0]) if values else (len(arrays[0][2]) if arrays else 0)
            cells: tuple[tuple[Any, ...], ...] = values
            if conversations:
                cells = tuple(tuple(trajectory.decode(v) for v in column)
                               if name in conversations else column
                               for name, column in zip(columns, values, strict=True))
                out.trajectories.extend(c for c in conversations
                                        if c not in out.trajectories)
            _append(out, columns, cells, arrays, count)
        return out

    def events(self, key: str, step: int) -> list[SamplesEvent]:
        """The whole events of ``key`` at ``step`` (token arrays packed, as logged)."""
        found = []
        for ref in self._refs.get(key, {}).get(step, []):
            payload = self._payload(ref)
            if payload is not None:
                found.append(samplepack.unpack(ref.header, payload, ref.step, ref.time,
                                               ref.seq))
        return found


def _token_values(array: Any, limit: int | None) -> list[list[Any]]:
    if limit is None or limit >= len(array.lengths):
        return samplepack.token_values(array)
    return [samplepack.token_row(array, i) if i < limit else []
            for i in range(len(array.lengths))]


def _append(out: StepRows, columns: tuple[str, ...], values: tuple[tuple[Any, ...], ...],
            arrays: list[tuple[str, str, list[int], list[list[Any]] | None]],
            count: int) -> None:
    before = out.count
    for name in columns:
        if name not in out.values:
            out.columns.append(name)
            out.values[name] = [None] * before
    given = dict(zip(columns, values, strict=True))
    for name in out.columns:
        out.values[name].extend(given.get(name, (None,) * count))
    for name, dtype, lengths, vals in arrays:
        known = out.tokens.get(name)
        if known is None:
            known = out.tokens[name] = (dtype, [0] * before,
                                        None if vals is None else [[] for _ in range(before)])
        known[1].extend(lengths)
        if known[2] is not None and vals is not None:
            known[2].extend(vals)
    for _, lengths, vals in out.tokens.values():  # arrays this call did not have
        if len(lengths) < before + count:
            lengths.extend([0] * (before + count - len(lengths)))
            if vals is not None:
                vals.extend([] for _ in range(before + count - len(vals)))


def list_sample_keys(run_dir: str | Path) -> dict[str, list[int]]:
    """Every samples key of the run and the steps it was logged at (ascending)."""
    with Ledger(run_dir) as ledger:
        return ledger.keys()


def _json_number(value: Any, digits: int | None = None) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return float(f"{value:.{digits}g}") if digits else value
    return value


def derived_columns(rows: StepRows) -> dict[str, list[Any]]:
    """Columns every view offers besides the logged ones: ``length`` (tokens of the first
    token array, else characters of ``response``) unless a column of that name exists;
    for each conversation column ``turns``, ``tool_calls``, ``tool_errors`` and ``tools``
    (core/values/trajectory.py's summary; prefixed ``<column>/`` after the first)."""
    out: dict[str, list[Any]] = {}
    if "length" in rows.values:
        pass
    elif rows.tokens:
        out["length"] = list(next(iter(rows.tokens.values()))[1])
    elif isinstance(rows.values.get("response"), list):
        out["length"] = [len(v) if isinstance(v, str) else None
                         for v in rows.values["response"]]
    for n, name in enumerate(rows.trajectories):
        summaries = [trajectory.summary_columns(v) for v in rows.values.get(name, [])]
        for field_name in TRAJECTORY_COLUMNS:
            column = field_name if n == 0 else f"{name}/{field_name}"
            if column not in rows.values and column not in out:
                out[column] = [s[field_name] for s in summaries]
    return out


#: what ``derived_columns`` adds per conversation column (``--where`` filters on them)
TRAJECTORY_COLUMNS = ("turns", "tool_calls", "tool_errors", "tools")


def step_payload(run_dir: str | Path, key: str, step: int, *, max_rows: int | None = None,
                 tokens: bool = True, digits: int = 4) -> dict[str, Any]:
    """One step of ``key`` as JSON-able data for a browser (docs/samples.md, "Reading").

    ``columns`` and ``rows`` (row-major, one list per sample; non-finite numbers as null),
    ``kinds`` (number/text/bool per column, ``trajectory`` for a conversation column,
    whose cells are message lists), ``trajectories`` (those columns), ``group`` and
    ``reward`` (the columns that play those roles, or null), ``components`` (reward
    component columns), ``groups`` (group value -> row indices), ``tokens`` (name ->
    {dtype, values: per row}, floats rounded to ``digits`` significant digits),
    ``steps`` (every step of ``key``), ``count`` (samples at this step) and ``shown``
    (rows included, at most ``max_rows``).
    Raises KeyError when the run has no such key or step."""
    with Ledger(run_dir) as ledger:
        steps = ledger.keys().get(key)
        if steps is None:
            raise KeyError(f"no samples under {key!r}; keys: {sorted(ledger.keys())}")
        rows = ledger.step(key, step, tokens=tokens, limit=max_rows)
        if rows is None:
            raise KeyError(f"no samples of {key!r} at step {step}; steps: {steps}")
    extra = derived_columns(rows)
    columns = [*rows.columns, *extra]
    values = {**rows.values, **extra}
    count = rows.count
    shown = list(range(count if max_rows is None else min(count, max_rows)))
    group = next((c for c in GROUP_COLUMNS if c in values), None)
    reward = next((c for c in REWARD_COLUMNS if c in values), None)
    groups: dict[str, list[int]] = {}
    if group is not None:
        for i in shown:
            groups.setdefault(str(values[group][i]), []).append(i)
    kinds = {c: "trajectory" if c in rows.trajectories else _kind(values[c])
             for c in columns}  # ``tools`` (lists of names) is text to a browser
    return {
        "key": key, "step": step, "steps": steps, "count": count, "shown": len(shown),
        "columns": columns, "trajectories": list(rows.trajectories),
        "kinds": kinds,
        "rows": [[_json_number(values[c][i]) for c in columns] for i in shown],
        "group": group, "reward": reward,
        "components": [c for c in columns if c != reward and c.startswith(COMPONENT_PREFIXES)],
        "groups": groups,
        "tokens": {name: {"dtype": dtype,
                          "values": [[_json_number(v, digits) for v in vals[i]]
                                     if vals is not None else None for i in shown]}
                   for name, (dtype, _, vals) in rows.tokens.items()},
    }


def _kind(values: list[Any]) -> str:
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {int, float}:
        return "number"
    if kinds == {bool}:
        return "bool"
    return "text"


def iter_samples(run_dir: str | Path, key: str | None = None, step: int | None = None, *,
                 tokens: bool = False) -> Iterator[dict[str, Any]]:
    """Every sample (of ``key``, at ``step``, when given) as a dict: ``key``, ``step``,
    ``sample`` (its row in the step), each column, ``length``; with ``tokens=True`` also
    ``tokens`` (name -> values)."""
    with Ledger(run_dir) as ledger:
        for name, steps in ledger.keys().items():
            if key is not None and name != key:
                continue
            for at in steps:
                if step is not None and at != step:
                    continue
                rows = ledger.step(name, at, tokens=tokens)
                if rows is None:
                    continue
                extra = derived_columns(rows)
                values = {**rows.values, **extra}
                for i in range(rows.count):
                    row: dict[str, Any] = {"key": name, "step": at, "sample": i}
                    for column, cells in values.items():
                        row.setdefault(column, cells[i])
                    if tokens:
                        row["tokens"] = {t: (vals[i] if vals is not None else None)
                                         for t, (_, _, vals) in rows.tokens.items()}
                    yield row
