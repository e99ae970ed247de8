"""The file backend passes the conformance suite, read back from its own JSON lines."""

from __future__ import annotations

from pathlib import Path

import orjson
from PIL import Image

from trackmux.plugins.file import FileBackend
from trackmux.testing import BackendConformance, Readback


class TestFileBackend(BackendConformance):
    kinds = frozenset({"metrics", "config", "table", "image", "text", "histogram", "artifact"})
    nonfinite = "any"  # verl's format writes NaN/inf as null
    invalid_options = {"no_such_option": 1}

    def make_backend(self, tmp_path: Path) -> FileBackend:
        return FileBackend({"root": str(tmp_path / "files")})

    def read_back(self, tmp_path: Path) -> Readback:
        base = tmp_path / "files" / "conformance"
        out = Readback()
        for line in (base / "conformance-run.jsonl").read_bytes().splitlines():
            record = orjson.loads(line)
            for key, value in record["data"].items():
                out.metrics.setdefault(key, []).append(
                    (record["step"], float("nan") if value is None else value))
        tables = base / "conformance-run.tables.jsonl"
        if tables.exists():
            for line in tables.read_bytes().splitlines():
                record = orjson.loads(line)
                out.tables.setdefault(record["key"], []).append((record["step"], record["rows"]))
        texts = base / "conformance-run.text.jsonl"
        if texts.exists():
            for line in texts.read_bytes().splitlines():
                record = orjson.loads(line)
                out.texts.setdefault(record["key"], []).append((record["step"], record["text"]))
        histograms = base / "conformance-run.histograms.jsonl"
        if histograms.exists():
            for line in histograms.read_bytes().splitlines():
                record = orjson.loads(line)
                out.histograms.setdefault(record["key"], []).append(
                    (record["step"], record["counts"]))
        artifacts = base / "conformance-run.artifacts.jsonl"
        if artifacts.exists():
            for line in artifacts.read_bytes().splitlines():
                record = orjson.loads(line)
                folder = Path(record["dir"])  # the copies, read back from disk
                files = {p.relative_to(folder).as_posix(): p.stat().st_size
                         for p in folder.rglob("*") if p.is_file()}
                out.artifacts.setdefault(record["name"], []).append((record["step"], files))
        for png in sorted((base / "conformance-run_media").glob("*.png")):
            key, _, rest = png.stem.rpartition("_step")
            step = int(rest.split("_")[0])
            with Image.open(png) as image:
                out.images.setdefault(key.replace("kl_", "kl/", 1), []).append(
                    (step, image.width, image.height))
        config = base / "conformance-run.config.json"
        if config.exists():
            from trackmux.core.values.normalize import flatten

            out.config = flatten(orjson.loads(config.read_bytes()))
        return out


def test_resume_with_rewind_appends_and_the_last_line_per_step_is_live(tmp_path: Path) -> None:
    """Resume rule (docs/backends/file.md): the same file continues; lines are appended,
    so each step's last line is the live value; a sync into a new file has one line per
    step."""
    import trackmux

    path = tmp_path / "out" / "m.jsonl"
    options = {"file": {"path": str(path)}}
    run = trackmux.init(project="p", backends=["file"], dir=tmp_path, run_id="r",
                        backend_options=options)
    for step in range(1, 8):
        run.log({"loss": float(step)}, step=step)
    assert run.finish(timeout=30).complete
    again = trackmux.init(project="p", backends=["file"], dir=tmp_path, run_id="r",
                          resume="must", rewind_to=4, backend_options=options)
    for step in range(5, 10):
        again.log({"loss": step + 0.5}, step=step)
    assert again.finish(timeout=30).complete
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    live = [(s, float(s)) for s in range(1, 5)] + [(s, s + 0.5) for s in range(5, 10)]
    assert [(r["step"], r["data"]["loss"]) for r in lines] == [
        (s, float(s)) for s in range(1, 8)] + live[4:]
    last = {r["step"]: r["data"]["loss"] for r in lines}
    assert sorted(last.items()) == live
    # a sync into a new destination: tests/core/test_resume.py (one line per live step)


def test_a_metrics_only_run_leaves_no_empty_side_files(tmp_path: Path) -> None:
    import trackmux

    out = tmp_path / "out" / "run.jsonl"
    run = trackmux.init(project="p", name="n", backends=["file"], dir=tmp_path / "spool",
                        backend_options={"file": {"path": str(out)}})
    run.log({"loss": 1.0}, step=1)
    run.log_text("note", "kept", step=1)
    assert run.finish(timeout=30).complete
    names = sorted(p.name for p in out.parent.iterdir())
    assert names == ["run.jsonl", "run.run-id", "run.text.jsonl"], names
    assert orjson.loads(out.read_bytes())["data"] == {"loss": 1.0}


def test_a_run_that_finishes_between_the_owner_check_and_the_lock_is_not_truncated(
        tmp_path: Path, monkeypatch) -> None:
    """CI once lost a run's output this way: the second run read "no owner", the first
    opened, wrote and closed, then the second took the free lock and truncated the file.
    Here the first run's whole delivery happens inside the second's call to lock."""
    import time

    import trackmux.plugins.file as file_plugin
    from trackmux.core.backends.contract import ResumeState, RunInfo
    from trackmux.core.events import MetricsEvent

    def info(run_id: str) -> RunInfo:
        return RunInfo(project="p", name="same", run_id=run_id, run_dir=tmp_path / run_id,
                       started_at=time.time())

    def deliver(run_id: str, value: float) -> None:
        backend = FileBackend({"root": str(tmp_path / "out")})
        backend.open(info(run_id), ResumeState())
        backend.write([MetricsEvent({"who": value}, step=s, time=0.0, seq=s + 1)
                       for s in range(3)])
        backend.close("finished")

    real_lock = file_plugin._lock
    first_pending = [True]

    def lock_after_the_first_run(fd: int) -> None:
        if first_pending:
            first_pending.clear()
            monkeypatch.setattr(file_plugin, "_lock", real_lock)
            deliver("first", 1.0)
        real_lock(fd)

    monkeypatch.setattr(file_plugin, "_lock", lock_after_the_first_run)
    deliver("second", 2.0)

    folder = tmp_path / "out" / "p"
    outputs = {p.name: [orjson.loads(line)["data"]["who"] for line in p.read_bytes().splitlines()]
               for p in folder.glob("same*.jsonl") if p.name.count(".") == 1}
    assert outputs == {"same.jsonl": [1.0] * 3, "same-second.jsonl": [2.0] * 3}
    assert (folder / "same.run-id").read_text().strip() == "first"


def test_trajectories_are_table_rows_of_transcripts(tmp_path: Path) -> None:
    """Conversations on the file backend (issue 37): each step's chosen samples in the
    tables JSONL, the conversation as its transcript beside its tool summary."""
    from trajectory_support import COLUMNS, OPTIONS, STEPS, check_table, trajectory_spool

    from trackmux.core.delivery.sync import deliver

    run_dir = trajectory_spool(tmp_path)
    result = deliver(run_dir, {"file": lambda: FileBackend(
        {"root": str(tmp_path / "files"), **OPTIONS})}, timeout=60)
    assert result.complete, result.problems
    [path] = (tmp_path / "files").rglob("*.tables.jsonl")
    records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert [r["step"] for r in records] == list(STEPS)
    for record in records:
        assert tuple(record["columns"]) == COLUMNS
        check_table(record["step"], record["rows"])
