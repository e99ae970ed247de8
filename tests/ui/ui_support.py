"""Shared by the UI tests and the store UI's browser tests (tests/store puts this folder
on sys.path): a uniquely named module, since several conftest.py exist. The session's
Chromium is the ``browser`` fixture of tests/conftest.py."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trackmux
from browser_support import ink_at

GROUP = 4  # samples per GRPO group in the logged batches
CHART = "(key) => window.trackmuxUI.state.charts.find(c => c.key === key)"
INK_AT = ink_at("window.trackmuxUI.state.charts.find(c => c.key === a.key).handle.plot")


def make_run(root: Path, name: str, steps: int, *, config: dict[str, Any] | None = None,
             scale: float = 1.0, project: str = "sweep", nan_at: int | None = None,
             kl_blowup_at: int | None = None, samples_at: Sequence[int] = (),
             doctor: bool = True, **init_options: Any) -> Path:
    """A finished spool-only run: reward rising by ``scale``, KL, a system metric, a
    histogram every 10 steps, a table and an image at the last step.

    A broken run, for the doctor watching it live: ``nan_at`` logs a NaN reward at that
    step (the ``nonfinite`` finding, critical), ``kl_blowup_at`` doubles the KL every step
    from there on (``kl_blowup``, warning, one step later). ``samples_at`` logs a real
    batch of 8 samples (2 groups of ``GROUP``, string and logprob token arrays) at those
    steps under the key ``rollouts``. ``init_options``: more for ``trackmux.init`` (no
    backend unless given)."""
    import numpy as np

    init_options.setdefault("backends", [])
    run = trackmux.init(project=project, name=name, dir=root, config=config, doctor=doctor,
                        **init_options)
    assert isinstance(run, trackmux.Run)
    for step in range(steps):
        kl = 0.01 * step * scale
        if kl_blowup_at is not None and step >= kl_blowup_at:
            kl = 0.01 * kl_blowup_at * scale * 2 ** (step - kl_blowup_at + 1)
        reward = float("nan") if step == nan_at else scale * step / steps
        run.log({"reward/mean": reward, "kl/divergence": kl, "system/cpu": 50.0 + step % 7},
                step=step)
        if step % 10 == 0:
            run.log_histogram("critic/advantages", np.linspace(-1, 1, 64) * (1 + step),
                              step=step)
        if step in samples_at:
            log_batch(run, step)
    run.log_table("rollouts", ["prompt", "response", "reward"],
                  [["1 2 3", "3 2 1", 1.0], ["4 5", "5 4", 0.0]], step=steps - 1)
    run.log_image("kl/heatmap", np.linspace(0, 1, 16 * 24).reshape(16, 24), step=steps - 1)
    assert run.finish(timeout=30).complete
    return run.dir


def log_batch(run: trackmux.Run, step: int) -> None:
    """Eight rollouts at ``step``: prompt ``prompt {step}/{group}``, response tokens
    ``s{step}_{i}_{j}``, a reward, a reward component and a per-token logprob."""
    tokens = [[f"s{step}_{i}_{j} " for j in range(3 + i)] for i in range(2 * GROUP)]
    run.log_samples("rollouts", {
        "prompt": [f"prompt {step}/{i // GROUP}" for i in range(2 * GROUP)],
        "response": ["".join(t) for t in tokens],
        "reward": [float(i % 2) + step / 100 for i in range(2 * GROUP)],
        "reward/format": [0.5] * (2 * GROUP),
        "uid": [f"g{i // GROUP}" for i in range(2 * GROUP)]}, step=step,
        tokens={"token": tokens, "logprob": [[-0.5 * j for j in range(len(t))] for t in tokens]})


def open_ui(browser: Any, server: Any, fragment: str = "",
            asked: list[str] | None = None, *, page_path: str = "",
            ready: str = "#runs tbody tr",
            answers: Mapping[str, Any] | None = None) -> tuple[Any, list[str]]:
    """A new page at the UI (``fragment``: its hash state; ``page_path``: another page,
    such as ``board``; ``ready``: what to wait for), recording console problems, dialogs
    and any request outside the server; ``asked`` collects the page's API requests from
    its first one (a page of its own, so no earlier page's late request is counted);
    ``answers`` gives the page canned JSON for the requests a URL pattern matches."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    if asked is not None:
        page.on("request", lambda r: asked.append(r.url.split("/api/")[-1])
                if "/api/" in r.url else None)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

    def dialog(d: Any) -> None:  # an alert() would mean injected script ran
        problems.append(f"dialog: {d.message}")
        d.dismiss()

    page.on("dialog", dialog)
    base = f"http://127.0.0.1:{server.port}/"

    def route(r: Any) -> None:
        if r.request.url.startswith(base):
            r.continue_()
        else:
            problems.append(f"outside request: {r.request.url}")
            r.abort()

    page.route("**/*", route)
    for pattern, body in (answers or {}).items():  # (a later route is asked first)
        page.route(pattern, _answer(json.dumps(body)))
    url = server.url
    if page_path:
        url = url.replace("/?", f"/{page_path}?") if "/?" in url else url + page_path
    page.goto(url + fragment)
    page.wait_for_selector(ready)
    return page, problems


def _answer(text: str) -> Any:
    """A route handler that answers with the JSON ``text``."""
    return lambda r: r.fulfill(status=200, content_type="application/json", body=text)


def open_board(browser: Any, server: Any, goals: Mapping[str, Any],
               ready: str = "tr[data-goal]") -> tuple[Any, list[str]]:
    """The goals board of ``server`` showing ``goals`` as the store's answer, given in the
    page: a folder server has no team store (the board's own tests, tests/store, run it
    against PostgreSQL)."""
    return open_ui(browser, server, page_path="board", ready=ready,
                   answers={"**/api/goals*": goals})


def series_count(page: Any, key: str) -> int:
    selector = f'.tm-chart[data-key="{key}"]'
    page.wait_for_selector(selector + " canvas")
    return int(page.eval_on_selector_all(selector + " .u-legend .u-series", "e => e.length")) - 1
