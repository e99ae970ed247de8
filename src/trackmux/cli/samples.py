"""``trackmux samples RUN``: the samples a run logged (``log_samples``), read from its spool.

Without ``--step`` it lists every key and its steps; with ``--step`` (or ``--last``) it
shows that step's samples, filtered (``--where``, ``--group``), sorted and cut
(``--limit``), as a compact table or, with ``--json``, one JSON object. Only the chosen
step's payload is decoded. ``--where``/``--group`` without ``--step`` or ``--last`` search
every step (of ``--key``, else of every key) and say which steps matched: a filter is
never dropped in silence. Bad usage (an unknown key, step, column or a bad expression)
exits with status 2 and names the problem.
"""

from __future__ import annotations

from typing import Any

import click
import orjson

from trackmux.cli.output import echo
from trackmux.core.errors import SpoolUnreadableError, SpoolUnsafeError
from trackmux.core.spool.runs import resolve_run
from trackmux.core.terminal import for_terminal
from trackmux.samples.read import (
    COMPONENT_PREFIXES,
    GROUP_COLUMNS,
    REWARD_COLUMNS,
    Ledger,
    StepRows,
    derived_columns,
)
from trackmux.samples.where import WhereError, compile_where

TEXT_WIDTH = 48


@click.command()
@click.argument("run_arg", metavar="RUN")
@click.option("--key", "-k", help="Samples key (needed when the run has several).")
@click.option("--step", "-s", type=int, help="Show the samples of this step.")
@click.option("--last", is_flag=True, help="Show the last step of the key.")
@click.option("--sort", "sort_by", help="Sort by this column (prefix '-' for descending).")
@click.option("--where", "where", help='Filter, e.g. "reward < 0.2 and length > 100".')
@click.option("--group", "group", help="Only the samples of this group (uid/group column).")
@click.option("--limit", type=click.IntRange(min=0), default=20, show_default=True,
              help="Rows to print (0: all); --json prints all.")
@click.option("--tokens", "with_tokens", is_flag=True,
              help="With --json: include the per-token arrays.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--dir", "root", type=click.Path(file_okay=False),
              help="Spool root for run ids (default $TRACKMUX_DIR or ./trackmux).")
def samples(run_arg: str, key: str | None, step: int | None, last: bool, sort_by: str | None,
            where: str | None, group: str | None, limit: int, with_tokens: bool,
            as_json: bool, root: str | None) -> None:
    """Show the samples (rollouts, generations) a run logged."""
    try:
        run_dir = resolve_run(run_arg, root)
        ledger = Ledger(run_dir)
    except (FileNotFoundError, SpoolUnsafeError, SpoolUnreadableError) as exc:
        raise click.UsageError(str(exc)) from None
    with ledger:
        keys = ledger.keys()
        searching = step is None and not last and (where is not None or group is not None)
        if key is not None and key not in keys:
            raise click.UsageError(f"no samples under --key {key!r}; keys: {sorted(keys)}")
        if searching:
            chosen = [key] if key is not None else sorted(keys)
            _search(ledger, run_dir.name, {k: keys[k] for k in chosen}, where, group,
                    sort_by, limit, as_json)
            return
        if key is None and step is None and not last:
            if sort_by:
                raise click.UsageError("--sort orders the samples of one step: give --step N "
                                       "or --last, or --where/--group to search every step")
            _list_keys(run_dir.name, keys, as_json)
            return
        if key is None:
            if len(keys) != 1:
                raise click.UsageError(f"--key is needed: this run has samples under "
                                       f"{sorted(keys) or 'no key'}")
            key = next(iter(keys))
        if step is None:
            step = keys[key][-1]
        if step not in keys[key]:
            raise click.UsageError(f"no samples of {key!r} at --step {step}; steps: "
                                   f"{_ranges(keys[key])}")
        rows = ledger.step(key, step, tokens=with_tokens and as_json)
    assert rows is not None
    columns, table, group_col = _step_table(rows, with_tokens and as_json)
    table = _filtered(table, columns, group_col, group, where)
    table = _sorted(table, columns, sort_by)
    if as_json:
        echo(orjson.dumps({"run": run_dir.name, "key": key, "step": step,
                                 "count": rows.count, "matched": len(table),
                                 "rows": table},
                                option=orjson.OPT_SERIALIZE_NUMPY).decode())
        return
    header = (f"{key} @ step {step}: {len(table)} of {rows.count} samples"
              + (f" (first {limit})" if 0 < limit < len(table) else ""))
    _print_table(header, table, columns, group_col, limit)


def _step_table(rows: StepRows, with_tokens: bool
                ) -> tuple[list[str], list[dict[str, Any]], str | None]:
    """One step's samples as dict rows (``sample`` first, derived columns added)."""
    extra = derived_columns(rows)
    values = {**rows.values, **extra}
    columns = [*rows.columns, *extra]
    table: list[dict[str, Any]] = [{"sample": i, **{c: values[c][i] for c in columns}}
                                   for i in range(rows.count)]
    if with_tokens:
        for i, row in enumerate(table):
            row["tokens"] = {n: (v[i] if v is not None else None)
                             for n, (_, _, v) in rows.tokens.items()}
    group_col = next((c for c in GROUP_COLUMNS if c in values), None)
    return columns, table, group_col


def _filtered(table: list[dict[str, Any]], columns: list[str], group_col: str | None,
              group: str | None, where: str | None) -> list[dict[str, Any]]:
    if group is not None:
        if group_col is None:
            raise click.UsageError(f"--group: these samples have no group column "
                                   f"({', '.join(GROUP_COLUMNS)})")
        table = [r for r in table if str(r[group_col]) == group]
    if where:
        try:
            predicate = compile_where(where, ["sample", *columns])
        except WhereError as exc:
            raise click.UsageError(for_terminal(f"--where: {exc}")) from None  # names columns
        table = [r for r in table if predicate(r)]
    return table


