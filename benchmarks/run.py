"""Run B1-B6, print the table, write the JSON (default benchmarks/results/latest.json).

    python -m benchmarks                 # everything (6-10 minutes on 2 cores)
    python -m benchmarks --only B3,B4    # a subset; --quick for a smoke run

Each session is its own process with the offline environment of ``common.offline_env``;
every file goes to a temporary directory that is removed at the end (``--keep`` keeps it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import machine, offline_env, versions

HERE = Path(__file__).resolve().parent
SESSIONS = {  # session -> (module, benchmarks it produces)
    "startup": ("benchmarks.startup", ["B5"]),
    "live": ("benchmarks.live", ["B1", "B6", "B2"]),
    "ingest": ("benchmarks.ingest", ["B3"]),
    "resync": ("benchmarks.resync", ["B4"]),
    "loop": ("benchmarks.loop", ["B7"]),
}


def _session_args(name: str, quick: bool, b3_seconds: float, ceiling_points: int
                  ) -> list[str]:
    if name == "live":
        return ["--rounds", "40", "--b2-rounds", "20"] if quick else []
    if name == "ingest":
        return ["--seconds", str(3.0 if quick else b3_seconds)]
    if name == "resync":
        sizes = (["--points", "50000", "--mlflow-points", "20000", "--ceiling-points", "20000"]
                 if quick else ["--points", "1000000"])
        return sizes + (["--ceiling-points", str(ceiling_points)] if ceiling_points else [])
    if name == "startup":
        return ["--repeat", "2" if quick else "5"]
    if name == "loop":
        # 3 rounds of all four modes, then 12 of none and trackmux for the 5% verdict
        return ["--steps", "100", "--rounds", "1"] if quick else ["--pair-rounds", "12"]
    return []


def _us(x: float) -> str:
    return f"{x:,.1f} us" if x < 1000 else f"{x / 1000:,.2f} ms"


def _check(ok: bool) -> str:
    return "met" if ok else "MISSED"


def table(res: dict[str, Any]) -> list[list[str]]:
    """Rows: benchmark, figure, trackmux, comparison, ratio, target, verdict."""
    rows: list[list[str]] = []
    b1 = res.get("B1")
    if b1:
        tm, fl, vl = b1["trackmux"], b1["floor"], b1["verl"]
        r_floor, r_verl = b1["ratio_trackmux_over_floor"], b1["ratio_verl_over_trackmux"]
        rows.append(["B1", "log() 100 floats, median", _us(tm["median_us"]),
                     f"floor {_us(fl['median_us'])}", f"{r_floor:.2f}x floor", "<= 3x floor",
                     _check(r_floor <= 3)])
        rows.append(["B1", "log() median vs verl Tracking", _us(tm["median_us"]),
                     f"verl {_us(vl['median_us'])}", f"verl {r_verl:,.0f}x slower",
                     ">= 1000x", _check(r_verl >= 1000)])
        rows.append(["B1", "log() p99", _us(tm["p99_us"]),
                     f"floor {_us(fl['p99_us'])}, verl {_us(vl['p99_us'])}",
                     f"verl {vl['p99_us'] / tm['p99_us']:,.0f}x", "-", "-"])
    b2 = res.get("B2")
    if b2:
        r = b2["ratio_outage_over_healthy"]
        verl = b2.get("verl_one_call", {})
        vtxt = (f"verl: one call {'returned' if verl.get('returned') else 'still blocked'} "
                f"after {verl.get('seconds', 0):.1f} s") if verl else ""
        rows.append(["B2", "log() median, mlflow dead", _us(b2["trackmux"]["median_us"]),
                     f"healthy {_us(b2['healthy_median_us'])}; {vtxt}", f"{r:.2f}x healthy",
                     "<= 1.5x", _check(r <= 1.5)])
        rows.append(["B2", "log() p99, mlflow dead", _us(b2["trackmux"]["p99_us"]),
                     f"floor {_us(b2['floor']['p99_us'])}", "-", "-", "-"])
    b3 = res.get("B3")
    if b3:
        acc, com = b3["accepted_points_per_s"], b3["committed_points_per_s"]
        rows.append(["B3", "points/s into the spool (committed)", f"{com:,.0f}",
                     f"accepted by log(): {acc:,.0f}", "-", ">= 1,000,000",
                     _check(com >= 1e6)])
        rows.append(["B3", "peak RSS growth", f"{b3['rss_growth_mb']:.0f} MB",
                     f"spool on disk {b3['spool_mb']:.0f} MB", "-", "< 100 MB",
                     _check(b3["rss_growth_mb"] < 100)])
    b4 = res.get("B4")
    if b4:
        for label in ("mlflow_sqlite", "mlflow_http", "tensorboard"):
            r4 = b4.get(label)
            if r4:
                f = r4["fraction_of_ceiling"]
                rows.append(["B4", f"sync {r4.get('points', b4['points']):,} pts -> {label}",
                             f"{r4['trackmux_points_per_s']:,.0f} pts/s",
                             f"ceiling {r4['ceiling_points_per_s']:,.0f} pts/s",
                             f"{100 * f:.0f}% of ceiling", ">= 80%", _check(f >= 0.8)])
    b5 = res.get("B5")
    if b5:
        on, off = b5["autoload_on"], b5["autoload_off"]
        plug = b5.get("plugin_installed")

        def setups(get: Any) -> str:  # the other two set-ups, for the comparison column
            with_plugin = f"third-party plugin installed {get(plug)}; " if plug else ""
            return f"{with_plugin}autoload off {get(off)}"

        rows.append(["B5", "import trackmux", f"{on['import_s'] * 1000:.0f} ms",
                     setups(lambda r: f"{r['import_s'] * 1000:.0f} ms"), "-", "-", "-"])
        rows.append(["B5", "init() -> first log() return, file",
                     f"{on['file']['init_to_log'] * 1000:.1f} ms",
                     setups(lambda r: f"{r['file']['init_to_log'] * 1000:.1f} ms"),
                     "-", "-", "-"])
        rows.append(["B5", "init() -> first log() return, four backends",
                     f"{on['four']['init_to_log'] * 1000:.1f} ms",
                     f"verl Tracking() + log(): {b5['verl']['init_to_log']:.2f} s",
                     f"verl {b5['ratio_verl_over_trackmux_init_to_log']:,.0f}x slower",
                     "-", "-"])
        rows.append(["B5", "init() -> first event delivered, four backends",
                     f"{on['four']['first_delivered']:.2f} s",
                     f"autoload off {off['four']['first_delivered']:.2f} s", "-", "-", "-"])
    b6 = res.get("B6")
    if b6:
        h = b6.get("healthy")
        if h:
            rows.append(["B6", f"finish(), healthy, after {h['steps']} steps delivered "
                         f"(drain of the burst before it: {h['trackmux']['drain_before_s']:.1f} s)",
                         f"{h['trackmux']['seconds']:.2f} s"
                         + ("" if h["trackmux"]["complete"] else " (incomplete)"),
                         f"verl finish() {h['verl']['seconds']:.2f} s",
                         f"{h['ratio_verl_over_trackmux']:.2f}x", "-", "-"])
        g = b6.get("hung")
        if g:
            rows.append(["B6", "finish(timeout) with mlflow hung (SIGSTOP)",
                         f"{g['seconds']:.2f} s", f"deadline {g['deadline_s']:.1f} s",
                         f"pending {sum(g['pending'].values())} events kept",
                         "returns by the deadline", _check(g["respected"])])
    b7 = res.get("B7")
    if b7:
        base = b7["none_loop_s"]
        tm = b7["modes"].get("trackmux")
        others = ", ".join(f"{m} {e['overhead_pct']:+.0f}%" for m, e in b7["modes"].items()
                           if m not in ("none", "trackmux"))
        if tm:
            # the verdict: each round against the untracked loop of the same round
            paired = tm.get("paired_overhead_pct") or {"median": tm["overhead_pct"],
                                                       "ci90": [float("nan")] * 2}
            rows.append(["B7", f"CPU-bound loop overhead, wandb+mlflow+tensorboard, per "
                         f"round, median of {tm.get('rounds', '?')} (untracked {base:.2f} s)",
                         f"{paired['median']:+.1f}%",
                         f"90% interval {paired['ci90'][0]:+.1f}..{paired['ci90'][1]:+.1f}%; "
                         f"{others}", "-", "<= 5%", _check(paired["median"] <= 5)])
            rows.append(["B7", "trainer peak RSS over the untracked loop",
                         f"{tm['rss_over_untracked_mb']:+.1f} MB",
                         ", ".join(f"{m} {e['rss_over_untracked_mb']:+.0f} MB"
                                   for m, e in b7["modes"].items()
                                   if m not in ("none", "trackmux")),
                         "-", "<= 30 MB", _check(tm["rss_over_untracked_mb"] <= 30)])
            lat = tm.get("latency_ms", {})
            if lat:
                rows.append(["B7", "log() -> backend acknowledged, median",
                             ", ".join(f"{b} {v:.0f} ms" for b, v in lat.items()), "-", "-",
                             "<= 200 ms", _check(max(lat.values()) <= 200)])
    return rows


def render(rows: list[list[str]]) -> str:
    head = ["bench", "figure", "trackmux", "comparison", "ratio", "target", "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks")
    ap.add_argument("--only", default="", help="comma list of B1..B7 (sessions run whole)")
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument("--b3-seconds", type=float, default=30.0)
    ap.add_argument("--ceiling-points", type=int, default=0,
                    help="B4: points for mlflow's ceiling (default: a fifth of the run; "
                         "1000000 for the full size, ~4 more minutes)")
    ap.add_argument("--out", default=str(HERE / "results" / "latest.json"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    wanted = {b.strip().upper() for b in args.only.split(",") if b.strip()}
    root = Path(tempfile.mkdtemp(prefix="trackmux-bench-"))
    env = offline_env(root)
    env["PYTHONPATH"] = str(HERE.parent) + (":" + env["PYTHONPATH"]
                                            if env.get("PYTHONPATH") else "")
    report: dict[str, Any] = {"machine": machine(), "versions": versions(),
                              "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                              "quick": args.quick, "results": {}, "session_seconds": {},
                              "errors": {}}
    t_all = time.perf_counter()
    try:
        for name, (module, produces) in SESSIONS.items():
            if wanted and not wanted & set(produces):
                continue
            out = root / f"{name}.json"
            cmd = [sys.executable, "-m", module, "--root", str(root), "--out", str(out),
                   *_session_args(name, args.quick, args.b3_seconds,
                                 args.ceiling_points)]
            print(f"== {name} ({', '.join(produces)})", flush=True)
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, env=env, cwd=root, timeout=900)
            report["session_seconds"][name] = round(time.perf_counter() - t0, 1)
            if proc.returncode != 0 or not out.exists():
                report["errors"][name] = f"exit code {proc.returncode}"
                print(f"!! session {name} failed (exit {proc.returncode})", flush=True)
                continue
            report["results"].update(json.loads(out.read_text()))
    finally:
        report["total_seconds"] = round(time.perf_counter() - t_all, 1)
        report["machine"]["load_after"] = __import__("os").getloadavg()
        rows = table(report["results"])
        if args.quick:  # smoke sizes: start-up costs dominate, the verdicts mean nothing
            rows = [[*r[:-1], "- (quick)" if r[-1] in ("met", "MISSED") else r[-1]]
                    for r in rows]
        report["table_markdown"] = render(rows)
        dest = Path(args.out)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(report, indent=1))
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print(report["table_markdown"])
    print(f"\ntotal {report['total_seconds']:.0f} s; sessions {report['session_seconds']}; "
          f"load before/after {report['machine']['load_before'][0]:.1f}/"
          f"{report['machine']['load_after'][0]:.1f}; JSON: {dest}")
    if report["errors"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
