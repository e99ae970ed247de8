"""The doctor's false-alarm rate and its detection of faults, on generated runs (issue 42).

    python -m benchmarks.doctor_calibration [--quick] [--runs 1000] [--per-fault 30]
                                            [--workers 2] [--show 5] [--json out.json]
                                            [--entropy-fault stalls|climbs]

Every run (benchmarks/doctor_runs.py) is fed to the doctor in memory, as ``trackmux
doctor`` judges a finished spool: the default rules (config.resolve(True)), every event
in order through ``Doctor.feed``, then one ``tick`` with the trainer gone. No spool is
written. Only warning and critical findings count; ``info`` never alarms anyone.

Healthy runs: the share with any finding, per rule (also as findings per 1,000 training
steps), per noise family, scenario and dialect. Faulty runs: the share found by the rules
the fault's family names (:data:`doctor_runs.FAULTS`) at or after the onset, and the
delay in steps from the onset to the step whose event raised the finding (``raised``:
what a live run sees) and to the step the finding dates itself from (``dated``); a
warning before the onset on a faulty run is counted apart (an alarm about nothing yet).

Targets (issue 42): at most 1% of healthy runs with any finding, no rule above 0.5%;
faults found >= 90%, median delay <= 10 steps after the onset. ``--quick`` is 100
healthy runs and 5 of each fault, for iterating.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from benchmarks.doctor_runs import ENTROPY_FAULT, FAULTS, Run, draw, events

SERIOUS = ("warning", "critical")
#: the seeds of faulty runs start here (healthy runs use 0, 1, 2 ...)
FAULT_SEED = 1_000_000


def judge(run: Run, rules: Any = True) -> dict[str, Any]:
    """The doctor over ``run`` with ``rules`` (config.resolve's forms: True for the
    defaults, or a mapping of overrides): every finding, with the step whose event
    raised it."""
    from trackmux.doctor.config import resolve
    from trackmux.doctor.engine import Doctor
    from trackmux.doctor.findings import Finding

    raw: list[tuple[Finding, int]] = []
    now = [0]
    doctor = Doctor(resolve(rules))
    for detector in doctor.detectors:  # each detector's own findings, before the engine
        _record(detector, raw, now)    # tells those of one event together as one
    last = 0.0
    for event in events(run):
        now[0] = event.step
        doctor.feed(event)
        last = event.time
    doctor.tick(last, False)
    found = [{"rule": f.rule, "severity": f.severity, "dated": f.step, "raised": raised,
              "message": f.message[:400]} for f, raised in raw]
    return {"seed": run.seed, "label": run.label(), "dialect": run.dialect,
            "noise": family(run), "scenario": run.scenario, "steps": run.steps,
            "logged": run.logged, "every": run.every, "fault": run.fault,
            "onset": run.onset, "found": found}


def _record(detector: Any, raw: list[tuple[Any, int]], now: list[int]) -> None:
    """Keep what ``detector`` raises, with the step of the event it raised it at."""
    update, tick = detector.update, detector.tick

    def recorded_update(event: Any) -> Any:
        found = update(event)
        raw.extend((f, now[0]) for f in found)
        return found

    def recorded_tick(clock: float, alive: bool) -> Any:
        found = tick(clock, alive)
        raw.extend((f, now[0]) for f in found)
        return found

    detector.update, detector.tick = recorded_update, recorded_tick


def family(run: Run) -> str:
    if run.noise == "iid":
        return f"iid x{run.scale:g}"
    if run.noise == "ar1":
        return "ar1 phi<0.7" if run.phi < 0.7 else "ar1 phi>=0.7"
    return f"student_t df{run.df:g}"


def _job(item: tuple[int, str, Any]) -> dict[str, Any]:
    seed, fault, rules = item
    return judge(draw(seed, fault), rules)


def run_all(items: Sequence[tuple[int, str, Any]], workers: int) -> list[dict[str, Any]]:
    if workers <= 1:
        return [_job(i) for i in items]
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        return list(pool.imap_unordered(_job, items, chunksize=4))


def serious(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in result["found"] if f["severity"] in SERIOUS]


def _matches(rule: str, wanted: Iterable[str]) -> bool:
    return any(rule == w or rule.startswith(w) for w in wanted)


def healthy_report(results: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(results)
    steps = sum(r["steps"] for r in results)
    runs_by_rule: Counter[str] = Counter()
    findings_by_rule: Counter[str] = Counter()
    for r in results:
        hits = serious(r)
        findings_by_rule.update(f["rule"] for f in hits)
        runs_by_rule.update({f["rule"] for f in hits})
    groups: dict[str, dict[str, list[bool]]] = {"noise": defaultdict(list),
                                                "scenario": defaultdict(list),
                                                "dialect": defaultdict(list)}
    for r in results:
        alarm = bool(serious(r))
        for what, table in groups.items():
            table[r[what]].append(alarm)
    return {
        "runs": n, "steps": steps,
        "any": sum(bool(serious(r)) for r in results) / max(1, n),
        "rules": {rule: {"runs": runs_by_rule[rule] / n,
                         "per_1000_steps": 1000 * findings_by_rule[rule] / max(1, steps)}
                  for rule in sorted(runs_by_rule)},
        **{what: {k: {"runs": len(v), "any": sum(v) / len(v)} for k, v in sorted(t.items())}
           for what, t in groups.items()},
    }


def _pct(values: list[int], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def fault_report(results: list[dict[str, Any]]) -> dict[str, Any]:
    by_fault: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        by_fault[r["fault"]].append(r)
    out: dict[str, Any] = {}
    all_raised: list[int] = []
    all_points: list[float] = []
    all_found = 0
    by_every: dict[str, list[int | None]] = defaultdict(list)
    for name, runs in sorted(by_fault.items()):
        wanted = FAULTS[name].rules
        raised: list[int] = []
        dated: list[int] = []
        points: list[float] = []
        early = 0
        rules: Counter[str] = Counter()
        for r in runs:
            hits = serious(r)
            if any(f["raised"] < r["onset"] for f in hits):
                early += 1
            right = [f for f in hits if f["raised"] >= r["onset"] and
                     _matches(f["rule"], wanted)]
            if right:
                first = min(right, key=lambda f: f["raised"])
                rules[first["rule"]] += 1
                raised.append(first["raised"] - r["onset"])
                dated.append(first["dated"] - r["onset"])
                every = max(1, r["steps"] // max(1, r["logged"]))
                points.append((first["raised"] - r["onset"]) / every)
            by_every[_every_bucket(r)].append(
                first["raised"] - r["onset"] if right else None)
        all_raised += raised
        all_points += points
        all_found += len(raised)
        out[name] = {"runs": len(runs), "found": len(raised) / len(runs),
                     "raised_median": _pct(raised, 0.5), "raised_p90": _pct(raised, 0.9),
                     "dated_median": _pct(dated, 0.5), "dated_p90": _pct(dated, 0.9),
                     "points_median": statistics.median(points) if points else None,
                     "alarm_before_onset": early / len(runs), "by": dict(rules)}
    total = sum(len(v) for v in by_fault.values())
    out["all"] = {"runs": total, "found": all_found / max(1, total),
                  "raised_median": _pct(all_raised, 0.5), "raised_p90": _pct(all_raised, 0.9),
                  "points_median": statistics.median(all_points) if all_points else None,
                  "points_p90": (sorted(all_points)[int(0.9 * len(all_points))]
                                 if all_points else None)}
    out["all"]["by_every"] = _delay_by_every(by_every, results)
    return out


#: the faulty runs' logging intervals, in the groups the delay is told by
EVERY_BUCKETS = ((1, 2), (3, 9), (10, 50))


def _every_bucket(r: dict[str, Any]) -> str:
    every = r["every"]
    return next(f"{lo}-{hi}" for lo, hi in EVERY_BUCKETS if every <= hi)


def _delay_by_every(by_every: dict[str, list[int | None]],
                    results: list[dict[str, Any]]) -> dict[str, Any]:
    """The delay per logging interval, beside the floors the logging alone sets: a
    fault's onset is a logged step that does not show it yet, so a verdict on one point
    comes ``every`` steps after it at the earliest, one confirmed on a second point
    2 * ``every`` steps after it (what a median over all faulty runs is bounded by)."""
    out: dict[str, Any] = {}
    for lo, hi in EVERY_BUCKETS:
        name = f"{lo}-{hi}"
        delays = by_every.get(name, [])
        everies = [r["every"] for r in results if _every_bucket(r) == name]
        found = [d for d in delays if d is not None]
        out[name] = {"runs": len(delays), "found": len(found) / max(1, len(delays)),
                     "raised_median": _pct(found, 0.5),
                     "one_point_floor": _pct(everies, 0.5),
                     "two_point_floor": _pct([2 * e for e in everies], 0.5)}
    everies = [r["every"] for r in results]
    out["all"] = {"one_point_floor": _pct(everies, 0.5),
                  "two_point_floor": _pct([2 * e for e in everies], 0.5),
                  "two_point_within_10": (sum(2 * e <= 10 for e in everies)
                                          / max(1, len(everies)))}
    return out


def _show(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_report(healthy: dict[str, Any], faults: dict[str, Any]) -> None:
    print(f"healthy runs: {healthy['runs']} ({healthy['steps']:,} steps); "
          f"with any warning/critical: {healthy['any']:.1%} (target <= 1%)")
    print(f"  {'rule':<22} {'runs':>7} {'per 1k steps':>13}")
    for rule, row in sorted(healthy["rules"].items(), key=lambda kv: -kv[1]["runs"]):
        flag = "  > 0.5%" if row["runs"] > 0.005 else ""
        print(f"  {rule:<22} {row['runs']:>7.1%} {row['per_1000_steps']:>13.4f}{flag}")
    for what in ("noise", "scenario", "dialect"):
        print(f"  by {what}: " + ", ".join(f"{k} {v['any']:.1%} of {v['runs']}"
                                          for k, v in healthy[what].items()))
    print(f"faulty runs: {faults['all']['runs']}; found {faults['all']['found']:.1%} "
          f"(target >= 90%), delay median {_show(faults['all']['raised_median'])} steps, p90 "
          f"{_show(faults['all']['raised_p90'])} (target median <= 10); in logged points "
          f"median {_show(faults['all']['points_median'], 1)}, p90 "
          f"{_show(faults['all']['points_p90'], 1)}")
    print(f"  {'fault':<18} {'runs':>5} {'found':>7} {'raised med/p90':>15} "
          f"{'dated med/p90':>14} {'points':>7} {'early':>6}  found by")
    for name, row in faults.items():
        if name == "all":
            continue
        print(f"  {name:<18} {row['runs']:>5} {row['found']:>7.0%} "
              f"{_show(row['raised_median']):>7}/{_show(row['raised_p90']):<7} "
              f"{_show(row['dated_median']):>6}/{_show(row['dated_p90']):<7} "
              f"{_show(row['points_median'], 1):>7} {row['alarm_before_onset']:>6.0%}  "
              + ", ".join(f"{k} {v}" for k, v in row["by"].items()))
    floors = faults["all"]["by_every"]
    print("  delay by logging interval (the floor: the first / second logged point after "
          "the onset, median):")
    for name, row in floors.items():
        if name == "all":
            continue
        print(f"    every {name:<6} {row['runs']:>4} runs, found {row['found']:.0%}, delay "
              f"median {_show(row['raised_median'])} (floor {_show(row['one_point_floor'])}"
              f" / {_show(row['two_point_floor'])})")
    whole = floors["all"]
    print(f"    all runs: floor {_show(whole['one_point_floor'])} / "
          f"{_show(whole['two_point_floor'])} steps; a second point within 10 steps of the "
          f"onset in {whole['two_point_within_10']:.0%} of the runs")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.doctor_calibration",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 healthy runs, 5 per fault")
    parser.add_argument("--runs", type=int, default=None, help="healthy runs (1000)")
    parser.add_argument("--per-fault", type=int, default=None, help="runs per fault (30)")
    parser.add_argument("--seed", type=int, default=0, help="the first healthy seed")
    parser.add_argument("--workers", type=int, default=2, help="processes (at most 2)")
    parser.add_argument("--show", type=int, default=0,
                        help="print this many false alarms per rule, and missed faults")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--rules", default=None,
                        help="the doctor's settings as JSON (overrides of the defaults, "
                             'e.g. \'{"reward_hacking": {"sigmas": 4}}\'), or a rules file')
    parser.add_argument("--entropy-fault", choices=("stalls", "climbs"), default="stalls",
                        help="the entropy-collapse fault's reward: its climb stops at the "
                             "onset (stalls), or goes on as in a healthy run (climbs, the "
                             "shape before 2026-12-07)")
    args = parser.parse_args(argv)
    os.environ[ENTROPY_FAULT] = args.entropy_fault  # (read by spawned workers too)
    runs = args.runs if args.runs is not None else (100 if args.quick else 1000)
    per_fault = args.per_fault if args.per_fault is not None else (5 if args.quick else 30)
    if runs < 1 or per_fault < 0:
        parser.error("--runs must be >= 1 and --per-fault >= 0")
    workers = max(1, min(2, args.workers))
    rules: Any = True
    if args.rules:
        rules = json.loads(args.rules) if args.rules.lstrip().startswith("{") else args.rules
        from trackmux.doctor.config import resolve

        try:
            resolve(rules)
        except ValueError as exc:
            parser.error(f"--rules: {exc}")
    items = [(args.seed + i, "", rules) for i in range(runs)]
    names = sorted(FAULTS)
    items += [(FAULT_SEED + args.seed + i, names[i % len(names)], rules)
              for i in range(per_fault * len(names))]
    started = time.perf_counter()
    results = run_all(items, workers)
    seconds = time.perf_counter() - started
    healthy = sorted((r for r in results if not r["fault"]), key=lambda r: r["seed"])
    faulty = sorted((r for r in results if r["fault"]), key=lambda r: r["seed"])
    h, f = healthy_report(healthy), fault_report(faulty)
    print(f"{len(results)} runs judged in {seconds:.0f} s with {workers} worker(s) "
          f"({time.strftime('%Y-%m-%d', time.gmtime())})")
    print_report(h, f)
    if args.show:
        _print_examples(healthy, faulty, args.show)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"healthy": h, "faults": f, "date": time.strftime("%Y-%m-%d"),
                       "runs": [{k: v for k, v in r.items()} for r in results
                                if serious(r) or r["fault"]]}, out, indent=1)
    return 0


def _print_examples(healthy: list[dict[str, Any]], faulty: list[dict[str, Any]],
                    limit: int) -> None:
    shown: Counter[str] = Counter()
    print("false alarms:")
    for r in healthy:
        for f in serious(r):
            if shown[f["rule"]] < limit:
                shown[f["rule"]] += 1
                print(f"  [{f['rule']}] {r['label']}\n      at {f['raised']}: {f['message']}")
    missed: Counter[str] = Counter()
    print("faults missed:")
    for r in faulty:
        wanted = FAULTS[r["fault"]].rules
        if not any(f["raised"] >= r["onset"] and _matches(f["rule"], wanted)
                   for f in serious(r)) and missed[r["fault"]] < limit:
            missed[r["fault"]] += 1
            others = ", ".join(f"{f['rule']}@{f['raised']}" for f in r["found"])
            print(f"  {r['label']}: {others or 'nothing'}")


if __name__ == "__main__":
    sys.exit(main())
