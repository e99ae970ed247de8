"""The UI's token (issue 34 item 5): opening the printed URL trades the token for an
HttpOnly cookie and redirects to the page without it; every response says
``Referrer-Policy: no-referrer``; the page's JavaScript never holds the token; and
``trackmux ui --token`` requires it on loopback too (a shared login node)."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from ui_support import make_run

from trackmux.ui.app import STATIC, Server
from trackmux.ui.security import new_token


def _url(server: Any, path: str) -> str:
    return f"http://127.0.0.1:{server.port}{path}"


@pytest.fixture
def guarded(tmp_path: Path) -> Any:
    make_run(tmp_path, "a", 3)
    server = Server([tmp_path], host="127.0.0.1", port=0, token=new_token(),
                    warm=False).start()
    yield server
    server.stop()


def test_loopback_with_a_token_refuses_requests_without_it(guarded: Any) -> None:
    for path in ("/", "/api/runs", "/static/ui.js", "/assets/charts.js"):
        answer = httpx.get(_url(guarded, path), timeout=30)
        assert answer.status_code == 401, path
        assert answer.headers["referrer-policy"] == "no-referrer"


def test_the_printed_url_becomes_a_cookie_and_leaves_the_address_bar(guarded: Any) -> None:
    with httpx.Client(timeout=30) as browser:
        first = browser.get(_url(guarded, f"/?token={guarded.token}&run=a"))
        assert first.status_code == 303
        assert first.headers["location"] == "/?run=a"  # other parameters kept
        cookie = first.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert first.headers["referrer-policy"] == "no-referrer"
        page = browser.get(_url(guarded, "/?run=a"))  # the redirect's target, cookie only
        assert page.status_code == 200 and guarded.token not in page.text
        for path in ("/api/runs", "/static/ui.js", "/assets/charts.js"):
            answer = browser.get(_url(guarded, path))
            assert answer.status_code == 200, path
            assert answer.headers["referrer-policy"] == "no-referrer", path
            assert guarded.token not in answer.text, path
    # a stale cookie (an earlier server's) does not hide a fresh URL
    answer = httpx.get(_url(guarded, f"/?token={guarded.token}"),
                       cookies={"trackmux_token": "stale"}, timeout=30)
    assert answer.status_code == 303


def test_the_page_script_never_reads_the_token() -> None:
    script = (STATIC / "ui.js").read_text()
    assert not re.search(r"""get\(\s*["']token["']\s*\)|X-Trackmux-Token|\?token=""", script)
    assert '<meta name="referrer" content="no-referrer">' in (STATIC / "index.html").read_text()


def test_the_cli_offers_a_token_on_loopback(tmp_path: Path) -> None:
    from trackmux.cli.main import cli as main

    make_run(tmp_path, "a", 3)
    result: dict[str, Any] = {}

    def serve() -> None:
        result["out"] = CliRunner().invoke(main, ["ui", str(tmp_path), "--port", "0",
                                                  "--token"])

    import trackmux.ui.app as app

    started: list[Any] = []
    real_start = app.Server.start

    def start(self: Any, timeout: float = 20.0) -> Any:
        started.append(self)
        real_start(self, timeout)
        self.server.should_exit = True  # serve once, then let the command return
        return self

    app.Server.start = start  # type: ignore[method-assign]
    try:
        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        thread.join(60)
    finally:
        app.Server.start = real_start  # type: ignore[method-assign]
    out = result["out"].output
    assert started and started[0].token and f"?token={started[0].token}" in out, out
    assert started[0].host == "127.0.0.1"
    help_text = CliRunner().invoke(main, ["ui", "--help"]).output
    assert "--token" in help_text and "shared login node" in help_text
