"""The doctor's tests: this folder's helpers (synthetic, spool_support) on the path, and a
webhook receiver on 127.0.0.1 for the tests of live findings."""

from __future__ import annotations

import http.server
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))


class _Hook(http.server.BaseHTTPRequestHandler):
    bodies: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        _Hook.bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A webhook URL on 127.0.0.1, and the JSON bodies posted to it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    _Hook.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", _Hook.bodies
    server.shutdown()
    server.server_close()
