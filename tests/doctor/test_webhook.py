"""The webhook backend against real HTTP servers on 127.0.0.1 (issue 34 items 4 and 13):
redirects are not followed (307/308 to the same origin only, with the body), a finding
answered by a redirect or any non-2xx status is a reported failure, never "sent", the
Authorization header never reaches another origin, model output is inert markup for Slack
and stays plain in JSON, and findings are folded and capped per minute with nothing
lost."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import trackmux
from trackmux.core.backends.contract import ResumeState, RunInfo
from trackmux.core.errors import PermanentBackendError
from trackmux.core.events import FindingEvent
from trackmux.plugins.chat import slack_escape
from trackmux.plugins.webhook import WebhookBackend
from trackmux.plugins.webhook_fold import Folder


class Server:
    """A 127.0.0.1 HTTP server that records requests and answers from a plan."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        #: path -> (status, headers)
        self.plan: dict[str, tuple[int, dict[str, str]]] = {}
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                outer.requests.append({"method": self.command, "path": self.path,
                                       "headers": dict(self.headers), "body": body})
                status, headers = outer.plan.get(self.path, (200, {}))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_GET = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server]]:
    a, b = Server(), Server()
    yield a, b
    a.close()
    b.close()


def _backend(tmp_path: Path, url: str, **options: Any) -> WebhookBackend:
    backend = WebhookBackend({"url": url, "headers": {"Authorization": "Bearer tok-123"},
                              **options})
    backend.open(RunInfo("p", "n", "rid", tmp_path, 0.0), ResumeState())
    return backend


def _finding(seq: int, message: str = "first non-finite values", rule: str = "nonfinite",
             key: str = "loss", severity: str = "critical") -> FindingEvent:
    return FindingEvent(rule, severity, (key,), message, seq, 1.0, seq)


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_origin_is_a_failure_and_carries_nothing(
        tmp_path: Path, servers: tuple[Server, Server], code: int) -> None:
    here, there = servers
    here.plan["/hook"] = (code, {"Location": there.url + "/stolen"})
    backend = _backend(tmp_path, here.url + "/hook")
    with pytest.raises(PermanentBackendError, match=f"{code}.*not followed"):
        backend.write([_finding(1)])
    assert there.requests == []  # neither the body nor the Authorization header went there
    assert backend.sent == 0
    backend.close("failed")
    assert len(here.requests) == 1  # and nothing more at close


@pytest.mark.parametrize("code", [307, 308])
def test_307_308_to_the_same_origin_keep_the_post_and_its_body(
        tmp_path: Path, servers: tuple[Server, Server], code: int) -> None:
    here, _ = servers
    here.plan["/hook"] = (code, {"Location": "/moved"})
    backend = _backend(tmp_path, here.url + "/hook")
    backend.write([_finding(1)])
    first, moved = here.requests
    assert moved["path"] == "/moved" and moved["method"] == "POST"
    assert moved["body"] == first["body"] and json.loads(moved["body"])["rule"] == "nonfinite"
    assert moved["headers"]["Authorization"] == "Bearer tok-123"
    assert backend.sent == 1


@pytest.mark.parametrize("code", [301, 302])
def test_a_same_origin_301_302_is_not_followed_either(
        tmp_path: Path, servers: tuple[Server, Server], code: int) -> None:
    here, _ = servers
    here.plan["/hook"] = (code, {"Location": "/moved"})
    backend = _backend(tmp_path, here.url + "/hook")
    with pytest.raises(PermanentBackendError):
        backend.write([_finding(1)])
    assert [r["path"] for r in here.requests] == ["/hook"]  # no GET without a body


def test_a_run_whose_webhook_redirects_is_not_complete(tmp_path: Path,
                                                       servers: tuple[Server, Server]) -> None:
    here, there = servers
    here.plan["/hook"] = (302, {"Location": there.url + "/elsewhere"})
    run = trackmux.init(project="p", backends=["webhook"], dir=tmp_path,
                        backend_options={"webhook": {"url": here.url + "/hook"}})
    for step in range(5):
        run.log({"loss": float("nan") if step == 3 else 1.0}, step=step)
    summary = run.finish(timeout=30)
    assert not summary.complete and "webhook" in summary.failed, summary
    assert "302" in summary.failed["webhook"]
    assert there.requests == []


