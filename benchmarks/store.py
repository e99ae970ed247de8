"""B14, the team store (issue 35), against a private PostgreSQL cluster on this machine.

    python -m benchmarks.store                    # all three, default sizes
    python -m benchmarks.store --points 1000000 --crossings 20 --trainers 10
    python -m benchmarks.store --only ui       # trackmux ui DSN from a cold start

- sync: ``trackmux sync`` of a run of ``--points`` points (10,000 ``log()`` calls of 100
  floats at 1M) into the store, through core's delivery worker and the postgres backend
  (one COPY transaction per batch of 1,000 events); points/s, best of ``--repeats`` fresh
  databases, and the same run into mlflow's ``log_batch`` ceiling with ``--mlflow``.
- crossing: two "machines" (two spool roots, delivery processes) log into the store; a
  reader on a third (the store reader, and the UI's replica mirror) waits for each step;
  seconds from ``log()`` returning to the step being readable, p50/p95/max.
- trainers: ``--trainers`` trainer processes log at once into one store (each with its
  delivery process); each loop's ``log()`` cost against the same loops with no backend,
  and how long after the last loop ended every trainer had finished (everything stored).

Prints one JSON document (and ``--out FILE`` writes it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from benchmarks.common import N_METRICS, payload, report


def _count(dsn: str, sql: str) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(sql).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _fresh_db(pg: Any, name: str) -> str:
    pg.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", database="postgres")
    pg.sql(f"CREATE DATABASE {name}", database="postgres")
    return str(pg.dsn_for(pg.user, pg.password, name))


def make_run(root: Path, points: int) -> Path:
    import trackmux

    run = trackmux.init(project="bench", name="b12-source", backends=[], dir=root,
                        delivery="thread")
    for step in range(points // N_METRICS):
        run.log(payload(step), step=step)
    run.finish(timeout=600)
    assert run.dir is not None
    return Path(run.dir)


def bench_sync(pg: Any, work: Path, points: int, repeats: int) -> dict[str, Any]:
    from trackmux.core.delivery.sync import deliver
    from trackmux.plugins.postgres import PostgresBackend

    t0 = time.perf_counter()
    source = make_run(work / "sync-source", points)
    spooled = time.perf_counter() - t0
    passes = []
    for i in range(repeats):
        dsn = _fresh_db(pg, f"b12_sync_{i}")
        copy = work / f"sync-{i}"
        shutil.copytree(source, copy)
        for lock in copy.glob("*.lock"):
            lock.unlink()
        start = time.perf_counter()
        result = deliver(copy, {"postgres": lambda dsn=dsn: PostgresBackend({"dsn": dsn})},
                         timeout=1800)
        seconds = time.perf_counter() - start
        assert result.complete, result.problems
        stored = _count(dsn, "SELECT count(*) FROM trackmux.points")
        assert stored == points, (stored, points)
        passes.append({"seconds": round(seconds, 2), "points_per_s": round(points / seconds)})
    best = max(p["points_per_s"] for p in passes)
    return {"points": points, "spooled_in_s": round(spooled, 1), "passes": passes,
            "best_points_per_s": best, "goal_50k": best >= 50_000, "aim_200k": best >= 200_000}


def bench_mlflow_ceiling(work: Path, points: int) -> dict[str, Any]:
    """mlflow's ``log_batch`` (its fastest bulk API) into a sqlite store, same points."""
    import mlflow
    from mlflow.entities import Metric

    mlflow.set_tracking_uri(f"sqlite:///{work / 'mlflow.db'}")
    client = mlflow.MlflowClient()
    exp = client.create_experiment("b12")
    run = client.create_run(exp)
    t0 = time.perf_counter()
    ts = int(time.time() * 1000)
    batch: list[Any] = []
    for step in range(points // N_METRICS):
        batch += [Metric(k, v, ts, step) for k, v in payload(step).items()]
        if len(batch) >= 1000:
            client.log_batch(run.info.run_id, metrics=batch)
            batch = []
    if batch:
        client.log_batch(run.info.run_id, metrics=batch)
    seconds = time.perf_counter() - t0
    return {"points": points, "seconds": round(seconds, 2),
            "points_per_s": round(points / seconds)}


def bench_crossing(pg: Any, work: Path, crossings: int) -> dict[str, Any]:
    import trackmux
    from trackmux.store.read import StoreSource
    from trackmux.ui.mirror import StoreMirror

    dsn = _fresh_db(pg, "b12_cross")
    runs = []
    for host in ("machine-a", "machine-b"):
        os.environ["TRACKMUX_HOST"] = host
        runs.append(trackmux.init("bench", f"cross-{host}", backends=["postgres"],
                                  dir=work / host, backend_options={"postgres": {"dsn": dsn}}))
    os.environ.pop("TRACKMUX_HOST", None)
    for run in runs:
        run.log({"loss": 0.0}, step=0)
    source = StoreSource(dsn)
    deadline = time.monotonic() + 120
    while len(source.runs()) < 2 or min(e.last_seq for e in source.runs()) < 1:
        assert time.monotonic() < deadline, "runs never reached the store"
        time.sleep(0.05)
    mirror = StoreMirror(dsn, work / "replicas")
    mirror.start()
    entries = {e.host: e for e in source.runs()}
    reader_s, mirror_s = [], []
    from trackmux.core.spool.reader import SpoolReader

    for step in range(1, crossings + 1):
        host = ("machine-a", "machine-b")[step % 2]
        run = runs[step % 2]
        entry = entries[host]
        cursor = source.series(entry, "loss").cursor
        run.log({"loss": float(step)}, step=step)
        logged = time.perf_counter()
        seen_reader = seen_mirror = None
        while seen_reader is None or seen_mirror is None:
            now = time.perf_counter()
            assert now - logged < 60, f"step {step} never crossed"
            if seen_reader is None and step in source.series(entry, "loss", cursor).steps:
                seen_reader = now - logged
            if seen_mirror is None:
                folder = mirror.root / "bench" / f"{host}--{entry.run_id}"
                if (folder / "spool.db").exists():
                    reader = SpoolReader(folder)
                    try:
                        if reader.last_seq() >= cursor + 1:
                            seen_mirror = now - logged
                    finally:
                        reader.close()
            time.sleep(0.01)
        reader_s.append(seen_reader)
        mirror_s.append(seen_mirror)
        time.sleep(0.1)
    mirror.stop()
    source.close()
    for run in runs:
        run.finish(timeout=120)

    def summary(xs: list[float]) -> dict[str, float]:
        ordered = sorted(xs)
        return {"p50": round(statistics.median(ordered), 3),
                "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
                "max": round(ordered[-1], 3)}

    return {"crossings": crossings, "store_reader_s": summary(reader_s),
            "ui_replica_s": summary(mirror_s), "goal_2s": max(mirror_s) <= 2.0}


#: about 2 ms of one core here: a fixed amount of work, so a loop's CPU time is what its
#: process did and its wall time grows only with what it waited for (a core, a lock)
WORK_ITERATIONS = 60_000


def _work() -> int:
    x = 0
    for i in range(WORK_ITERATIONS):
        x += i
    return x


def trainer_child(tag: str, root: str, dsn: str, steps: int, work: str) -> None:
    """One trainer process: ``steps`` steps and one log() call of 100 floats each; a step
    is ~2 ms of CPU (``work`` "cpu") or 2 ms of waiting, as for a GPU's kernels ("wait").
    Prints the log() costs and the loop's wall and CPU time. ``dsn`` "-": no tracking."""
    import trackmux

    run: Any = None
    if dsn != "-":
        backends = ["postgres"] if dsn else []
        options = {"postgres": {"dsn": dsn}} if dsn else None
        run = trackmux.init("bench", tag, backends=backends, dir=root,
                            backend_options=options)
    costs = []
    started, cpu = time.perf_counter(), time.process_time()
    for step in range(steps):
        data = payload(step)
        if work == "cpu":
            _work()
        else:
            time.sleep(0.002)
        if run is not None:
            t = time.perf_counter_ns()
            run.log(data, step=step)
            costs.append((time.perf_counter_ns() - t) / 1000.0)
    loop_s, loop_cpu_s = time.perf_counter() - started, time.process_time() - cpu
    ended = time.time()
    if run is not None:
        run.finish(timeout=600)
    costs.sort()
    print(orjson.dumps({"median_us": statistics.median(costs) if costs else 0.0,
                        "p99_us": costs[int(0.99 * (len(costs) - 1))] if costs else 0.0,
                        "loop_s": loop_s, "loop_cpu_s": loop_cpu_s, "ended": ended}).decode())


def bench_trainers(pg: Any, work: Path, trainers: int, steps: int) -> dict[str, Any]:
    """The same ``trainers`` loops three ways, one after another: untracked, spool only,
    into the store; twice: steps that wait (a GPU trainer's thread) and steps that keep a
    core busy (on this 2-core machine, 10 of them and the PostgreSQL server compete for
    the cores: an upper bound of what the store's server costs a trainer beside it)."""
    import subprocess
    import sys

    def loops(store: str, tag: str, kind: str) -> tuple[list[dict[str, float]], float]:
        procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.store", "--trainer-child",
                                   f"{tag}-{kind}-{i}", str(work / tag), store, str(steps),
                                   kind], stdout=subprocess.PIPE, text=True)
                 for i in range(trainers)]
        results = []
        for proc in procs:
            out, _ = proc.communicate(timeout=1800)
            results.append(orjson.loads(out.strip().splitlines()[-1]))
        return results, max(r["ended"] for r in results)

    def med(rs: list[dict[str, float]], key: str) -> float:
        return round(statistics.median(r[key] for r in rs), 3)

    out: dict[str, Any] = {"trainers": trainers, "steps": steps,
                           "points": trainers * steps * N_METRICS}
    for kind in ("wait", "cpu"):
        dsn = _fresh_db(pg, f"b12_trainers_{kind}")
        ways = {"untracked": loops("-", "untracked", kind)[0],
                "spool_only": loops("", "spool-only", kind)[0]}
        ways["with_store"], last_loop_end = loops(dsn, "store", kind)
        finished = round(time.time() - last_loop_end, 2)
        stored = _count(dsn, "SELECT count(*) FROM trackmux.points")
        # the same with the server in the idle class: as if on its own machine
        idle_dsn = _fresh_db(pg, f"b12_trainers_{kind}_idle")
        pg.set_idle(True)
        try:
            ways["with_store_server_idle"], _ = loops(idle_dsn, "store-idle", kind)
        finally:
            pg.set_idle(False)
        out[kind] = {"stored": stored,
                     "everything_stored": stored == trainers * steps * N_METRICS,
                     "finish_after_last_loop_s": finished,
                     **{f"loop_s_{w}": med(rs, "loop_s") for w, rs in ways.items()},
                     **{f"loop_cpu_s_{w}": med(rs, "loop_cpu_s") for w, rs in ways.items()},
                     **{f"log_us_median_{w}": med(rs, "median_us") for w, rs in ways.items()
                        if w != "untracked"},
                     **{f"log_us_p99_{w}": med(rs, "p99_us") for w, rs in ways.items()
                        if w != "untracked"}}
    return out


