"""Webhook backend: the doctor's findings as JSON POSTs to a URL (Slack-style relays, a
pager, a chat bot). Other event kinds are not sent (a note says so once).

Body: ``{"run", "project", "name", "seq", "rule", "severity", "step", "keys", "message",
"time", "text", "count", "folded", "findings"}``: the main fields are those of the most
severe finding of the POST; ``findings`` lists the findings it carries (up to 50),
``count`` how many it stands for and ``folded`` how many more than one. ``text`` is the
one-line form, which Slack and Mattermost incoming webhooks show as is; a POST that folds
findings says so in it. Findings are grouped per rule and POSTs capped per minute
(webhook_fold.py): 300 keys going NaN at different steps make a handful of POSTs, and
every finding is counted in one of them.

Delivery is at least once: a POST whose answer was lost is sent again after the retry,
with the same ``seq`` (receivers that care dedupe on run + seq). Only a 2xx answer counts
as sent. Redirects are not followed, except 307/308 to the same origin (scheme, host and
port), which keep the method, the body and the headers; a redirect anywhere else is a
permanent failure that names the new location (the body and any ``Authorization`` header
go to the configured origin only). A 4xx answer other than 408 and 429 is a permanent
failure (the URL or its token is wrong); other answers are retried with backoff.

Model output reaches the receiver as data, never as markup: ``&``, ``<`` and ``>`` of
``text`` are always escaped as Slack asks (Mattermost, Rocket.Chat and self-hosted relays
show ``text`` as is too, and are the common case), so ``<!channel>`` and
``<https://x|label>`` quoted from a sample are shown, not acted on. A JSON consumer reads
the structured fields (``message``, ``keys``, ``findings``), which stay as they were.
``format`` is kept for configurations that set it; it no longer changes ``text``.

Options: ``url`` (required, http or https), ``min_severity`` ("info", "warning" (default)
or "critical"), ``timeout`` seconds (default 10), ``headers`` (a mapping, e.g. a token),
``format`` ("auto", "slack" or "json"), ``max_per_minute`` (POSTs in any 60 s, default
10), ``fold_seconds`` (how long further findings of a rule that just alerted are folded,
default 60).
"""

from __future__ import annotations

import contextlib
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

import orjson

from trackmux.core.backends.contract import Backend, ResumeState, RunInfo, check_option_types
from trackmux.core.errors import PermanentBackendError
from trackmux.core.events import SEVERITIES, Event, FindingEvent
from trackmux.hookspecs import RegisterBackend, hookimpl
from trackmux.plugins import webhook_fold
from trackmux.plugins.chat import slack_escape
from trackmux.plugins.webhook_fold import Folder, Group

FORMATS = ("auto", "slack", "json")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follow 307/308 to the same origin with method, body and headers; refuse the rest
    (urllib then raises HTTPError with the 3xx status, which the backend reports)."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        if code in (307, 308) and _origin(newurl) == _origin(req.full_url):
            return urllib.request.Request(newurl, data=req.data,
                                          headers=dict(req.header_items()),
                                          method=req.get_method())
        return None


def _check_count(name: str, value: Any, default: float, integer: bool) -> Any:
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 or \
            value != value or value == float("inf") or (integer and int(value) != value):
        kind = "an integer >= 1" if integer else "seconds > 0"
        raise ValueError(f"webhook option {name} must be {kind}, got {value!r}")
    return int(value) if integer else float(value)