def test_text_is_escaped_for_every_url_and_the_structured_fields_stay_plain(
        tmp_path: Path, servers: tuple[Server, Server]) -> None:
    """Mattermost, Rocket.Chat and relays show ``text`` as Slack does (issue 43 item 18):
    escaped whatever the URL or format; ``message`` and ``findings`` keep the data."""
    here, _ = servers
    evil = "model said <!channel> see <https://evil.example|docs> & <@U123>"
    slack = _backend(tmp_path, here.url + "/slack", format="slack")
    slack.write([_finding(1, evil)])
    plain = _backend(tmp_path, here.url + "/mattermost")  # format auto: a non-Slack host
    plain.write([_finding(2, evil)])
    for sent in (json.loads(r["body"]) for r in here.requests):
        assert "<" not in sent["text"] and ">" not in sent["text"]
        assert "&lt;!channel&gt;" in sent["text"]
        assert "&lt;https://evil.example|docs&gt; &amp; &lt;@U123&gt;" in sent["text"]
        assert sent["message"] == evil and sent["findings"][0]["message"] == evil
    assert len(here.requests) == 2
    assert slack_escape("a&b<c>") == "a&amp;b&lt;c&gt;"
    assert WebhookBackend({"url": "https://hooks.slack.com/services/T/B/x"}).format == "slack"
    assert WebhookBackend({"url": "https://example.com/hook"}).format == "json"


def test_findings_are_folded_per_rule_and_capped_and_none_is_lost(
        tmp_path: Path, servers: tuple[Server, Server]) -> None:
    here, _ = servers
    backend = _backend(tmp_path, here.url + "/hook", max_per_minute=3)
    clock = [1000.0]
    backend.folder.clock = lambda: clock[0]
    for seq in range(1, 301):  # 300 keys going NaN, one per batch, at different steps
        backend.write([_finding(seq, f"non-finite in key{seq}", key=f"key{seq}")])
    backend.write([_finding(301, "kl ran away", rule="kl_blowup", severity="warning")])
    assert len(here.requests) == 2  # the first NaN and the first kl_blowup: new rules
    clock[0] += 61  # the fold window of nonfinite is over: one POST for the other 299
    backend.flush()
    assert len(here.requests) == 3
    folded = json.loads(here.requests[2]["body"])
    assert folded["count"] == 299 and folded["folded"] == 298
    assert "+298 more nonfinite finding(s) folded" in folded["text"]
    assert "steps 2-300" in folded["text"] and len(folded["findings"]) == 50
    for seq in range(302, 310):  # the cap: 3 POSTs in a minute
        backend.write([_finding(seq, rule=f"rule{seq}", severity="warning")])
    assert len(here.requests) == 5  # the first two; then 3 POSTs in this minute
    assert len(backend.folder.held) == 6
    backend.close("finished")  # what is held goes at close
    bodies = [json.loads(r["body"]) for r in here.requests]
    assert sum(b["count"] for b in bodies) == 309  # every finding counted in one POST
    assert len(here.requests) == 3 + 8


def test_held_findings_survive_a_restart_through_the_stored_state(
        tmp_path: Path, servers: tuple[Server, Server]) -> None:
    here, _ = servers
    backend = _backend(tmp_path, here.url + "/hook")
    backend.write([_finding(1), _finding(2, key="b")])  # one POST for the batch
    backend.write([_finding(3, key="c")])  # folded: held
    assert len(here.requests) == 1 and json.loads(here.requests[0]["body"])["count"] == 2
    stored = backend.state()
    again = WebhookBackend({"url": here.url + "/hook"})
    again.open(RunInfo("p", "n", "rid", tmp_path, 0.0), ResumeState(None, stored, 3))
    again.close("crashed")
    assert json.loads(here.requests[1]["body"])["keys"] == ["c"]
    assert Folder().state() == {"held": [], "last": {}, "posts": []}


@pytest.mark.parametrize("code", [500, 404, 204])
def test_only_2xx_counts_as_sent(tmp_path: Path, servers: tuple[Server, Server],
                                 code: int) -> None:
    here, _ = servers
    here.plan["/hook"] = (code, {})
    backend = _backend(tmp_path, here.url + "/hook")
    if code == 204:
        backend.write([_finding(1)])
        assert backend.sent == 1
        return
    with pytest.raises(Exception, match=str(code)):
        backend.write([_finding(1)])
    assert backend.sent == 0
    assert backend.folder.held  # held again: retried, not lost