def _load_ui_store(pg: Any, runs: int, keys: int, steps: int
                   ) -> tuple[str, list[str], float, Any]:
    """``runs`` finished runs of ``keys`` metrics x ``steps`` steps on 10 hosts, written
    straight into a fresh store (StoreWriter), and a small running run; its DSN, the
    keys, the seconds taken, and ``cross(i)``: write step ``i`` to the running run."""
    from trackmux.core.events import MetricsEvent
    from trackmux.store import schema
    from trackmux.store.connect import connect
    from trackmux.store.ingest import StoreWriter

    dsn = _fresh_db(pg, "b12_ui")
    conn = connect(dsn, autocommit=True)
    schema.migrate(conn)
    writer = StoreWriter(conn)
    names = [f"train/metric_{i:02d}" for i in range(keys)]
    t0 = time.perf_counter()
    for r in range(runs):
        run = writer.register({"run_id": f"ui-{r:03d}", "project": "bench", "name": f"ui-{r:03d}",
                               "started_at": 1.7e9 + r, "state": "finished"},
                              host=f"node-{r % 10}", user="bench")
        writer.status(run, "finished", 1.7e9 + r, {"run_id": f"ui-{r:03d}"})
        for start in range(0, steps, 5000):
            writer.write(run, [MetricsEvent({k: (s * (r + 1) + i) % 997 / 997.0
                                             for i, k in enumerate(names)}, s, 1.7e9 + s, s + 1)
                               for s in range(start, min(steps, start + 5000))])
    loaded = time.perf_counter() - t0
    # a small running run beside them: steps written to it while the UI copies the rest
    probe = writer.register({"run_id": "live-probe", "project": "bench", "name": "live-probe",
                             "started_at": 1.7e9 + runs}, host="node-live", user="bench")
    writer.status(probe, "running", 1.7e9 + runs, {"run_id": "live-probe"})
    writer.write(probe, [MetricsEvent({names[0]: 0.0}, 0, time.time(), 1)])

    def cross(i: int) -> None:
        writer.write(probe, [MetricsEvent({names[0]: float(i)}, i, time.time(), i + 1)])

    return dsn, names, loaded, cross


