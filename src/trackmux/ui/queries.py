"""The JSON the UI's API serves, built from run caches. The static export (ui/export.py)
embeds exactly these payloads, so a page and its frozen copy are drawn from one data
shape by one script."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from trackmux.core.values.normalize import flatten
from trackmux.ui import downsample, importance
from trackmux.ui.runcache import RunCache
from trackmux.ui.store import Store

X_MODES = ("step", "time", "relative")
MAX_BUCKETS = 4000
ANSWERS = 32  # chart answers kept per server, the most recently asked ...
ANSWER_BYTES = 32 * 1024 * 1024  # ... within this many bytes of arrays together
REQUEST_BUDGET = 0.15  # seconds of spool reading a chart request does in pages ...
REQUEST_PAGE = 2000  # ... of this many events a run, then ...
REQUEST_FIRST = 100  # ... this many a run (a beginning for every run, a live run's tail)


class BadRequest(ValueError):
    """A query parameter is wrong; the message names it."""


def _finite(values: Any) -> list[float | None]:
    """JSON has no NaN: gaps become null (uPlot draws them as breaks in the line)."""
    return [None if not math.isfinite(v) else float(v) for v in values]


def points(cache: RunCache, key: str, xmode: str, after: int = 0
           ) -> tuple[np.ndarray, np.ndarray, int]:
    """x, y of ``key`` in one run (only points with seq > ``after``) and the last seq.

    The full arrays are kept on the cache until its next read brings new events, so a
    chart of 100 runs asked again (zoom, another page) copies nothing."""
    with cache.lock:
        series = cache.keys.get(key)
        if series is None:
            return np.empty(0), np.empty(0), cache.cursor
        if after:
            rows = np.array(series.rows, dtype=np.int64)
            seqs = np.array(cache.row_seq, dtype=np.int64)[rows]
            keep = seqs > after
            rows, y = rows[keep], np.array(series.values, dtype=np.float64)[keep]
            return _x(cache, rows, xmode), y, cache.cursor
        memo = cache.arrays.get((key, xmode))
        if memo is not None and memo[0] == len(series.values):
            return memo[1], memo[2], cache.cursor
        rows = np.array(series.rows, dtype=np.int64)
        x, y = _x(cache, rows, xmode), np.array(series.values, dtype=np.float64)
        if len(cache.arrays) >= 8:  # a few keys per run at a time: memory stays bounded
            cache.arrays.pop(next(iter(cache.arrays)))
        cache.arrays[(key, xmode)] = (y.size, x, y)
        return x, y, cache.cursor


def _x(cache: RunCache, rows: np.ndarray, xmode: str) -> np.ndarray:
    if xmode == "step":
        steps: np.ndarray = np.array(cache.row_step, dtype=np.float64)[rows]
        return steps
    times = np.array(cache.row_time, dtype=np.float64)
    x: np.ndarray = times[rows]
    if xmode == "relative" and times.size:
        x = x - times[0]
    return x


def bounded(store: Store, rids: Sequence[str], whole: bool = False
            ) -> list[tuple[str, RunCache]]:
    """The runs' caches, each brought up to date as far as a request may read: pages
    while the request is within ``REQUEST_BUDGET`` seconds, then ``REQUEST_FIRST`` events
    a run. A run not read to its end is ``partial`` (the answer says so, the page asks
    again, and the warm-up reads on): a chart of 100 big runs answers at once, with
    curves that fill in, instead of after every run's whole read. ``whole``: read every
    run to its end (the static report)."""
    deadline = time.monotonic() + REQUEST_BUDGET
    out = []
    for rid in rids:
        limit = (None if whole else REQUEST_PAGE if time.monotonic() < deadline
                 else REQUEST_FIRST)
        cache = store.cache(rid, limit=limit)
        if cache is not None:
            out.append((rid, cache))
    return out


def check_xmode(xmode: str) -> str:
    if xmode not in X_MODES:
        raise BadRequest(f"x must be one of {', '.join(X_MODES)}, got {xmode!r}")
    return xmode


def series(store: Store, key: str, rids: Sequence[str], xmode: str = "step",
           lo: float | None = None, hi: float | None = None, width: int = 1000,
           whole: bool = False) -> dict[str, Any]:
    """One metric of several runs on one x array: exact in a narrow range, min/max per
    bucket over a wide one (downsample.py). ``whole``: every run read to its end first,
    never a partial answer (see bounded)."""
    check_xmode(xmode)
    buckets = max(10, min(int(width), MAX_BUCKETS))
    loaded, partial = [], set()
    for rid, cache in bounded(store, rids, whole):
        x, y, cursor = points(cache, key, xmode)
        loaded.append((rid, x, y, cursor))
        if cache.partial:
            partial.add(rid)
    asked = (key, xmode, lo, hi, buckets, tuple((rid, c) for rid, _, _, c in loaded))
    with store.lock:
        answer = store.answers.get(asked)
        if answer is not None:
            store.answers.move_to_end(asked)
            return answer
    answer = _series(key, xmode, lo, hi, buckets, loaded)
    answer["nbytes"] = answer["x"].nbytes + sum(r["y"].nbytes for r in answer["runs"])
    answer["partial"] = bool(partial)
    for run in answer["runs"]:
        run["partial"] = run["id"] in partial
    if partial:  # what was read so far: asked again, it is built again
        return answer
    with store.lock:
        store.answers[asked] = answer
        total = sum(a["nbytes"] for a in store.answers.values())
        while len(store.answers) > 1 and (len(store.answers) > ANSWERS
                                          or total > ANSWER_BYTES):
            total -= store.answers.popitem(last=False)[1]["nbytes"]
    return answer


def _series(key: str, xmode: str, lo: float | None, hi: float | None, buckets: int,
            loaded: list[tuple[str, np.ndarray, np.ndarray, int]]) -> dict[str, Any]:
    spans = [downsample.window(x, y, lo, hi)[0] for _, x, y, _ in loaded]
    nonempty = [s for s in spans if s.size]
    span = ((lo if lo is not None else min(float(s[0]) for s in nonempty),
             hi if hi is not None else max(float(s[-1]) for s in nonempty))
            if nonempty else None)
    parts = [downsample.sample(x, y, lo, hi, buckets, span) for _, x, y, _ in loaded]
    if any(not p.exact for p in parts):  # mixed: put the exact runs on the grid too
        parts = [p if not p.exact or span is None else
                 downsample.minmax(p.x, p.y, span[0], span[1], buckets) for p in parts]
    xs, ys = downsample.align(parts)
    exact = all(p.exact for p in parts)
    # NaN goes out as null (orjson); bucket extremes need no more than float32's digits
    return {"key": key, "x_mode": xmode, "x": xs, "exact": exact,
            "runs": [{"id": rid, "y": y if exact else y.astype(np.float32),
                      "cursor": cursor, "nonfinite": int(np.count_nonzero(~np.isfinite(full)))}
                     for (rid, _, full, cursor), y in zip(loaded, ys, strict=True)]}


def tail(store: Store, key: str, after: dict[str, int], xmode: str = "step"
         ) -> dict[str, Any]:
    """The points of ``key`` each run committed after the seq the page already has: a
    live page asks for this every second and never re-reads a history."""
    check_xmode(xmode)
    out = []
    for rid, cache in bounded(store, list(after)):
        x, y, cursor = points(cache, key, xmode, after=after[rid])
        out.append({"id": rid, "x": x.tolist(), "y": _finite(y), "cursor": cursor,
                    "partial": cache.partial})
    return {"key": key, "x_mode": xmode, "runs": out,
            "partial": any(run["partial"] for run in out)}


def keys(store: Store, rids: Sequence[str], whole: bool = False) -> dict[str, Any]:
    """Metric keys of the runs grouped by prefix (before the first '/'), as the report
    (``whole``: of every run read to its end, see bounded)."""
    groups: dict[str, list[str]] = {}
    for _, cache in bounded(store, rids, whole):
        with cache.lock:
            names = list(cache.keys)
        for key in names:
            prefix = key.split("/", 1)[0] if "/" in key else "other"
            bucket = groups.setdefault(prefix, [])
            if key not in bucket:
                bucket.append(key)
    if "other" in groups:
        groups["other"] = groups.pop("other")
    return {"groups": groups}


def compare(store: Store, rids: Sequence[str], metric: str | None,
            share: float = 0.1) -> dict[str, Any]:
    """Config differences between the runs and, for ``metric``, each differing key's
    importance for its final value (importance.py states the method)."""
    runs, configs, targets = [], [], []
    for rid in rids:
        cache = store.cache(rid)
        if cache is None:
            continue
        with cache.lock:
            flat = flatten(cache.config) if cache.config else {}
            target = cache.last_values(metric, share) if metric else None
        runs.append({"id": rid, "name": cache.run_dir.name, "target": target})
        configs.append(flat)
        targets.append(target)
    all_keys: list[str] = []
    for flat in configs:
        all_keys.extend(k for k in flat if k not in all_keys)
    rows = []
    for key in all_keys:
        values = [flat.get(key, "—") if key in flat else "—" for flat in configs]
        shown = [v if isinstance(v, (str, int, float, bool)) or v is None else repr(v)
                 for v in values]
        rows.append({"key": key, "values": shown,
                     "differs": len({repr(v) for v in values}) > 1})
    differing = [{k: v for k, v in flat.items() if any(r["key"] == k and r["differs"]
                                                       for r in rows)} for flat in configs]
    result: dict[str, Any] = {"runs": runs, "config": rows, "metric": metric,
                              "method": importance.METHOD, "importance": []}
    if metric:
        result["importance"] = [imp.as_json() for imp in
                                importance.importances(differing, targets)]
    return result


def path(store: Store, rids: Sequence[str], xkey: str, ykey: str,
         limit: int = 2000) -> dict[str, Any]:
    """One metric against another at the steps where both were logged (reward vs KL)."""
    out = []
    for rid in rids:
        cache = store.cache(rid)
        if cache is None:
            continue
        sx, vx, _ = points(cache, xkey, "step")
        sy, vy, _ = points(cache, ykey, "step")
        common, ix, iy = np.intersect1d(sx, sy, return_indices=True)
        if common.size > limit:  # thin evenly; a path keeps its order
            pick = np.linspace(0, common.size - 1, limit).round().astype(np.int64)
            common, ix, iy = common[pick], ix[pick], iy[pick]
        out.append({"id": rid, "step": common.tolist(), "x": _finite(vx[ix]),
                    "y": _finite(vy[iy])})
    return {"x_key": xkey, "y_key": ykey, "runs": out}


def histograms(cache: RunCache, key: str | None = None, limit: int = 200
               ) -> dict[str, Any]:
    """Each histogram key's distributions over steps (at most ``limit`` per key)."""
    with cache.lock:
        kept = {k: list(v) for k, v in cache.histograms.items() if key in (None, k)}
    out = {}
    for name, items in kept.items():
        if len(items) > limit:
            pick = sorted({round(i * (len(items) - 1) / (limit - 1)) for i in range(limit)})
            items = [items[i] for i in pick]
        out[name] = [{"step": h.step, "counts": list(h.counts), "edges": _finite(h.edges),
                      "count": h.count, "nonfinite": h.nonfinite} for h in items]
    return {"histograms": out}


def media(cache: RunCache) -> dict[str, Any]:
    """The images, tables and texts of a run by key, each a list of (seq, step)."""
    def index(refs: Any) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for ref in refs:
            out.setdefault(ref.key, []).append({"seq": ref.seq, "step": ref.step,
                                                "size": ref.size})
        for items in out.values():
            items.sort(key=lambda item: (item["step"], item["seq"]))
        return out

    with cache.lock:
        return {"images": index(cache.images), "tables": index(cache.tables),
                "texts": index(cache.texts)}


def cell(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
