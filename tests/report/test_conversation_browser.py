"""The conversation view (report/assets/conversation.js, drawn by samples.js) in headless
Chromium: trajectories whose every string is hostile (<script>, <img onerror>, javascript:
links, markup in tool names, arguments, roles, content parts and group names) are shown as
text and nothing runs, in the report (under its CSP) and in a bare page with no CSP at
all (so the view itself is what keeps them inert). Bubbles, folded tool calls, failed
results marked and unfolded, per-turn reward and latency, jumps to a group or sample."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from report_support import needs_chromium
from test_report_browser import open_page

import trackmux
from trackmux.report import build_report
from trackmux.samples.read import step_payload

pytestmark = needs_chromium
ASSETS = Path(trackmux.__file__).parent / "report" / "assets"

SCRIPT = "<script>window.__pwned = 'script'</script>"
IMG = "<img src=x onerror=\"window.__pwned = 'img'\">"
LINK = "<a href=\"javascript:window.__pwned = 'link'\">click me</a>"
SVG = "<svg onload=\"window.__pwned = 'svg'\"></svg>"


def hostile(i: int) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": f"system {SCRIPT}"},
        {"role": "user", "content": [{"type": "text", "text": f"user {i} {IMG} {LINK}"},
                                     {"type": f"image_url{IMG}", "image_url": {"url": LINK}}]},
        {"role": "assistant", "content": f"thinking {SVG}", "reward": 0.5, "latency_ms": 250,
         "tokens": 12, "tool_calls": [{"id": f"c{i}", "name": f"search{IMG}",
                                       "arguments": orjson.dumps({"q": SCRIPT, "u": LINK}
                                                                 ).decode()}]},
        {"role": "tool", "tool_call_id": f"c{i}", "status": "error" if i % 2 else "ok",
         "content": f"result {IMG}"},
        {"role": f"critic{SCRIPT}", "content": "odd role"},
        {"role": "assistant", "content": f"final {i} {LINK}", "reward": 1.0,
         "latency_ms": 80.5},
    ]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("conversations")
    run = trackmux.init(project="p", name="agent", backends=[], dir=root)
    for step in (1, 2):
        run.log({"reward/mean": 0.5}, step=step)
        run.log_samples("agent/rollouts", {
            "messages": [hostile(i) for i in range(4)],
            "uid": [f'g{i // 2}"><img src=x onerror="window.__pwned=\'uid\'">' for i in
                    range(4)],
            "reward": [float(i) for i in range(4)]}, step=step, strict=True)
    run.finish(timeout=30)
    return run.dir


def bare_page(run_dir: Path, folder: Path, step: int = 2) -> Path:
    """The sample browser alone, no CSP: only the view stands between the data and the
    page."""
    payload = step_payload(run_dir, "agent/rollouts", step)
    data = orjson.dumps(payload).decode().replace("<", "\\u003c")
    css = (ASSETS / "samples.css").read_text() + (ASSETS / "conversation.css").read_text()
    scripts = (ASSETS / "conversation.js").read_text() + (ASSETS / "samples.js").read_text()
    page = folder / "bare.html"
    page.write_text(
        f"<!doctype html><meta charset=utf-8><style>{css}</style><div id=m></div>"
        f"<script>{scripts}</script><script>window.trackmuxSamples.mount("
        f"document.getElementById('m'), {data}, {{}});"
        f"document.getElementById('m').setAttribute('data-ready', '1');</script>",
        encoding="utf-8")
    return page


def check_inert(page: Any, requests: list[str], problems: list[str]) -> None:
    body = page.locator(".tms-body")
    text = body.text_content() or ""  # off-screen conversations are not laid out
    for literal in ("<script>window.__pwned = 'script'</script>",
                    "<img src=x onerror=\"window.__pwned = 'img'\">",
                    "<a href=\"javascript:window.__pwned = 'link'\">click me</a>",
                    "<svg onload=\"window.__pwned = 'svg'\"></svg>"):
        assert literal in text, literal
    assert page.locator(".tms-body img, .tms-body script, .tms-body a, .tms-body svg, "
                        ".tms-body iframe").count() == 0
    assert page.evaluate("() => window.__pwned") is None
    assert not [r for r in requests if not r.startswith(("file:", "data:"))], requests
    assert not [p for p in problems if "pwned" in p or "javascript" in p], problems


def exercise(page: Any) -> None:
    """Bubbles, folds, marks and jumps of the view, on step 2 of :func:`hostile`."""
    from playwright.sync_api import expect

    cards = page.locator(".tms-card.tm-card-conv")
    assert cards.count() == 4
    card = page.locator(".tms-card[data-sample='1']")
    assert card.locator(".tm-msg.tm-user").count() == 1
    assert card.locator(".tm-msg.tm-assistant").count() == 2
    card.scroll_into_view_if_needed()
    expect(card.locator(".tm-assistant .tm-mhead").first).to_contain_text("turn 1")  # shown
    head = card.locator(".tm-assistant .tm-mhead").first.text_content() or ""
    assert "turn 1" in head and "reward 0.5" in head and "250 ms" in head
    assert "1 failed" in (card.locator(".tm-sum").text_content() or "")
    failed = card.locator("details.tm-result.tm-error")
    assert failed.count() == 1 and failed.get_attribute("open") is not None
    assert page.locator(".tms-card[data-sample='0'] details.tm-result.tm-error").count() == 0
    call = card.locator("details.tm-call")
    assert call.get_attribute("open") is None  # folded, its body not built yet
    assert call.locator(".tm-pre").count() == 0
    call.locator("summary").click()
    assert '"q": "<script>' in (call.locator(".tm-pre").text_content() or "")  # pretty JSON
    page.click(".tm-fold-all")
    assert failed.get_attribute("open") is None
    page.click(".tm-unfold")
    assert page.locator("details.tm-call[open]").count() == 4
    page.fill(".tm-goto-sample", "3")
    page.locator(".tm-goto-sample").dispatch_event("change")
    assert "tm-flash" in (page.locator(".tms-card[data-sample='3']").get_attribute("class")
                          or "")
    page.locator(".tm-goto-group").focus()
    groups = page.eval_on_selector_all(".tm-goto-group option", "os => os.map(o => o.value)")
    assert len(groups) == 3 and sorted(g[:2] for g in groups[1:]) == ["g0", "g1"]
    page.select_option(".tm-goto-group", groups[2])
    second = page.locator(".tms-group").nth(1)
    assert second.get_attribute("data-group") == groups[2]
    assert "tm-flash" in (second.get_attribute("class") or "")
    page.fill(".tms-filter", "tool_errors > 0 and 'search<img src=x onerror=\"window."
              "__pwned = \\'img\\'\">' in tools")
    assert (page.locator(".tms-info").text_content() or "").strip() == "2 of 4 samples"


def test_bare_view_keeps_hostile_text_inert(browser: Any, run_dir: Path,
                                            tmp_path: Path) -> None:
    page, problems, requests = open_page(browser, bare_page(run_dir, tmp_path))
    try:
        page.wait_for_selector("#m[data-ready='1']", timeout=15000)
        check_inert(page, requests, problems)
        exercise(page)
        check_inert(page, requests, problems)  # everything unfolded: still text
        assert problems == [], problems
    finally:
        page.close()


def test_report_shows_conversations_inert(browser: Any, run_dir: Path,
                                          tmp_path: Path) -> None:
    report = build_report([run_dir], tmp_path / "report.html")
    page, problems, requests = open_page(browser, report)
    try:
        page.wait_for_selector(".sample-browser[data-ready='1']", timeout=15000)
        assert page.locator(".tms-steplabel").inner_text() == "step 2"
        check_inert(page, requests, problems)
        exercise(page)
        check_inert(page, requests, problems)
        page.fill(".tms-filter", "")
        page.locator(".tms-step").fill("0")  # step 1 (the slider's first), on demand
        page.wait_for_selector(".tms-steplabel:text-is('step 1')", timeout=10000)
        assert page.locator(".tms-card.tm-card-conv").count() == 4
        assert problems == [] and requests == [], (problems, requests)
    finally:
        page.close()


def test_far_conversations_are_built_when_reached(browser: Any, tmp_path: Path) -> None:
    """Past the first 24 a conversation is built near the screen or when jumped to (a
    step of hundreds opens fast), and unfold-all reaches every one."""
    run = trackmux.init(project="p", name="many", backends=[], dir=tmp_path / "runs")
    run.log_samples("agent/rollouts", {"messages": [hostile(i) for i in range(40)],
                                       "reward": [float(i) for i in range(40)]},
                    step=1, strict=True)
    run.finish(timeout=30)
    page, problems, requests = open_page(browser, bare_page(run.dir, tmp_path, step=1))
    try:
        page.wait_for_selector("#m[data-ready='1']", timeout=15000)
        assert page.locator(".tm-conv").count() == 40
        far = page.locator(".tms-card[data-sample='0'] .tm-conv")  # sorted last
        assert far.locator(".tm-msg").count() == 0
        assert "2 turns · 1 tool calls" in (far.text_content() or "")  # its summary
        page.fill(".tm-goto-sample", "0")
        page.locator(".tm-goto-sample").dispatch_event("change")
        assert far.locator(".tm-msg.tm-assistant").count() == 2
        page.locator(".tm-unfold").dispatch_event("click")  # the page scrolled to sample 0
        assert page.locator("details.tm-call[open]").count() == 40
        check_inert(page, requests, problems)
        assert problems == [], problems
    finally:
        page.close()