def _ui_start(dsn: str, names: list[str], runs: int, steps: int, env: dict[str, str],
              port: int, warm_requests: bool, cross: Any = None) -> dict[str, Any]:
    """Start ``trackmux ui DSN`` as a process; seconds from its start until the run list
    has every run, until a chart of one metric has points of every run, and until every
    run is complete in that chart (polled once a second then, as the page does).
    ``cross``: also time steps written to the running probe run during the backfill."""
    import socket
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    url = f"http://127.0.0.1:{port}/"

    def get(path: str) -> Any:
        with urllib.request.urlopen(url + path, timeout=600) as response:
            return orjson.loads(response.read())

    def timed(path: str) -> tuple[float, Any]:
        t0 = time.perf_counter()
        body = get(path)
        return time.perf_counter() - t0, body

    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", "from trackmux.cli.main import main; main()",
                             "ui", dsn, "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    out: dict[str, Any] = {}
    try:
        while True:  # the server accepts connections (Python, imports, the meta round)
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.perf_counter() - t0 < 600, "the server never started"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.01)
        up = time.perf_counter() - t0
        out["server_accepts_s"] = round(up, 2)
        listed: list[dict[str, Any]] = []
        first_answer = None
        while len(listed) < runs + 1:  # the list: every run with host, user and state
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.perf_counter() - t0 < 600, "the run list never filled"
            try:
                listed = get("api/runs")["runs"]
                first_answer = first_answer or time.perf_counter() - t0
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.02)
        out["first_api_runs_answer_s"] = round(first_answer or 0, 2)
        out["list_has_every_run_s"] = round(time.perf_counter() - t0, 2)
        out["list_has_every_run_after_server_up_s"] = round(time.perf_counter() - t0 - up, 2)
        out["listed_with_host_and_user"] = sum(1 for r in listed if r.get("host")
                                               and r.get("user"))
        probe = next(r["id"] for r in listed if r["name"] == "live-probe")
        rids = ",".join(r["id"] for r in listed if r["name"] != "live-probe")
        chart = f"api/series?key={names[0]}&runs={rids}"
        while True:  # a 100-run chart with points of every run
            assert time.perf_counter() - t0 < 600, "the chart never filled"
            answer = get(chart)
            if len(answer["runs"]) == runs and all(r["cursor"] > 0 for r in answer["runs"]):
                break
            time.sleep(0.1)
        out["chart_has_every_run_s"] = round(time.perf_counter() - t0, 2)
        out["chart_has_every_run_after_server_up_s"] = round(time.perf_counter() - t0 - up, 2)
        out["chart_first_answer_partial"] = bool(answer.get("partial"))
        if cross is not None:  # steps of a running run while the others are copied
            crossed = []
            for i in range(1, 11):
                cross(i)
                logged = time.perf_counter()
                while get(f"api/series?key={names[0]}&runs={probe}")["runs"][0]["cursor"] <= i:
                    assert time.perf_counter() - logged < 60, "a live step never arrived"
                    time.sleep(0.05)
                crossed.append(time.perf_counter() - logged)
                time.sleep(0.5)
            out["live_step_during_backfill_s"] = {
                "p50": round(statistics.median(crossed), 2), "max": round(max(crossed), 2)}
            out["runs_incomplete_after_crossings"] = sum(
                1 for r in get(chart)["runs"] if r["cursor"] < steps)
        while True:  # every replica complete, and read by the UI
            assert time.perf_counter() - t0 < 1800, "the replicas never completed"
            answer = get(chart)
            if not answer.get("partial") and all(r["cursor"] >= steps for r in answer["runs"]):
                break
            time.sleep(1.0)  # the page's live refresh: once a second
        out["every_run_complete_s"] = round(time.perf_counter() - t0, 1)
        if not warm_requests:
            return out
        time.sleep(2)
        lists = [timed("api/runs") for _ in range(5)]
        out["warm_api_runs_median_of_5_s"] = round(statistics.median(t for t, _ in lists), 3)
        out["warm_api_series_100_runs_first_key_s"] = round(timed(chart)[0], 3)
        out["warm_api_series_100_runs_next_keys_median_s"] = round(statistics.median(
            timed(f"api/series?key={names[i]}&runs={rids}")[0] for i in range(1, 6)), 3)
    finally:
        proc.terminate()
        proc.wait(30)
    return out


