"""``trackmux ui`` as a user starts it (issue 43 items 8 and 11): the URL it prints answers
at once, and an empty folder is told what to do."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from ui_support import make_run

from trackmux.testing.signals import default_sigint


@pytest.fixture
def serve() -> Iterator[object]:
    started: list[subprocess.Popen[str]] = []

    def start(folder: Path) -> tuple[str, list[str]]:
        """Start the command; return the URL it printed and the lines before it."""
        env = {**os.environ, "TRACKMUX_DISABLE_PLUGIN_AUTOLOAD": "1"}
        proc = subprocess.Popen([sys.executable, "-m", "trackmux", "ui", str(folder),
                                 "--port", "0"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env,
                                preexec_fn=default_sigint)  # stopped with Ctrl-C below
        started.append(proc)
        lines: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        out = proc.stdout
        threading.Thread(target=lambda: [lines.put(line) for line in out], daemon=True).start()
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line.startswith("open http"):
                return line.split()[1], seen
            seen.append(line)
        raise AssertionError(f"no URL printed: {seen}")

    yield start
    for proc in started:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_the_printed_url_answers_at_once(serve: object, tmp_path: Path) -> None:
    make_run(tmp_path, "a", 3)
    url, before = serve(tmp_path)  # type: ignore[operator]
    # asked the moment the line is read: no retry, no wait
    with urllib.request.urlopen(url + "api/runs", timeout=30) as answer:
        assert answer.status == 200
    assert not any("no runs" in line for line in before), before


def test_an_empty_folder_says_what_to_do(serve: object, tmp_path: Path) -> None:
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    _, before = serve(empty)  # type: ignore[operator]
    [hint] = [line for line in before if "no runs" in line]
    assert str(empty) in hint and "trackmux.init(" in hint and "trackmux demo" in hint
