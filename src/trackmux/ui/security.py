"""Who may talk to the server: a token when it listens beyond this machine, and a Host
check on loopback (a web page elsewhere cannot reach 127.0.0.1 through DNS rebinding).

The token is generated at start and printed inside the URL (``/?token=...``). The first
page load trades it for a cookie (HttpOnly, SameSite=Strict); every request, the API
included, must carry one of: the cookie, an ``X-Trackmux-Token`` header or ``?token=``.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets

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
        request = Request(scope)
        refused = self.refuse(request)
        if refused is not None:
            await refused(scope, receive, send)
            return
        if self.token and request.query_params.get("token") and \
                request.cookies.get(COOKIE) != self.token:
            async def send_with_cookie(message: dict[str, object]) -> None:
                if message["type"] == "http.response.start":
                    cookie = (f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/")
                    headers = list(message.get("headers", []))  # type: ignore[call-overload]
                    headers.append((b"set-cookie", cookie.encode()))
                    message["headers"] = headers
                await send(message)
            await self.app(scope, receive, send_with_cookie)  # type: ignore[arg-type]
            return
        await self.app(scope, receive, send)

    def refuse(self, request: Request) -> Response | None:
        if self.loopback:
            host = (request.headers.get("host") or "").rsplit(":", 1)[0].strip("[]")
            if host and not is_loopback(host):
                return PlainTextResponse(f"refused: Host {host!r} is not this machine "
                                         "(the server listens on loopback only)", 403)
        if self.token is None:
            return None
        given = (request.headers.get(HEADER) or request.cookies.get(COOKIE)
                 or request.query_params.get("token") or "")
        if hmac.compare_digest(given.encode(), self.token.encode()):
            return None
        return PlainTextResponse("refused: this server needs its token (open the URL it "
                                 "printed, which carries ?token=...)", 401)
