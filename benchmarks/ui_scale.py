"""The UI at scale: 100 runs x 20 metrics x 10,000 steps under one folder.

    python -m benchmarks.ui_scale [--root DIR] [--out ui_scale.json]

Makes the folder (benchmarks/ui_spools.py) unless it is there, starts ``trackmux ui`` in
its own process, times its cold start (the run list and a first, partial, 100-run chart,
from the command's start and from the server accepting connections), waits until it is
warm (every run read to its end), then measures:

- first paint in Chromium, from navigation start: the run list with its 100 rows, and a
  chart of one metric over all 100 runs (uPlot drawn with 101 series); 5 page loads each;
- the API's time for the run list and for that chart's data (no browser);
- log() -> page latency: a live run logs a step under the same folder while a page shows
  it; the time from before ``run.log`` to the page holding that step (20 samples);
- the server's resident memory (VmRSS) and its peak (VmHWM) after warm-up and at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.ui_spools import generate

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
KEY = "reward/mean"


def memory(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0]) / 1024.0
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (independent of how loaded the machine is)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def timed(fn: Any, pid: int, repeat: int = 5) -> dict[str, float]:
    """Wall time of ``fn`` and the server's CPU time for it (medians)."""
    times, cpu = [], []
    for _ in range(repeat):
        began, used = time.perf_counter(), cpu_seconds(pid)
        fn()
        times.append(time.perf_counter() - began)
        cpu.append(cpu_seconds(pid) - used)
    return {"median_s": statistics.median(times), "max_s": max(times),
            "server_cpu_median_s": statistics.median(cpu), "n": repeat}