def test_three_hundred_keys_going_nan_send_a_handful_of_posts(
        tmp_path: Path, servers: tuple[Server, Server]) -> None:
    here, _ = servers
    run = trackmux.init(project="p", backends=["webhook"], dir=tmp_path,
                        backend_options={"webhook": {"url": here.url + "/hook"}})
    run.log({f"k{i}": 1.0 for i in range(300)}, step=0)  # numbers first: NaN is a fault
    for step in range(300):  # (a key NaN from its very first point may be "not computed")
        run.log({f"k{i}": float("nan") if i == step else 1.0 for i in range(300)},
                step=step + 1)
    summary = run.finish(timeout=60)
    assert summary.complete, summary
    bodies = [json.loads(r["body"]) for r in here.requests]
    assert 1 <= len(bodies) <= 10
    assert sum(b["count"] for b in bodies) == 300


def test_undelivered_findings_are_the_last_line_and_sigterm_ends_the_retrying(
        tmp_path: Path) -> None:
    """Issue 34 item 17: a dead webhook. The trainer's last line counts the findings and
    says what happens to them; SIGTERM ends the delivery process that only retries
    within a few seconds (it says so in delivery.log), instead of the orphan timeout."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    from trackmux.core.delivery.host import _is_delivery_process

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = (
        "import trackmux\n"
        f"run = trackmux.init(project='p', backends=['webhook'], dir={str(tmp_path)!r},\n"
        f"    backend_options={{'webhook': {{'url': 'http://127.0.0.1:{port}/hook'}}}},\n"
        "    orphan_timeout=120)\n"
        "for step in range(5):\n"
        "    run.log({'loss': float('nan') if step == 2 else 1.0}, step=step)\n"
        "run.finish(timeout=4)\n"
        "print('PID', run.delivery_pid, run.dir)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKMUX_")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    pid_text, run_dir = done.stdout.split("PID ")[1].split()
    pid = int(pid_text)
    last = [line for line in done.stderr.splitlines() if line.strip()][-1]
    assert "1 finding not delivered to webhook; retrying in the background up to 120 s" \
        in last, done.stderr
    assert f"trackmux sync {run_dir} --to webhook" in last
    assert _is_delivery_process(pid), "the delivery process should still be retrying"
    os.kill(pid, signal.SIGTERM)
    # Left alone it would retry for 120 s (orphan_timeout): gone within half of that, and
    # saying it stops within its 2 s grace, it heeded SIGTERM (not a speed claim: the
    # grace's length is the log line's, not this machine's clock).
    start = time.monotonic()
    while _is_delivery_process(pid) and time.monotonic() - start < 60:
        time.sleep(0.05)
    assert not _is_delivery_process(pid), "SIGTERM did not stop the retrying process"
    log_text = (Path(run_dir) / "delivery.log").read_text()
    assert "webhook only retrying: stopping within 2.0 s" in log_text


def test_a_held_group_goes_out_when_its_window_ends_without_another_event(
        tmp_path: Path, servers: tuple[Server, Server]) -> None:
    import threading
    import time

    here, _ = servers
    backend = _backend(tmp_path, here.url + "/hook", fold_seconds=0.3)
    # The backend's timer thread is held at its start until the test has looked: on a
    # loaded machine 0.3 s can pass before the assertion below, and the timer would have
    # sent the held group already.
    let_timer_run = threading.Event()
    on_timer = backend._on_timer

    def held_timer() -> None:
        let_timer_run.wait(60)
        on_timer()

    backend._on_timer = held_timer  # type: ignore[method-assign]
    backend.write([_finding(1)])
    backend.write([_finding(2, key="b"), _finding(3, key="c")])  # folded, held
    assert len(here.requests) == 1
    let_timer_run.set()
    deadline = time.monotonic() + 30
    while len(here.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    held = json.loads(here.requests[1]["body"])
    assert held["count"] == 2 and held["keys"] == ["b"] and "+1 more" in held["text"]
    backend.close("finished")
    assert len(here.requests) == 2  # nothing left to send
