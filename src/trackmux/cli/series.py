"""``trackmux show RUN --key K``: one metric's series, every point the spool holds (a
rewind's superseded steps left out), as ``step value time`` lines or JSON. A key that is not
a metric of the run is a usage error naming the closest metric keys, or the kind of data
the key holds (a table, an image, ...) and the command that shows it."""

from __future__ import annotations

import difflib
import math
import time
from pathlib import Path

import click
import orjson

from trackmux.cli.output import echo
from trackmux.core.events import MetricsEvent
from trackmux.core.spool.reader import SpoolReader

#: how other kinds of data under the same name are shown instead
ELSEWHERE = {"samples": "trackmux samples RUN --key K", "finding": "trackmux doctor RUN"}


def read_series(run_dir: Path, key: str) -> tuple[list[tuple[int, float, float]], set[str],
                                                  dict[str, str]]:
    """The points of metric ``key`` in spool order, every metric key, and the kind of every
    non-metric key (to say where a key that is not a metric lives)."""
    points: list[tuple[int, float, float]] = []
    metric_keys: set[str] = set()
    other: dict[str, str] = {}
    reader = SpoolReader(run_dir)
    try:
        for event in reader.iter_events(skip=frozenset({"samples"})):  # payloads undecoded
            if isinstance(event, MetricsEvent):
                metric_keys.update(event.data)
                if key in event.data:
                    points.append((event.step, float(event.data[key]), event.time))
            else:
                name = getattr(event, "key", None)
                if isinstance(name, str):
                    other.setdefault(name, event.kind)
    finally:
        reader.close()
    if not points:
        from trackmux.samples.read import list_sample_keys

        for name in list_sample_keys(run_dir):
            other.setdefault(name, "samples")
    return points, metric_keys, other


def print_series(run_dir: Path, key: str, as_json: bool) -> None:
    points, metric_keys, other = read_series(run_dir, key)
    if not points:
        raise click.UsageError(_not_a_metric(key, metric_keys, other, run_dir))
    if as_json:
        echo(orjson.dumps({
            "run": run_dir.name, "key": key,
            "points": [{"step": s, "value": v if math.isfinite(v) else repr(v), "time": t}
                       for s, v, t in points]}).decode())
        return
    echo(f"{key} in run {run_dir.name}: {len(points)} points, steps "
               f"{min(p[0] for p in points)}..{max(p[0] for p in points)}")
    echo(f"{'step':>10}  {'value':>14}  time")
    for step, value, when in points:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))
        echo(f"{step:>10}  {value:>14.7g}  {stamp}.{int(when * 1000) % 1000:03d}")


def _not_a_metric(key: str, metric_keys: set[str], other: dict[str, str],
                  run_dir: Path) -> str:
    if key in other:
        kind = other[key]
        how = ELSEWHERE.get(kind, "trackmux show RUN (its steps), trackmux report or ui")
        return (f"--key {key!r} is a {kind} key of run {run_dir.name}, not a metric; "
                f"see it with {how}")
    close = difflib.get_close_matches(key, sorted(metric_keys), n=5, cutoff=0.5)
    close += [k for k in sorted(metric_keys) if key.lower() in k.lower() and k not in close]
    hint = (f"closest metric keys: {', '.join(close[:5])}" if close else
            f"its {len(metric_keys)} metric keys: {', '.join(sorted(metric_keys)[:10])}"
            + (" ..." if len(metric_keys) > 10 else "") if metric_keys else
            "the run has no metrics")
    return f"no metric {key!r} in run {run_dir.name}; {hint}"
