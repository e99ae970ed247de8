"""Who may talk to the server: a token when it listens beyond this machine (or on
loopback with ``trackmux ui --token``, for a shared login node where every local user
can reach 127.0.0.1), and a Host check on loopback (a web page elsewhere cannot reach
127.0.0.1 through DNS rebinding).

The token is generated at start and printed inside the URL (``/?token=...``). Opening it
trades the token for a cookie (HttpOnly, SameSite=Strict) and redirects (303) to the same
page without the token, so it leaves the address bar and the history, and the page's
JavaScript never sees it: the page's own requests carry the cookie. Every request, the
API included, must carry one of: the cookie, an ``X-Trackmux-Token`` header (scripts) or
``?token=``. Every response says ``Referrer-Policy: no-referrer``, so no URL of the UI
travels to another site as a Referer.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE = "trackmux_token"
HEADER = "x-trackmux-token"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    return secrets.token_urlsafe(24)


class Guard:
    """ASGI middleware: refuse a request without the token (when one is set) or with a
    Host header that is not this server's loopback name."""

    def __init__(self, app: ASGIApp, token: str | None, loopback: bool) -> None:
        self.app = app
        self.token = token
        self.loopback = loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_headers(send, [(b"referrer-policy", b"no-referrer")])
        request = Request(scope)
        refused = self.refuse(request)
        if refused is not None:
            await refused(scope, receive, send)
            return
        if self.token and request.query_params.get("token"):
            cookie = (f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/").encode()
            if request.method in ("GET", "HEAD") and request.url.path == "/":
                # the page: the token leaves the URL (address bar, history, the page's JS)
                rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                location = "/" + (f"?{urlencode(rest)}" if rest else "")
                response = Response(status_code=303, headers={"Location": location,
                                                              "Cache-Control": "no-store"})
                await response(scope, receive, _with_headers(send, [(b"set-cookie", cookie)]))
                return
            if request.cookies.get(COOKIE) != self.token:
                send = _with_headers(send, [(b"set-cookie", cookie)])
        await self.app(scope, receive, send)

    def refuse(self, request: Request) -> Response | None:
        if self.loopback:
            host = (request.headers.get("host") or "").rsplit(":", 1)[0].strip("[]")
            if host and not is_loopback(host):
                return PlainTextResponse(f"refused: Host {host!r} is not this machine "
                                         "(the server listens on loopback only)", 403)
        if self.token is None:
            return None
        # any one that matches: a stale cookie (an earlier server) must not hide a fresh URL
        given = (request.headers.get(HEADER), request.cookies.get(COOKIE),
                 request.query_params.get("token"))
        if any(hmac.compare_digest(g.encode(), self.token.encode()) for g in given if g):
            return None
        return PlainTextResponse("refused: this server needs its token (open the URL it "
                                 "printed, which carries ?token=...)", 401)


def _with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    """``send`` with ``extra`` headers added to the response's start message."""
    async def wrapped(message: dict[str, object]) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))  # type: ignore[call-overload]
            message["headers"] = headers + extra
        await send(message)
    return wrapped  # type: ignore[return-value]
