"""Ray workers attached to the driver's run: every point once, under role/key, in the file
backend, tensorboard and mlflow; a killed worker and a finished driver never block or raise.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

import trackmux

ray = pytest.importorskip("ray")

WORKERS = 4
STEPS = 2000
METRICS = 10
TABLE_EVERY = 250
#: Bounds a hang, not a speed (each wait ends as soon as its condition holds). Beside a
#: second suite (load 20-30) one answer of the sink took over 30 s.
HANG = 600.0


@ray.remote(num_cpus=0)
class Logger:
    """A rollout-like worker: attaches with no configuration and logs in a loop."""

    def work(self, index: int, steps: int) -> dict[str, Any]:
        run = trackmux.attach(role=f"w{index}")
        for step in range(steps):
            run.log({f"m{j}": index * 1_000_000 + step * METRICS + j for j in range(METRICS)},
                    step=step)
            if step % TABLE_EVERY == 0:
                run.log_table("samples", ["prompt", "reward"],
                              [[f"p{step}-{r}", float(r)] for r in range(3)], step=step)
        return {"sent_before_return": run.sent, "dropped": run.dropped}

    def forever(self) -> None:
        run = trackmux.attach(role="victim")
        step = 0
        while True:
            run.log({"x": float(step)}, step=step)
            step += 1
            time.sleep(0.002)


@ray.remote(num_cpus=0)
class LateWorker:
    """Logs after the driver finished: every call must be a quiet no-op (one warning)."""

    def __init__(self) -> None:
        self.records: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: self.records.append(record.getMessage())  # type: ignore[method-assign]
        logging.getLogger("trackmux").addHandler(handler)

    def attach(self) -> None:
        self.run = trackmux.attach(role="late")
        self.run.log({"before": 1.0}, step=0)
        self.run.flush(HANG)

    def after_finish(self) -> dict[str, Any]:
        errors = 0
        for step in range(1, 200):
            try:
                self.run.log({"after": 1.0}, step=step)
                self.run.log_text("note", "hello", step=step)
            except Exception:
                errors += 1
            if step == 50:  # the flusher's next tick finds the sink closed: wait for it
                deadline = time.monotonic() + 60  # (0.3 s sleeps were not always a tick)
                # for its warning, not only ``gone``: the flusher sets ``gone`` first and
                # warns right after, on its own thread (a full suite once read between them)
                while not (self.run.gone and self._warned()) and time.monotonic() < deadline:
                    time.sleep(0.05)
        return {"errors": errors, "gone": self.run.gone, "warnings": self._warned()}

    def _warned(self) -> list[str]:
        return [r for r in list(self.records) if "do nothing" in r]


def _file_points(path: Path) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for line in path.read_bytes().splitlines():
        row = orjson.loads(line)
        for key, value in row["data"].items():
            out.setdefault(key, []).append((row["step"], float(value)))
    return out


def _tensorboard_points(log_dir: Path) -> tuple[dict[str, list[tuple[int, float]]], list[str]]:
    from tensorboard.backend.event_processing import event_accumulator

    acc = event_accumulator.EventAccumulator(
        str(log_dir), size_guidance={"scalars": 0, "tensors": 0, "images": 0},
        purge_orphaned_data=False)
    acc.Reload()
    tags = acc.Tags()
    scalars = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in tags["scalars"]}
    return scalars, list(tags["tensors"])


def _mlflow_points(db: Path, project: str) -> dict[str, list[tuple[int, float]]]:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    experiment = client.get_experiment_by_name(project)
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    return {key: [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, key)]
            for key in run.data.metrics}


def _victim_points(run_dir: Path) -> int:
    from trackmux.core.events import MetricsEvent
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run_dir)
    try:
        return sum(1 for e in reader.iter_events()
                   if isinstance(e, MetricsEvent) and "victim/x" in e.data)
    finally:
        reader.close()


def _expected() -> dict[str, list[tuple[int, float]]]:
    return {f"w{i}/m{j}": [(s, float(i * 1_000_000 + s * METRICS + j)) for s in range(STEPS)]
            for i in range(WORKERS) for j in range(METRICS)}


def test_four_workers_and_a_killed_one_land_once_in_every_backend(
        ray_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # mlflow's default artifact root is ./mlruns
    project = "ray-attach"
    tb_dir = tmp_path / "tb"
    db = tmp_path / "mlflow.db"
    run = trackmux.init(project, backends=["file", "tensorboard", "mlflow"],
                        dir=tmp_path / "spool", timeout=180,
                        backend_options={"file": {"root": str(tmp_path / "files")},
                                         "tensorboard": {"log_dir": str(tb_dir)},
                                         "mlflow": {"tracking_uri": f"sqlite:///{db}"}})
    assert isinstance(run, trackmux.Run)
    victim = Logger.remote()
    victim.forever.remote()
    workers = [Logger.remote() for _ in range(WORKERS)]
    results = [w.work.remote(i, STEPS) for i, w in enumerate(workers)]

    # Kill the victim once points of two of its flushes reached the driver's spool (its
    # points keep arriving while it lives: waited for, not assumed after a sleep).
    deadline = time.monotonic() + HANG
    first = 0
    while time.monotonic() < deadline:
        seen = _victim_points(run.dir)
        if first and seen > first:
            break
        first = first or seen
        time.sleep(0.1)
    ray.kill(victim, no_restart=True)
    seen_at_kill = _victim_points(run.dir)
    assert seen_at_kill > first > 0

    stats = ray.get(results, timeout=HANG)
    assert all(s["dropped"] == 0 for s in stats)
    summary = run.finish()
    assert summary.complete, summary
    assert not summary.problems

    expected = _expected()
    files = _file_points(tmp_path / "files" / project / f"{run.name}.jsonl")
    tb_scalars, tb_tensors = _tensorboard_points(tb_dir)
    mlflow = _mlflow_points(db, project)
    for name, got in (("file", files), ("tensorboard", tb_scalars), ("mlflow", mlflow)):
        for key, points in expected.items():
            assert sorted(got.get(key, [])) == points, (name, key, len(got.get(key, [])))

    # The killed worker: a gap-free prefix of its steps, each once.
    victim_points = files["victim/x"]
    steps = [s for s, _ in victim_points]
    assert steps == list(range(len(steps))), "victim points must be a prefix, each once"
    assert len(steps) > 0
    for name, got in (("tensorboard", tb_scalars), ("mlflow", mlflow)):
        assert sorted(got["victim/x"]) == victim_points, name
    with open(tmp_path / "files" / project / f"{run.name}.tables.jsonl", "rb") as handle:
        tables = [orjson.loads(line) for line in handle]
    table_keys = sorted((t["key"], t["step"]) for t in tables)
    assert table_keys == sorted((f"w{i}/samples", s) for i in range(WORKERS)
                                for s in range(0, STEPS, TABLE_EVERY))
    assert sum(1 for tag in tb_tensors if tag.endswith("samples")) >= WORKERS
    # What reached the driver before the kill stays (the rest of its buffer is lost with
    # it: a flush period on an idle node, longer on a busy one, docs/ray.md)
    assert len(steps) >= seen_at_kill


def test_a_finished_driver_turns_worker_calls_into_quiet_no_ops(
        ray_cluster: Any, tmp_path: Path) -> None:
    run = trackmux.init("ray-late", backends=["file"], dir=tmp_path / "spool",
                        backend_options={"file": {"root": str(tmp_path / "files")}})
    late = LateWorker.remote()
    ray.get(late.attach.remote(), timeout=HANG + 60)
    # a finish() that waited on the attached worker would take its whole 1200 s budget
    # (half of it waiting); 120 s is a bound only that hang passes (not a speed claim)
    started = time.monotonic()
    run.finish(timeout=1200)
    assert time.monotonic() - started < 120
    result = ray.get(late.after_finish.remote(), timeout=HANG)
    assert result["errors"] == 0
    assert result["gone"] is True
    assert len(result["warnings"]) == 1, result["warnings"]
    lines = (tmp_path / "files" / "ray-late" / f"{run.name}.jsonl").read_bytes().splitlines()
    assert [orjson.loads(line)["data"] for line in lines] == [{"late/before": 1.0}]


def test_attach_by_run_id_reaches_that_run(ray_cluster: Any, tmp_path: Path) -> None:
    first = trackmux.init("ray-a", backends=["file"], dir=tmp_path / "spool",
                          backend_options={"file": {"root": str(tmp_path / "files")}})
    second = trackmux.init("ray-b", backends=["file"], dir=tmp_path / "spool",
                           backend_options={"file": {"root": str(tmp_path / "files")}})

    @ray.remote(num_cpus=0)
    def log_to(run_id: str) -> int:
        handle = trackmux.attach(run_id=run_id, role="t")
        handle.log({"v": 1.0}, step=7)
        return int(handle.flush(HANG))

    assert ray.get([log_to.remote(second.id), log_to.remote(first.id)],
                   timeout=HANG + 60) == [1, 1]
    first.finish()
    second.finish()
    for project, run in (("ray-a", first), ("ray-b", second)):
        rows = [orjson.loads(line) for line in
                (tmp_path / "files" / project / f"{run.name}.jsonl").read_bytes().splitlines()]
        assert rows == [{"step": 7, "data": {"t/v": 1.0}}]


@ray.remote(num_cpus=0)
class Exiting:
    """Logs with a flush period longer than its life: only the exit flush can send."""

    def work(self) -> int:
        run = trackmux.attach(role="exiting", flush_interval=60)
        # The flusher's first round (it connects at once, and sends what is queued then)
        # is behind it before the first log: from here it sleeps the flush period, so
        # nothing is sent before the exit, by construction (logging during that first
        # round on a loaded machine let it send some).
        deadline = time.monotonic() + HANG
        while not run._connected and time.monotonic() < deadline:
            time.sleep(0.01)
        with run._send_lock:  # the round that connected has returned
            pass
        for step in range(100):
            run.log({"a": float(step)}, step=step)
        return run.sent

    def leave(self) -> None:
        ray.actor.exit_actor()


def test_a_worker_that_exits_flushes_what_it_buffered(ray_cluster: Any,
                                                      tmp_path: Path) -> None:
    run = trackmux.init("ray-exit", backends=["file"], dir=tmp_path / "spool",
                        backend_options={"file": {"root": str(tmp_path / "files")}})
    worker = Exiting.remote()
    assert ray.get(worker.work.remote(), timeout=HANG) == 0  # nothing sent yet
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(worker.leave.remote(), timeout=HANG)
    spool = run._spool
    deadline = time.monotonic() + HANG
    while spool.status.committed < 100 and time.monotonic() < deadline:
        time.sleep(0.1)
    run.finish()
    rows = [orjson.loads(line) for line in
            (tmp_path / "files" / "ray-exit" / f"{run.name}.jsonl").read_bytes().splitlines()]
    assert [(r["step"], r["data"]) for r in rows] == [(s, {"exiting/a": float(s)})
                                                      for s in range(100)]


def test_a_ray_workers_bad_input_is_counted_in_the_drivers_run(ray_cluster: Any,
                                                                tmp_path: Path) -> None:
    """A rollout worker that logs a None reward never raises; the driver's finish summary
    and problems name it, summed over the workers of that role."""
    run = trackmux.init("ray-bad", backends=[], dir=tmp_path / "spool")

    @ray.remote(num_cpus=0)
    def rollout(index: int) -> int:
        handle = trackmux.attach(role="rollout")
        for step in range(5):
            handle.log({"reward": None if step % 2 else float(index)}, step=step)
        return int(handle.flush(HANG))

    assert ray.get([rollout.remote(i) for i in range(2)], timeout=HANG + 60) == [1, 1]
    summary = run.finish()
    assert {p.kind: p.count for p in summary.problems} == {
        "attached worker rollout: metric 'reward'": 4}
    assert summary.input_dropped == 4


@ray.remote(num_cpus=0)
class Closing:
    """Buffers its events (flush period longer than its life), then closes and leaves."""

    def work(self) -> int:
        self.run = trackmux.attach(role="closing", flush_interval=60)
        deadline = time.monotonic() + HANG
        while not self.run._connected and time.monotonic() < deadline:
            time.sleep(0.01)
        with self.run._send_lock:  # the round that connected has returned
            pass
        for step in range(100):
            self.run.log({"a": float(step)}, step=step)
        return len(self.run._queue)

    def leave(self) -> None:
        assert self.run.close(timeout=HANG)
        ray.actor.exit_actor()


def test_a_worker_that_closes_before_it_exits_delivers_everything(ray_cluster: Any,
                                                                  tmp_path: Path) -> None:
    run = trackmux.init("ray-close", backends=["file"], dir=tmp_path / "spool",
                        backend_options={"file": {"root": str(tmp_path / "files")}})
    worker = Closing.remote()
    assert ray.get(worker.work.remote(), timeout=HANG) == 100  # all buffered, none sent
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(worker.leave.remote(), timeout=HANG)
    run.finish()
    rows = [orjson.loads(line) for line in
            (tmp_path / "files" / "ray-close" / f"{run.name}.jsonl").read_bytes().splitlines()]
    assert [(r["step"], r["data"]) for r in rows] == [(s, {"closing/a": float(s)})
                                                      for s in range(100)]