def bench_ui(pg: Any, work: Path, runs: int, keys: int, steps: int) -> dict[str, Any]:
    """``trackmux ui DSN`` over ``runs`` x ``keys`` metrics x ``steps`` points written
    straight into the store, from a cold start: the command started as a process with an
    empty replica cache, and the wall time from starting it until ``/api/runs`` lists
    every run, until a chart of one metric of every run has data for each, and until
    every replica is complete; then, warm, the same requests (as over spools, "UI at
    scale"); then started again with the replicas kept. Server side, no browser."""
    import socket

    from trackmux.ui.mirror import StoreMirror

    dsn, names, loaded, cross = _load_ui_store(pg, runs, keys, steps)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "ui-cache")}  # cold: no replicas
    out: dict[str, Any] = {"runs": runs, "keys": keys, "steps": steps,
                           "points": runs * keys * steps, "written_to_store_s": round(loaded, 1)}
    out["cold"] = _ui_start(dsn, names, runs, steps, env, port, warm_requests=True,
                            cross=cross)
    # started again: the replicas are kept, only what is new is copied
    out["restart"] = _ui_start(dsn, names, runs, steps, env, port, warm_requests=False)
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = env["XDG_CACHE_HOME"]
    try:  # the UI's replicas: the first round finds them complete, the next polls
        mirror = StoreMirror(dsn)
    finally:
        os.environ.pop("XDG_CACHE_HOME")
        if previous is not None:
            os.environ["XDG_CACHE_HOME"] = previous
    mirror.sync_once(budget=None)
    t1 = time.perf_counter()
    mirror.sync_once()
    out["replicas_unchanged_poll_s"] = round(time.perf_counter() - t1, 3)
    mirror.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--crossings", type=int, default=20)
    parser.add_argument("--trainers", type=int, default=10)
    parser.add_argument("--trainer-steps", type=int, default=500)
    parser.add_argument("--ui-runs", type=int, default=100)
    parser.add_argument("--ui-keys", type=int, default=20)
    parser.add_argument("--ui-steps", type=int, default=10_000)
    parser.add_argument("--only", choices=["sync", "crossing", "trainers", "ui"])
    parser.add_argument("--mlflow", action="store_true", help="add mlflow's log_batch ceiling")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--trainer-child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trainer_child:
        tag, root, dsn, steps, work = args.trainer_child
        trainer_child(tag, root, dsn, int(steps), work)
        return
    os.environ.setdefault("TRACKMUX_PROVENANCE", "0")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from trackmux.testing.postgres import private_postgres

    out: dict[str, Any] = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "cpus": os.cpu_count()}
    work = Path(tempfile.mkdtemp(prefix="b12-"))
    try:
        with private_postgres() as pg:
            if args.only in (None, "sync"):
                out["sync"] = bench_sync(pg, work, args.points, args.repeats)
                if args.mlflow:
                    out["mlflow_log_batch"] = bench_mlflow_ceiling(work, args.points // 5)
            if args.only in (None, "crossing"):
                out["crossing"] = bench_crossing(pg, work, args.crossings)
            if args.only in (None, "trainers"):
                out["trainers"] = bench_trainers(pg, work, args.trainers, args.trainer_steps)
            if args.only in (None, "ui"):
                out["ui"] = bench_ui(pg, work, args.ui_runs, args.ui_keys, args.ui_steps)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(out, args.out)


if __name__ == "__main__":
    main()