def _sorted(table: list[dict[str, Any]], columns: list[str],
            sort_by: str | None) -> list[dict[str, Any]]:
    if not sort_by:
        return table
    name = sort_by.lstrip("-")
    if name not in columns and name not in ("sample", "step"):
        raise click.UsageError(f"--sort: unknown column {name!r}; columns: "
                               f"{', '.join(columns)}")
    present = [r for r in table if r.get(name) is not None]
    missing = [r for r in table if r.get(name) is None]
    try:
        present.sort(key=lambda r: r[name], reverse=sort_by.startswith("-"))
    except TypeError:
        present.sort(key=lambda r: str(r[name]), reverse=sort_by.startswith("-"))
    return present + missing


def _search(ledger: Ledger, run: str, keys: dict[str, list[int]], where: str | None,
            group: str | None, sort_by: str | None, limit: int, as_json: bool) -> None:
    """``--where``/``--group`` over every step of ``keys``: the matching samples, each with
    its key and step, and the steps that matched. A step whose samples lack a column the
    filter names (or a group column) is skipped and counted; if every step lacks it, the
    error of a single step is given."""
    matched: list[dict[str, Any]] = []
    hits: dict[str, list[int]] = {}
    skipped: dict[str, list[int]] = {}
    columns_seen: list[str] = []
    first_skip: str | None = None
    for key, steps in keys.items():
        for step in steps:
            rows = ledger.step(key, step, tokens=False)
            if rows is None:
                continue
            columns, table, group_col = _step_table(rows, False)
            try:
                table = _filtered(table, columns, group_col, group, where)
            except click.UsageError as exc:
                if "unknown column" not in exc.message and "no group column" not in \
                        exc.message:
                    raise
                skipped.setdefault(key, []).append(step)
                first_skip = first_skip or exc.message
                continue
            columns_seen += [c for c in columns if c not in columns_seen]
            if table:
                hits.setdefault(key, []).append(step)
            matched += [{"key": key, "step": step, **row} for row in table]
    searched = sum(len(steps) for steps in keys.values())
    if first_skip is not None and sum(len(v) for v in skipped.values()) == searched:
        raise click.UsageError(first_skip)
    matched = _sorted(matched, columns_seen, sort_by)
    if as_json:
        echo(orjson.dumps({"run": run, "where": where, "group": group,
                                 "searched": keys, "matched_steps": hits,
                                 "skipped_steps": skipped, "matched": len(matched),
                                 "rows": matched},
                                option=orjson.OPT_SERIALIZE_NUMPY).decode())
        return
    what = " and ".join(x for x in (f"--where {where!r}" if where else "",
                                    f"--group {group!r}" if group is not None else "") if x)
    echo(f"{what}: searched every step ({searched} steps of "
               f"{', '.join(keys) or 'no key'}); {len(matched)} samples matched")
    for key, steps in hits.items():
        echo(f"  {key}: steps {_ranges(steps)}")
    for key, steps in skipped.items():
        echo(f"  {key}: steps {_ranges(steps)} skipped ({first_skip})")
    if not matched:
        return
    header = ("matches" + (f" (first {limit})" if 0 < limit < len(matched) else ""))
    _print_table(header, matched, columns_seen, None, limit, lead=["key", "step"])


def _ranges(steps: list[int]) -> str:
    if not steps:
        return "none"
    parts, start, prev = [], steps[0], steps[0]
    for s in [*steps[1:], None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if s is not None:
            start = prev = s
    return ", ".join(parts)


def _list_keys(run: str, keys: dict[str, list[int]], as_json: bool) -> None:
    if as_json:
        echo(orjson.dumps({"run": run, "keys": keys}).decode())
        return
    if not keys:
        echo(f"run {run} has no samples (log them with run.log_samples)")
        return
    for key, steps in keys.items():
        echo(f"{key}: {len(steps)} steps ({_ranges(steps)})")
    echo("show one with: trackmux samples RUN --key KEY --step N")


def _cell(value: Any, width: int) -> str:
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        value = f"{len(value)} messages"  # a conversation: --json gives it whole
    elif isinstance(value, list):
        value = ",".join(map(str, value))
    text = f"{value:.4g}" if isinstance(value, float) else "" if value is None else str(value)
    text = text.replace("\n", "⏎")
    return text if len(text) <= width else text[:width - 1] + "…"


def _print_table(header: str, table: list[dict[str, Any]], columns: list[str],
                 group_col: str | None, limit: int, lead: list[str] | None = None) -> None:
    reward = next((c for c in REWARD_COLUMNS if c in columns), None)
    order = [*(lead or []), "sample", *([group_col] if group_col else []),
             *([reward] if reward else []),
             *[c for c in columns if c.startswith(COMPONENT_PREFIXES) and c != reward]]
    order += [c for c in columns if c not in order and c not in ("prompt", "response")]
    order += [c for c in ("prompt", "response") if c in columns]
    shown = table if limit == 0 else table[:limit]
    widths = {c: TEXT_WIDTH if c in ("prompt", "response") else 12 for c in order}
    widths.update({"key": 24} if lead else {})
    echo(header)
    echo("  ".join(_cell(c, widths[c]).ljust(min(widths[c], 12)) for c in order))
    for row in shown:
        echo("  ".join(_cell(row.get(c), widths[c]).ljust(min(widths[c], 12))
                             for c in order))