def cold_start(base: str, runs: int, started: float) -> dict[str, float]:
    """Seconds from the command's start (and from the server accepting connections)
    until ``/api/runs`` lists every run and a chart of ``KEY`` over all of them has
    points of each (flagged partial while runs are read), before the warm-up is done."""
    import socket

    port = int(base.rsplit(":", 1)[1])
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.01)
    up = time.monotonic() - started
    while True:
        rows = httpx.get(base + "/api/runs", timeout=60).json()["runs"]
        if len(rows) >= runs:
            break
        time.sleep(0.02)
    listed = time.monotonic() - started
    ids = ",".join(r["id"] for r in rows)
    while True:
        answer = httpx.get(base + "/api/series", params={"key": KEY, "runs": ids, "width": 500},
                           timeout=120).json()
        if len(answer["runs"]) >= runs and all(r["cursor"] > 0 for r in answer["runs"]):
            break
        time.sleep(0.02)
    charted = time.monotonic() - started
    return {"server_accepts_s": round(up, 2), "list_s": round(listed, 2),
            "list_after_server_up_s": round(listed - up, 2), "chart_s": round(charted, 2),
            "chart_after_server_up_s": round(charted - up, 2),
            "chart_partial": bool(answer.get("partial"))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, default=Path("/tmp/trackmux-ui-scale"))
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=Path("ui_scale.json"))
    parser.add_argument("--latency-samples", type=int, default=20)
    args = parser.parse_args()
    result: dict[str, Any] = {"runs": args.runs, "metrics": 20, "steps": args.steps}
    result["generate_s"] = generate(args.root, args.runs, 20, args.steps)
    shutil.rmtree(args.root / "live", ignore_errors=True)  # an earlier run's live run
    port = free_port()
    started = time.monotonic()
    server = subprocess.Popen([sys.executable, "-m", "trackmux", "ui", str(args.root),
                               "--port", str(port)], stdout=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        result["cold"] = cold_start(base, args.runs, started)
        began = time.monotonic()
        while True:  # warm: every run read to its end (its cursor at its last seq)
            try:
                rows = httpx.get(base + "/api/runs", timeout=30).json()["runs"]
                if len(rows) >= args.runs and all(
                        r.get("cursor") is not None and r["cursor"] >= r["last_seq"]
                        for r in rows):
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        result["warm_s"] = time.monotonic() - began
        result["memory_after_warm_mb"] = memory(server.pid)
        ids = ",".join(r["id"] for r in rows)
        # the first answer computes the downsampling; repeats come from the answer cache
        # (keyed by the runs' cursors) until a run moves
        began, used = time.perf_counter(), cpu_seconds(server.pid)
        httpx.get(f"{base}/api/series?key={KEY}&runs={ids}&width=1000", timeout=30)
        result["api_chart_100_runs_first"] = {"s": time.perf_counter() - began,
                                              "server_cpu_s": cpu_seconds(server.pid) - used}
        result["api_runs"] = timed(lambda: httpx.get(base + "/api/runs", timeout=30),
                                   server.pid)
        result["api_chart_100_runs"] = timed(lambda: httpx.get(
            f"{base}/api/series?key={KEY}&runs={ids}&width=1000", timeout=30), server.pid)
        size = len(httpx.get(f"{base}/api/series?key={KEY}&runs={ids}&width=1000").content)
        result["api_chart_bytes"] = size
        result["load_average_before_browser"] = load()
        result.update(browser(base, args))
        result["load_average_after_browser"] = load()
        result["memory_end_mb"] = memory(server.pid)
    finally:
        server.terminate()
        server.wait(30)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


def browser(base: str, args: argparse.Namespace) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    import trackmux

    out: dict[str, Any] = {}
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        lists, charts, arrivals = [], [], []
        for _ in range(5):
            page = chromium.new_page(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
            page.goto(f"{base}/#runs=all&filter={KEY}")
            page.wait_for_function(f"document.querySelectorAll('#runs tbody tr').length >= "
                                   f"{args.runs}", polling="raf", timeout=60_000)
            lists.append(page.evaluate("performance.now()") / 1000)
            page.wait_for_function("(() => { const c = window.trackmuxUI && window.trackmuxUI"
                                   ".state.charts[0]; return c && c.handle && c.handle.plot"
                                   f".series.length > {args.runs}; }})()", polling="raf",
                                   timeout=60_000)
            charts.append(page.evaluate("performance.now()") / 1000)
            # where the time went: each API answer's arrival, from navigation start
            arrivals.append(page.evaluate(
                "() => Object.fromEntries(performance.getEntriesByType('resource')"
                ".filter(e => e.name.includes('/api/') || e.name.includes('.js'))"
                ".map(e => [new URL(e.name).pathname, +(e.responseEnd / 1000).toFixed(3)]))"))
            page.close()
        out["paint_run_list_s"] = {"median": statistics.median(lists), "all": lists}
        out["paint_chart_100_runs_s"] = {"median": statistics.median(charts), "all": charts}
        # the browser's share: from the chart's data fully arrived to uPlot drawn
        after = [c - a["/api/series"] for c, a in zip(charts, arrivals, strict=True)
                 if "/api/series" in a]
        out["chart_after_data_s"] = {"median": statistics.median(after), "all": after}
        out["responses_arrived_s"] = arrivals
        # log() -> page
        run = trackmux.init(project="live", name="live-latency", backends=[], dir=args.root)
        run.log({"live/marker": 0.0}, step=0)  # a key no other run of the folder has
        time.sleep(2.5)  # the folder scan picks the new run up
        page = chromium.new_page(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
        page.goto(f"{base}/#runs=all&filter=live/marker")
        page.wait_for_function("(() => { const c = window.trackmuxUI.state.charts[0]; "
                               "return c && c.handle; })()", timeout=60_000)
        latencies = []
        for i in range(1, args.latency_samples + 1):
            time.sleep(random.uniform(0.2, 1.2))
            before = time.time()
            run.log({"live/marker": float(i)}, step=i)
            seen = page.evaluate(
                "(s) => new Promise(res => { const check = () => { const c = window.trackmuxUI"
                ".state.charts[0]; if (c.handle.plot.data[0].includes(s)) res(Date.now()); "
                "else requestAnimationFrame(check); }; check(); })", i)
            latencies.append(seen / 1000 - before)
        run.finish()
        out["log_to_page_s"] = {"median": statistics.median(latencies), "max": max(latencies),
                                "n": len(latencies)}
        chromium.close()
    os.environ.pop("TRACKMUX_DIR", None)
    return out


if __name__ == "__main__":
    main()
