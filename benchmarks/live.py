"""B1 caller cost, B2 outage, B6 finish: one real mlflow server, agents alternating.

Order: B1 (healthy server) -> B2 (the server killed right after B1, under the same live
trackmux run, which still has B1's backlog for mlflow: an outage mid-training) -> server
restarted on the same port and database -> B6 (finish with healthy backends, in fresh
runs; then with the server paused, so one backend hangs). Every agent starts at the
beginning, in parallel, so no import sits between the phases.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from benchmarks.agents import Agent
from benchmarks.common import FOUR, stats
from trackmux.testing.mlflow_server import MlflowServer

BLOCK = 10  # trackmux/floor steps per verl step: verl's log() is ~1000x slower


def _rounds(tm: Agent, verl: Agent | None, start: int, rounds: int, vstart: int,
            gap: float = 0.0) -> tuple[dict[str, list[int]], int, int]:
    out: dict[str, list[int]] = {"trackmux": [], "floor": [], "verl": []}
    step, vstep = start, vstart
    for _ in range(rounds):
        res = tm.call("block", step, BLOCK)
        out["trackmux"] += res["trackmux"]
        out["floor"] += res["floor"]
        step += BLOCK
        if verl is not None:
            out["verl"] += verl.call("block", vstep, 1)["verl"]
            vstep += 1
        elif gap:
            time.sleep(gap)
    return out, step, vstep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=200, help="B1: verl steps")
    ap.add_argument("--b2-rounds", type=int, default=100,
                    help="B2: blocks of trackmux steps, paced as in B1")
    ap.add_argument("--hang-deadline", type=float, default=5.0)
    ap.add_argument("--verl-cap", type=float, default=10.0)
    args = ap.parse_args()
    root = Path(args.root)
    result: dict[str, Any] = {}
    server = MlflowServer(root / "mlflow-live")
    t0 = time.perf_counter()
    server.start()
    result["server_start_s"] = time.perf_counter() - t0
    agents: list[Agent] = []
    try:
        cfg = {"root": str(root), "mlflow_uri": server.url}
        tm = Agent("trackmux", {**cfg, "name": "b1-trackmux"})
        verl = Agent("verl", {**cfg, "name": "b1-verl"})
        tm6 = Agent("trackmux", {**cfg, "name": "b6-healthy"})
        verl2 = Agent("verl", {**cfg, "name": "b2-verl"})  # for one call with the server dead
        tm6h = Agent("trackmux", {**cfg, "name": "b6-hung"})
        agents += [tm, verl, tm6, verl2, tm6h]
        for a in agents:
            a.ready()
        # warm up: first calls open files, wandb-core, the mlflow experiment
        tm.call("block", 0, 20)
        verl.call("block", 0, 5)
        tm.call("wait", 120.0)
        step, vstep = 20, 5

        # ---- B1
        t0 = time.perf_counter()
        b1, step, vstep = _rounds(tm, verl, step, args.rounds, vstep)
        b1_wall = time.perf_counter() - t0
        s = {k: stats(v) for k, v in b1.items()}
        result["B1"] = {
            "backends": FOUR, "mlflow": "HTTP server on 127.0.0.1 (sqlite store)",
            "metrics_per_call": 100, "block": BLOCK, "wall_s": b1_wall,
            "trackmux": s["trackmux"], "floor": s["floor"], "verl": s["verl"],
            "ratio_trackmux_over_floor": s["trackmux"]["median_us"] / s["floor"]["median_us"],
            "ratio_verl_over_trackmux": s["verl"]["median_us"] / s["trackmux"]["median_us"],
            # (acked, last) per backend when B1 ended: how far delivery lagged the caller
            "trackmux_delivery_at_end": tm.call("wait", 0.0)["state"],
        }
        gap = s["verl"]["median_us"] / 1e6

        # ---- B2: kill the server under the live B1 run; same pacing as B1 (gap = verl's
        # median instead of verl's call)
        server.kill()
        time.sleep(1.0)
        b2, step, _ = _rounds(tm, None, step, args.b2_rounds, 0, gap=gap)
        s2 = {k: stats(v) for k, v in b2.items() if v}
        result["B2"] = {
            "trackmux": s2["trackmux"], "floor": s2["floor"], "gap_s": gap,
            "healthy_median_us": s["trackmux"]["median_us"],
            "ratio_outage_over_healthy": s2["trackmux"]["median_us"] / s["trackmux"]["median_us"],
            "ratio_trackmux_over_floor": s2["trackmux"]["median_us"] / s2["floor"]["median_us"],
        }
        # verl with the server dead: one log() call, given at most --verl-cap seconds
        verl2.send("block", 0, 1)
        t0 = time.perf_counter()
        try:
            res = verl2.reply(args.verl_cap)
            result["B2"]["verl_one_call"] = {"seconds": time.perf_counter() - t0,
                                             "returned": True, "us": res["verl"][0] / 1000}
        except Exception as exc:  # blocked past the cap (or raised): either way, the trainer stops
            result["B2"]["verl_one_call"] = {"seconds": time.perf_counter() - t0,
                                             "returned": False, "error": str(exc)[-300:]}
            verl2.kill()
        # the B1 run ends here; what mlflow did not get stays in its spool
        result["B2"]["trackmux_finish"] = tm.call("finish", 2.0, timeout=60)
        t0 = time.perf_counter()
        server.restart()
        result["server_restart_s"] = time.perf_counter() - t0

        # ---- B6 healthy: as many steps as verl logged in B1, into a fresh trackmux run,
        # then finish(). finish() is measured once delivery has caught up (the usual case:
        # a training step takes longer than delivering its metrics); the drain of the
        # burst is reported too.
        tm6.call("block", 0, vstep)
        drain = tm6.call("wait", 120.0)
        b6_tm = tm6.call("finish", 60.0, timeout=120)
        b6_tm["drain_before_s"] = drain["seconds"]
        b6_verl = verl.call("finish", 60.0, timeout=180)
        result["B6"] = {"healthy": {
            "steps": vstep, "trackmux": b6_tm, "verl": b6_verl,
            "ratio_verl_over_trackmux": b6_verl["seconds"] / max(b6_tm["seconds"], 1e-9)}}

        # ---- B6 hung: the mlflow server stopped (SIGSTOP): requests hang, no error
        tm6h.call("block", 0, 20)
        tm6h.call("wait", 120.0)
        server.pause()
        try:
            tm6h.call("block", 20, 200)
            time.sleep(0.5)  # the mlflow worker is now blocked inside an HTTP request
            hung = tm6h.call("finish", args.hang_deadline, timeout=args.hang_deadline + 60)
        finally:
            server.resume()
        hung["deadline_s"] = args.hang_deadline
        hung["overshoot_s"] = hung["seconds"] - args.hang_deadline
        hung["respected"] = hung["seconds"] <= args.hang_deadline + 1.0
        result["B6"]["hung"] = hung
    finally:
        for a in agents:
            try:
                a.close(20)
            except Exception:
                a.kill()
        server.stop()
    Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
