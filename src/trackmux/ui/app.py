"""The ASGI app (Starlette) and a server handle (uvicorn) that tests and the CLI start
and stop.

Starlette + uvicorn: small, well-kept, typed, and enough for a read-only JSON API and a
handful of static files; FastAPI would add pydantic for no gain here, aiohttp a second
async stack. Only three kinds of path answer: the page, files of two fixed folders
listed at start (looked up by name, so ``..`` leads nowhere), and the API, which names
runs by opaque ids. No path a request carries is ever opened.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.routing import Route

from trackmux.ui import routes, sources
from trackmux.ui.security import Guard, is_loopback, new_token
from trackmux.ui.store import DEFAULT_BUDGET_MB, Store

STATIC = Path(__file__).resolve().parent / "static"
ASSETS = Path(__file__).resolve().parent.parent / "report" / "assets"
TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html",
         ".png": "image/png", ".svg": "image/svg+xml", ".txt": "text/plain", "": "text/plain"}
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
       "script-src 'self'; connect-src 'self'; frame-ancestors 'none'")


def listing(folder: Path) -> dict[str, Path]:
    """Regular files under ``folder`` by their relative name (symlinks left out)."""
    out: dict[str, Path] = {}
    if folder.is_dir():
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink():
                out[path.relative_to(folder).as_posix()] = path
    return out


def _file(files: dict[str, Path], name: str) -> Response:
    path = files.get(name)
    if path is None:
        return PlainTextResponse("not found", 404)
    return FileResponse(path, media_type=TYPES.get(path.suffix, "application/octet-stream"),
                        headers={"Cache-Control": "no-cache"})


def build_app(roots: Sequence[Path], *, token: str | None = None, loopback: bool = True,
              budget_mb: int = DEFAULT_BUDGET_MB, warm: bool = True,
              boards: Sequence[str] = ()) -> Guard:
    store = Store(roots, budget_mb)
    from trackmux.ui.board import Board

    goal_boards = [Board(dsn) for dsn in boards]  # team stores served (goals, sweeps)
    static, assets = listing(STATIC), listing(ASSETS)

    def page(request: Request, name: str = "index.html") -> Response:
        response = _file(static, name)
        response.headers["Content-Security-Policy"] = CSP
        return response

    def static_file(request: Request) -> Response:
        return _file(static, request.path_params["name"])

    def asset_file(request: Request) -> Response:
        name = request.path_params["name"]
        if name == "samples.js":  # the samples ledger's own script (its package may be absent)
            path = sources.SAMPLES_SCRIPT
            return (FileResponse(path, media_type="text/javascript") if path.is_file()
                    else PlainTextResponse("not found", 404))
        return _file(assets, name)

    api = [
        Route("/api/runs", routes.runs), Route("/api/keys", routes.keys),
        Route("/api/series", routes.series), Route("/api/tail", routes.tail),
        Route("/api/compare", routes.compare), Route("/api/path", routes.path),
        Route("/api/findings", routes.findings),
        Route("/api/sweeps", routes.sweeps), Route("/api/sweep/{sid}", routes.sweep),
        Route("/api/run/{rid}/histograms", routes.histograms),
        Route("/api/run/{rid}/media", routes.media),
        Route("/api/run/{rid}/image/{seq}", routes.image),
        Route("/api/run/{rid}/table/{seq}", routes.table),
        Route("/api/run/{rid}/text/{seq}", routes.text),
        Route("/api/run/{rid}/samples", routes.sample_keys),
        Route("/api/run/{rid}/samples/step", routes.sample_step),
        Route("/api/goals", routes.guarded(lambda request: routes.JSON(
            {"boards": [b.payload() for b in goal_boards]}))),
        Route("/board", lambda request: page(request, "board.html")),
        # browsers ask for it whatever the page links: a 404 in every session's console
        Route("/favicon.ico", lambda request: _file(static, "favicon.svg")),
    ]
    app = Starlette(routes=[Route("/", page), Route("/static/{name:path}", static_file),
                            Route("/assets/{name:path}", asset_file), *api])
    app.state.store = store
    app.state.stores = list(boards)  # their sweeps are listed too
    app.state.boards = goal_boards  # the run list says whether any has goals
    if warm:
        threading.Thread(target=store.warm, name="trackmux-ui-warm", daemon=True).start()
    guard = Guard(app, token, loopback)
    guard.store = store  # type: ignore[attr-defined]
    return guard


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class Server:
    """uvicorn on a thread: ``start()`` returns once it accepts connections."""

    def __init__(self, roots: Sequence[Path], host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, budget_mb: int = DEFAULT_BUDGET_MB,
                 warm: bool = True, boards: Sequence[str] = ()) -> None:
        import uvicorn

        loopback = is_loopback(host)
        if not loopback and token is None:
            token = new_token()
        self.host, self.port = host, port or free_port(host)
        self.token = token
        self.app = build_app(roots, token=token, loopback=loopback, budget_mb=budget_mb,
                             warm=warm, boards=boards)
        config = uvicorn.Config(self.app, host=host, port=self.port, log_level="warning",
                                access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread: threading.Thread | None = None

    @property
    def store(self) -> Store:
        store: Store = self.app.store  # type: ignore[attr-defined]
        return store

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        base = f"http://{host}:{self.port}/"
        return base + (f"?token={self.token}" if self.token else "")

    def start(self, timeout: float = 20.0) -> Server:
        self.thread = threading.Thread(target=self.server.run, name="trackmux-ui",
                                       daemon=True)
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the UI server did not start on {self.host}:{self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=10)
        for cache in list(self.store.caches.values()):
            cache.close()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