class WebhookBackend(Backend):
    name = "webhook"
    capabilities = frozenset({"finding"})

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        check_option_types("webhook", self.options,
                           ("url", "min_severity", "timeout", "headers", "format",
                            "max_per_minute", "fold_seconds"), strings=("url",))
        url = self.options.get("url")
        if not url or urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"webhook option url must be an http(s) URL, got {url!r}")
        self.url: str = url
        self.min_severity = self.options.get("min_severity", "warning")
        if self.min_severity not in SEVERITIES:
            raise ValueError(f"webhook option min_severity must be one of {list(SEVERITIES)}, "
                             f"got {self.min_severity!r}")
        self.timeout = _check_count("timeout", self.options.get("timeout"), 10.0, False)
        headers = self.options.get("headers") or {}
        if not isinstance(headers, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
            raise TypeError("webhook option headers must be a mapping of str to str")
        self.headers = {"Content-Type": "application/json", **headers}
        fmt = self.options.get("format", "auto")
        if fmt not in FORMATS:
            raise ValueError(f"webhook option format must be one of {list(FORMATS)}, "
                             f"got {fmt!r}")
        host = (urllib.parse.urlsplit(url).hostname or "").lower()
        self.format = fmt if fmt != "auto" else (
            "slack" if host == "slack.com" or host.endswith(".slack.com") else "json")
        self.folder = Folder(
            _check_count("max_per_minute", self.options.get("max_per_minute"),
                         webhook_fold.DEFAULT_MAX_PER_MINUTE, True),
            _check_count("fold_seconds", self.options.get("fold_seconds"),
                         webhook_fold.DEFAULT_FOLD_SECONDS, False))
        self._opener = urllib.request.build_opener(_SameOriginRedirects())
        self._lock = threading.Lock()  # the folder and the POSTs: worker thread vs timer
        self._timer: threading.Timer | None = None
        self._timer_at = 0.0
        self._broken = False  # a permanent failure: close sends nothing more
        #: POSTs answered 2xx, and the findings they carried
        self.sent = 0
        self.findings_sent = 0

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        self._run = run
        with self._lock:
            self.folder.restore(resume.state.get("fold") if resume.state else None)

    def state(self) -> dict[str, Any]:
        with self._lock:
            return {"fold": self.folder.state()}

    def write(self, events: Sequence[Event]) -> None:
        floor = SEVERITIES.index(self.min_severity)
        with self._lock:
            for event in events:
                if isinstance(event, FindingEvent) and event.severity in SEVERITIES and \
                        SEVERITIES.index(event.severity) >= floor:
                    self.folder.add(event)
        self._send_due()

    def flush(self) -> None:
        self._send_due()

    def close(self, status: str) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if status != "retrying" and not self._broken:  # the run is over: all held go now
            self._send_due(final=True)

    def _send_due(self, final: bool = False) -> None:
        """POST the groups that are due; a failed one is held again and the error raised
        (the worker retries, and the stored state still holds it)."""
        with self._lock:
            groups, again = self.folder.due(final)
            try:
                for i, group in enumerate(groups):
                    try:
                        self._post(group)
                    except BaseException:
                        for unsent in groups[i:]:
                            self.folder.failed(unsent)
                        raise
            finally:
                if again is not None and not final:
                    self._schedule(again)

    def _schedule(self, when: float) -> None:
        """Ask again at ``when`` (wall time) even if no event comes: a daemon timer (one;
        kept when it already fires about then)."""
        if self._timer is not None and self._timer.is_alive() and \
                abs(self._timer_at - when) < 0.5:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = threading.Timer(max(0.05, when - self.folder.clock()), self._on_timer)
        self._timer.daemon = True
        self._timer.start()

    def _on_timer(self) -> None:
        with contextlib.suppress(Exception):  # held again; write, flush or close retries
            self._send_due()

    def body(self, group: Group) -> bytes:
        head = group.head()
        text = slack_escape(webhook_fold.digest_text(group, head["text"]))
        findings = [{k: v for k, v in f.items() if k != "text"} for f in group.findings]
        return orjson.dumps({"run": self._run.run_id, "project": self._run.project,
                             "name": self._run.name, "seq": head["seq"],
                             "rule": head["rule"], "severity": head["severity"],
                             "step": head["step"], "keys": head["keys"],
                             "message": head["message"], "time": head["time"],
                             "text": text, "count": group.count,
                             "folded": group.count - 1, "findings": findings})

    def _post(self, group: Group) -> None:
        request = urllib.request.Request(self.url, data=self.body(group), headers=self.headers,
                                         method="POST")
        try:
            with self._opener.open(request, timeout=self.timeout) as answer:
                answer.read()
        except urllib.error.HTTPError as exc:
            where = self.where()
            self._broken = 300 <= exc.code < 500 and exc.code not in (408, 429)
            if 300 <= exc.code < 400:
                location = exc.headers.get("Location", "?") if exc.headers else "?"
                location = urllib.parse.urlsplit(location)._replace(query="",
                                                                    fragment="").geturl()
                raise PermanentBackendError(
                    f"webhook {where} answered {exc.code} {exc.reason}: a redirect to "
                    f"{location!r}, not followed (only 307/308 to the same origin are); "
                    f"set the webhook url to where it should go") from None
            if 400 <= exc.code < 500 and exc.code not in (408, 429):
                raise PermanentBackendError(f"webhook {where} answered {exc.code} "
                                            f"{exc.reason}") from None
            raise
        self.sent += 1
        self.findings_sent += group.count

    def where(self) -> str | None:
        return urllib.parse.urlsplit(self.url)._replace(query="").geturl()


@hookimpl
def trackmux_register_backends(register: RegisterBackend) -> None:
    register("webhook", WebhookBackend, description="findings of the doctor as JSON POSTs")
