"""HTTP handlers: each reads query parameters, names a bad one in a 400, and returns the
payload queries.py builds. Handlers are plain functions, so Starlette runs them on its
thread pool and a slow spool read never stalls the event loop."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import wraps
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from trackmux.core.events import ImageEvent, TableEvent, TextEvent
from trackmux.ui import queries, sources, sweepview
from trackmux.ui.store import Store

MAX_TABLE_PAGE = 500


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


def error(status: int, message: str) -> JSON:
    return JSON({"error": message}, status)


def guarded(handler: Callable[..., Response]) -> Callable[[Request], Response]:
    """A handler whose failures become JSON errors; the server itself never goes down."""
    @wraps(handler)
    def run(request: Request) -> Response:
        try:
            with store_of(request).serving():  # background reading steps aside
                return handler(request)
        except queries.BadRequest as exc:
            return error(400, str(exc))
        except (sources.Unavailable, LookupError) as exc:
            return error(404, str(exc).strip("'\""))
        except Exception as exc:  # a damaged spool, a bug: a 500 for this request only
            return error(500, f"{type(exc).__name__}: {exc}")
    return run


def store_of(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def stores_of(request: Request) -> list[str]:
    """The team stores served (``trackmux ui postgresql://...``): their DSNs."""
    stores: list[str] = getattr(request.app.state, "stores", [])
    return stores


def run_list(request: Request, name: str = "runs") -> list[str]:
    text = request.query_params.get(name, "")
    if text == "all":  # every run under the folders (a page opened with #runs=all)
        return list(store_of(request).scan())
    rids = [r for r in text.split(",") if r]
    if not rids:
        raise queries.BadRequest(f"{name}: give one or more run ids, comma-separated")
    return rids


def number(request: Request, name: str, default: float | None = None) -> float | None:
    text = request.query_params.get(name)
    if text in (None, ""):
        return default
    try:
        value = float(text)
    except ValueError:
        raise queries.BadRequest(f"{name} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise queries.BadRequest(f"{name} must be finite, got {text!r}")
    return value


def required(request: Request, name: str) -> str:
    text = request.query_params.get(name)
    if not text:
        raise queries.BadRequest(f"{name} is required")
    return text


def cache_of(request: Request) -> Any:
    cache = store_of(request).cache(request.path_params["rid"])
    if cache is None:
        raise LookupError("no such run under the served folders")
    return cache


@guarded
def runs(request: Request) -> Response:
    store = store_of(request)
    return JSON({"runs": store.rows(), "memory": store.memory(),
                 "sources": {"findings": sources.findings_available(),
                             "samples": sources.samples_available()},
                 "roots": [str(r) for r in store.roots],
                 "boards": len(stores_of(request)),  # team stores: goals live there
                 "goals": any(b.has_goals() for b in getattr(request.app.state, "boards",
                                                            []))})


@guarded
def keys(request: Request) -> Response:
    return JSON(queries.keys(store_of(request), run_list(request)))


@guarded
def series(request: Request) -> Response:
    width = number(request, "width", 1000.0)
    return JSON(queries.series(store_of(request), required(request, "key"), run_list(request),
                               request.query_params.get("x", "step"), number(request, "lo"),
                               number(request, "hi"), int(width or 1000)))


@guarded
def tail(request: Request) -> Response:
    after: dict[str, int] = {}
    for part in required(request, "after").split(","):
        rid, _, seq = part.partition(":")
        if not rid or not seq.isdigit():
            raise queries.BadRequest(f"after: expected RUN:SEQ pairs, got {part!r}")
        after[rid] = int(seq)
    return JSON(queries.tail(store_of(request), required(request, "key"), after,
                             request.query_params.get("x", "step")))


@guarded
def compare(request: Request) -> Response:
    return JSON(queries.compare(store_of(request), run_list(request),
                                request.query_params.get("metric") or None))


@guarded
def path(request: Request) -> Response:
    return JSON(queries.path(store_of(request), run_list(request), required(request, "x"),
                             required(request, "y")))


@guarded
def histograms(request: Request) -> Response:
    return JSON(queries.histograms(cache_of(request), request.query_params.get("key")))


@guarded
def media(request: Request) -> Response:
    return JSON(queries.media(cache_of(request)))


def _event(request: Request) -> Any:
    try:
        seq = int(request.path_params["seq"])
    except ValueError:
        raise queries.BadRequest("seq must be an integer") from None
    return cache_of(request).event_at(seq)


@guarded
def image(request: Request) -> Response:
    event = _event(request)
    if not isinstance(event, ImageEvent):
        return error(404, "no image at that seq")
    return Response(event.png, media_type="image/png",
                    headers={"Cache-Control": "max-age=3600"})


@guarded
def table(request: Request) -> Response:
    event = _event(request)
    if not isinstance(event, TableEvent):
        return error(404, "no table at that seq")
    offset = int(number(request, "offset", 0) or 0)
    limit = int(min(number(request, "limit", 200) or 200, MAX_TABLE_PAGE))
    rows = [[queries.cell(c) for c in row] for row in event.rows[offset:offset + limit]]
    return JSON({"key": event.key, "step": event.step, "columns": list(event.columns),
                 "rows": rows, "offset": offset, "total": len(event.rows)})


@guarded
def text(request: Request) -> Response:
    event = _event(request)
    if not isinstance(event, TextEvent):
        return error(404, "no text at that seq")
    return JSON({"key": event.key, "step": event.step, "text": event.text})


@guarded
def findings(request: Request) -> Response:
    """The doctor's findings; ``stored=1``: only what the live doctor stored (cheap over
    100 runs: a chart's marks never wait for a diagnosis of every run)."""
    store = store_of(request)
    stored = request.query_params.get("stored") == "1"
    out = []
    for rid in run_list(request):
        run_dir = store.path(rid)
        if run_dir is None:
            continue
        found = store.stored_findings(rid) if stored else sources.load_findings(run_dir)
        entry = {"id": rid, "findings": sources.without_coverage(found or []),
                 "diagnosed": found is not None}
        if not stored:  # what the doctor read (issue 42): a scan, so not over many runs
            entry["coverage"] = sources.load_coverage(run_dir)
        out.append(entry)
    return JSON({"runs": out})


@guarded
def sample_keys(request: Request) -> Response:
    run_dir = cache_of(request).run_dir
    return JSON({"keys": sources.list_sample_keys(run_dir)})


@guarded
def sample_step(request: Request) -> Response:
    run_dir = cache_of(request).run_dir
    step = number(request, "step")
    if step is None:
        raise queries.BadRequest("step is required")
    return JSON(sources.step_payload(run_dir, required(request, "key"), int(step)))


@guarded
def sweeps(request: Request) -> Response:
    """The sweeps under the served folders and in the served team stores
    (``available: false`` without Optuna)."""
    return JSON(sweepview.list_sweeps(store_of(request).roots, stores_of(request)))


@guarded
def sweep(request: Request) -> Response:
    """One sweep's trials, best trial and importance; each trial's UI run id if served."""
    store = store_of(request)
    runs = {path: rid for rid, path in store.scan().items()}
    return JSON(sweepview.detail(store.roots, request.path_params["sid"], runs,
                                 stores_of(request)))
