"""Webhook backend: each finding of the doctor as a JSON POST to a URL (Slack-style relays,
a pager, a chat bot). Other event kinds are not sent (a note says so once).

Body: ``{"run", "project", "name", "seq", "rule", "severity", "step", "keys", "message",
"time", "text"}``; ``text`` is the one-line form, which Slack and Mattermost incoming
webhooks show as is. Delivery is at least once: a POST whose answer was lost is sent
again after the retry, with the same ``seq`` (receivers that care dedupe on run + seq).
A non-2xx answer is retried with backoff like any backend failure; 4xx other than 408
and 429 is a permanent failure (the URL or its token is wrong).

Options: ``url`` (required, http or https), ``min_severity`` ("info", "warning" (default)
or "critical"), ``timeout`` seconds (default 10), ``headers`` (a mapping, e.g. a token).
"""

from __future__ import annotations

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


class WebhookBackend(Backend):
    name = "webhook"
    capabilities = frozenset({"finding"})

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        check_option_types("webhook", self.options,
                           ("url", "min_severity", "timeout", "headers"), strings=("url",))
        url = self.options.get("url")
        if not url or urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"webhook option url must be an http(s) URL, got {url!r}")
        self.url: str = url
        self.min_severity = self.options.get("min_severity", "warning")
        if self.min_severity not in SEVERITIES:
            raise ValueError(f"webhook option min_severity must be one of {list(SEVERITIES)}, "
                             f"got {self.min_severity!r}")
        timeout = self.options.get("timeout", 10.0)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"webhook option timeout must be seconds > 0, got {timeout!r}")
        self.timeout = float(timeout)
        headers = self.options.get("headers") or {}
        if not isinstance(headers, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
            raise TypeError("webhook option headers must be a mapping of str to str")
        self.headers = {"Content-Type": "application/json", **headers}
        self.sent = 0

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        self._run = run

    def write(self, events: Sequence[Event]) -> None:
        floor = SEVERITIES.index(self.min_severity)
        for event in events:
            if isinstance(event, FindingEvent) and event.severity in SEVERITIES and \
                    SEVERITIES.index(event.severity) >= floor:
                self._post(event)

    def _post(self, event: FindingEvent) -> None:
        body = orjson.dumps({"run": self._run.run_id, "project": self._run.project,
                             "name": self._run.name, "seq": event.seq, **event.as_dict(),
                             "time": event.time, "text": event.line()})
        request = urllib.request.Request(self.url, data=body, headers=self.headers,
                                         method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                answer.read()
        except urllib.error.HTTPError as exc:
            if 400 <= exc.code < 500 and exc.code not in (408, 429):
                raise PermanentBackendError(f"webhook {self.url} answered {exc.code} "
                                            f"{exc.reason}") from None
            raise
        self.sent += 1

    def close(self, status: str) -> None:
        pass

    def where(self) -> str | None:
        return urllib.parse.urlsplit(self.url)._replace(query="").geturl()


@hookimpl
def trackmux_register_backends(register: RegisterBackend) -> None:
    register("webhook", WebhookBackend, description="findings of the doctor as JSON POSTs")
