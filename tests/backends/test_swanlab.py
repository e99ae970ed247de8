"""The swanlab backend passes the conformance suite, read back from swanlab's run folders.

Everything runs offline: runs are folders under the test's tmp dir, read back with
swanlab's own store reader (an internal API; the plugin's reader is the fallback) and
the record protobufs, and media files from ``media/``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("swanlab")

import yaml

import trackmux
from trackmux.core.backends.contract import ResumeState, RunInfo
from trackmux.core.events import MetricsEvent, TextEvent
from trackmux.core.values.normalize import flatten
from trackmux.plugins.swanlab import SwanLabBackend, scan_records, swanlab_key
from trackmux.testing import BackendConformance, Readback

SECRET = "sk-E2E-SWANLAB-SECRET-77aa"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No network, no prompts, nothing outside tmp_path (swanlab also reads SWANLAB_*)."""
    monkeypatch.setenv("SWANLAB_MODE", "offline")
    monkeypatch.delenv("SWANLAB_API_KEY", raising=False)
    monkeypatch.delenv("SWANLAB_LOG_DIR", raising=False)
    monkeypatch.delenv("SWANLAB_RUN_ID", raising=False)
    monkeypatch.delenv("SWANLAB_RESUME", raising=False)
    monkeypatch.setenv("SWANLAB_SAVE_DIR", str(tmp_path / "swanlab-home"))


def records(run_dir: Path) -> list[Any]:
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record

    path = next(run_dir.glob("run-*.swanlab"))
    try:
        from swanlab.sdk.internal.core_python.store import DataStoreReader

        reader = DataStoreReader()
        reader.open(path)
        payloads = list(reader)
        reader.close()
    except ImportError:  # the internal reader moved: parse the file ourselves
        payloads = [payload for _, payload in scan_records(path)]
    out = []
    for payload in payloads:
        record = Record()
        record.ParseFromString(payload)
        out.append(record)
    return out


def run_dirs(log_dir: Path) -> list[Path]:
    return sorted(p for p in log_dir.glob("run-*") if p.is_dir())


def read_swanlab(log_dir: Path) -> tuple[Readback, dict[str, Any]]:
    """Every run folder under ``log_dir`` (one swanlab run, maybe resumed), merged.

    Duplicates are kept, so a point stored twice fails the suite's step comparison.
    Also returns {"ids": set of run ids, "captions": {key: caption},
    "columns": {table key: [the header of each stored table]}}.
    """
    from swanlab.proto.swanlab.metric.column.v1.column_pb2 import ColumnType

    out = Readback()
    extra: dict[str, Any] = {"ids": set(), "captions": {}, "columns": {}}
    for run_dir in run_dirs(log_dir):
        for record in records(run_dir):
            kind = record.WhichOneof("record_type")
            if kind == "start":
                extra["ids"].add(record.start.id)
            elif kind == "scalar" and not record.scalar.key.startswith("__"):
                out.metrics.setdefault(record.scalar.key, []).append(
                    (record.scalar.step, record.scalar.value.number))
            elif kind == "media":
                media = record.media
                for item in media.value.items:
                    if media.type == ColumnType.COLUMN_TYPE_IMAGE:
                        with Image.open(run_dir / "media" / "image" / item.filename) as image:
                            out.images.setdefault(media.key, []).append(
                                (media.step, image.width, image.height))
                        extra["captions"][media.key] = item.caption
                        out.captions.setdefault(media.key, []).append(
                            (media.step, item.caption))
                    elif media.type == ColumnType.COLUMN_TYPE_ECHARTS:
                        table = json.loads((run_dir / "media" / "echarts" / item.filename)
                                           .read_text(encoding="utf-8"))
                        fields = [c["field"] for c in table["colDefs"]]
                        rows = [[row.get(f) for f in fields] for row in table["rowData"]]
                        out.tables.setdefault(media.key, []).append((media.step, rows))
                        extra["columns"].setdefault(media.key, []).append(fields)
                    elif media.type == ColumnType.COLUMN_TYPE_TEXT:
                        text = (run_dir / "media" / "text" / item.filename).read_text("utf-8")
                        out.texts.setdefault(media.key, []).append((media.step, text))
        config = run_dir / "files" / "config.yaml"
        if config.exists():
            data = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
            values = {k: v["value"] for k, v in data.items()
                      if isinstance(v, dict) and "value" in v}
            if values:
                out.config = flatten(values)
    return out, extra


class TestSwanLabBackend(BackendConformance):
    kinds = frozenset({"metrics", "config", "table", "image", "text", "caption"})
    nonfinite = "kept"
    invalid_options = {"no_such_option": 1}

    def make_backend(self, tmp_path: Path) -> SwanLabBackend:
        return SwanLabBackend({"log_dir": str(tmp_path / "swanlog")})

    def read_back(self, tmp_path: Path) -> Readback:
        return read_swanlab(tmp_path / "swanlog")[0]

    def expected_key(self, key: str) -> str:
        return swanlab_key(key)

    # -- swanlab's own checks ------------------------------------------------------------
    def test_text_caption_and_one_run_id(self, tmp_path: Path) -> None:
        from trackmux.testing.conformance import TABLE_STEP, sample_run

        run = sample_run(tmp_path, steps=TABLE_STEP + 1)
        self.deliver(tmp_path, run)
        readback, extra = read_swanlab(tmp_path / "swanlog")
        assert readback.texts["notes/sample"] == [(TABLE_STEP, "**bold** note")]
        assert extra["captions"]["kl/heatmap_hwc"] == "KL per token"
        assert len(extra["ids"]) == 1

    def test_redelivery_keeps_one_remote_run(self, tmp_path: Path) -> None:
        """A rewound cursor without the backend's state still delivers exactly once."""
        from trackmux.core.spool.reader import SpoolReader
        from trackmux.testing.conformance import sample_run

        run = sample_run(tmp_path, steps=60)
        self.deliver(tmp_path, run)
        reader = SpoolReader(run.run_dir)
        first = reader.cursor("under-test")
        reader.ack("under-test", first.acked_seq - 5, first.remote_id, {})  # no checkpoint
        reader.close()
        self.deliver(tmp_path, run)
        readback, extra = read_swanlab(tmp_path / "swanlog")
        assert extra["ids"] == {first.remote_id}
        self.assert_metrics(readback, run)
        # no state at all: the folders of this id under log_dir are found and read,
        # so nothing is sent again and no second folder is opened.
        assert len(run_dirs(tmp_path / "swanlog")) == 1


def test_public_api_run_read_back(tmp_path: Path) -> None:
    """The issue's run through trackmux.init: 100 steps, nested config with a secret,
    a 10-row table, an HWC and a CHW image; every value comes back from swanlab's folder."""
    log_dir = tmp_path / "swanlog"
    run = trackmux.init(project="e2e", name="swan-e2e", backends=["swanlab"],
                        config={"trainer": {"api_key": SECRET, "epochs": 2},
                                "actor": {"optim": {"lr": 3e-4}}},
                        dir=tmp_path / "spool",
                        backend_options={"swanlab": {"log_dir": str(log_dir)}})
    expected: dict[str, list[tuple[int, float]]] = {"loss": [], "acc/mean@5": []}
    for step in range(100):
        values = {"loss": 1.0 / (step + 1), "acc/mean@5": step / 100}
        run.log(values, step=step)
        for key, value in values.items():
            expected[key].append((step, value))
    rows = [[f"q{i}", f"a{i}", i * 0.5] for i in range(10)]
    run.log_table("val/generations", ["input", "output", "score"], rows, step=99)
    run.log_image("img/hwc", np.zeros((12, 20, 3), dtype=np.uint8), step=99, caption="hwc")
    run.log_image("img/chw", np.ones((3, 7, 9), dtype=np.float32), step=99)
    summary = run.finish(timeout=120)
    assert summary.complete, summary

    readback, _ = read_swanlab(log_dir)
    for key, points in expected.items():
        got = sorted(readback.metrics[key])
        assert [s for s, _ in got] == list(range(100))
        for (_, want), (_, have) in zip(points, got, strict=True):
            assert math.isclose(have, want, rel_tol=1e-9)
    assert readback.tables["val/generations"] == [(99, rows)]
    assert readback.images["img/hwc"] == [(99, 20, 12)]
    assert readback.images["img/chw"] == [(99, 9, 7)]
    assert readback.config is not None
    assert readback.config["actor.optim.lr"] == 3e-4
    assert readback.config["trainer.epochs"] == 2
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def _info(tmp_path: Path) -> RunInfo:
    return RunInfo("proj", "name", "r1", tmp_path / "spool", 0.0)


def test_env_vars_choose_folder_and_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    monkeypatch.setenv("SWANLAB_LOG_DIR", str(tmp_path / "from-env"))
    backend = SwanLabBackend()
    assert backend.mode == "offline"
    backend.open(_info(tmp_path), ResumeState())
    backend.write([MetricsEvent({"x": 1.5}, 3, 0.0, seq=1)])
    backend.flush()
    backend.close("finished")
    (folder,) = run_dirs(tmp_path / "from-env")
    assert folder.name.endswith(f"-{backend.remote_id}")
    assert read_swanlab(tmp_path / "from-env")[0].metrics == {"x": [(3, 1.5)]}

    monkeypatch.setenv("SWANLAB_MODE", "disabled")
    disabled = SwanLabBackend({"log_dir": str(tmp_path / "disabled")})
    disabled.open(_info(tmp_path), ResumeState())
    disabled.write([MetricsEvent({"x": 1.0}, 0, 0.0, seq=1)])
    disabled.flush()
    disabled.close("finished")
    assert not run_dirs(tmp_path / "disabled")


def test_default_mode_is_offline_and_cloud_is_online(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SWANLAB_MODE")
    assert SwanLabBackend().mode == "offline"
    assert SwanLabBackend({"mode": "cloud"}).mode == "online"  # verl's name for it
    monkeypatch.setenv("SWANLAB_MODE", "cloud")
    assert SwanLabBackend().mode == "online"
    assert not SwanLabBackend()._log_dir_chosen  # the run's folder, set at open


def test_bad_options_are_named() -> None:
    with pytest.raises(ValueError, match="option mode"):
        SwanLabBackend({"mode": "clowd"})
    with pytest.raises(ValueError, match="logdir"):
        SwanLabBackend({"logdir": "x"})
    with pytest.raises(ValueError, match="drain_timeout"):
        SwanLabBackend({"drain_timeout": "soon"})


def test_bad_env_mode_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWANLAB_MODE", "sometimes")
    with pytest.raises(ValueError, match="SWANLAB_MODE"):
        SwanLabBackend()


def test_crash_between_write_and_ack(tmp_path: Path) -> None:
    """A batch written after the last checkpoint is found in the folder and not repeated;
    what was never written is; the swanlab id is kept; a second folder is opened only
    for new data."""
    options = {"log_dir": str(tmp_path / "swanlog")}
    first = SwanLabBackend(options)
    first.open(_info(tmp_path), ResumeState())
    first.write([MetricsEvent({"m": float(s)}, s, 0.0, seq=s + 1) for s in range(5)])
    first.flush()
    acked_state, remote_id = first.state(), first.remote_id
    first.write([MetricsEvent({"m": float(s)}, s, 0.0, seq=s + 1) for s in range(5, 8)]
                + [TextEvent("t", "once", 7, 0.0, seq=9)])
    first.flush()
    first.close("crashed")  # stands in for the process dying before the ack

    second = SwanLabBackend(options)
    second.open(_info(tmp_path), ResumeState(remote_id, acked_state, 5))
    second.flush()
    second.close("finished")
    assert len(run_dirs(tmp_path / "swanlog")) == 1  # nothing to add: no second folder

    third = SwanLabBackend(options)
    third.open(_info(tmp_path), ResumeState(remote_id, acked_state, 5))
    third.write([MetricsEvent({"m": float(s)}, s, 0.0, seq=s + 1) for s in range(5, 10)]
                + [TextEvent("t", "once", 7, 0.0, seq=9)])
    third.flush()
    assert third.remote_id == remote_id
    third.close("finished")

    readback, extra = read_swanlab(tmp_path / "swanlog")
    assert sorted(readback.metrics["m"]) == [(s, float(s)) for s in range(10)]
    assert readback.texts["t"] == [(7, "once")]
    assert extra["ids"] == {remote_id}
    assert len(run_dirs(tmp_path / "swanlog")) == 2


def test_plugin_registered_without_importing_swanlab() -> None:
    import subprocess
    import sys

    code = ("import sys, trackmux.plugins.swanlab as m; "
            "assert 'swanlab' not in sys.modules, 'imported at module import'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_flush_puts_written_events_on_disk_before_finish(tmp_path: Path) -> None:
    """swanlab writes in a background thread and flushes its file only at finish; core
    acknowledges after flush(), so flush() must leave the events in the run file."""
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record

    backend = SwanLabBackend({"log_dir": str(tmp_path / "swanlog")})
    backend.open(_info(tmp_path), ResumeState())
    try:
        backend.write([MetricsEvent({"d/x": s / 4}, s, 0.0, seq=s + 1) for s in range(20)])
        backend.flush()
        (folder,) = run_dirs(tmp_path / "swanlog")
        path = next(folder.glob("run-*.swanlab"))
        points, last_end = [], 0
        for end, payload in scan_records(path):
            record = Record()
            record.ParseFromString(payload)
            if record.WhichOneof("record_type") == "scalar":
                points.append((record.scalar.step, record.scalar.value.number))
                last_end = end
        assert sorted(points) == [(s, s / 4) for s in range(20)]
        checkpoint = backend.state()["checkpoint"]
        assert checkpoint["dir"] == str(folder)
        assert checkpoint["offset"] >= last_end  # resume reads only what follows
    finally:
        backend.close("finished")


def test_resume_with_rewind_writes_the_resumed_values_to_the_same_id(tmp_path: Path) -> None:
    """Resume rule (docs/backends/swanlab.md): the same swanlab id continues in a second
    folder; after rewind_to=4 the re-done steps 5.. are written there (not skipped as
    redelivered, even when the earlier folder holds them past the acknowledged point); the
    first folder keeps the superseded values; a fresh sync sends only live values."""
    import shutil

    from spool_support import forget_cursors
    from trackmux.core.delivery.sync import deliver_by_name
    from trackmux.core.spool.reader import SpoolReader

    log_dir = tmp_path / "swanlog"
    options = {"swanlab": {"log_dir": str(log_dir)}}
    run = trackmux.init(project="resume", backends=["swanlab"], dir=tmp_path / "spool",
                        run_id="r", backend_options=options)
    for step in range(1, 8):
        run.log({"loss": float(step)}, step=step)
    assert run.finish(timeout=120).complete
    # the crash lost the acknowledgement of steps 3..7: they are in the folder, not acked
    reader = SpoolReader(run.dir)
    cursor = reader.cursor("swanlab")
    reader.ack("swanlab", 2, cursor.remote_id, {"run_dirs": cursor.state["run_dirs"],
                                                "checkpoint": None})
    reader.close()
    again = trackmux.init(project="resume", backends=["swanlab"], dir=tmp_path / "spool",
                          run_id="r", resume="must", rewind_to=4, backend_options=options)
    for step in range(5, 10):
        again.log({"loss": step + 0.5}, step=step)
    assert again.finish(timeout=120).complete
    first, second = run_dirs(log_dir)
    _, extra = read_swanlab(log_dir)
    assert extra["ids"] == {cursor.remote_id}

    def points(folder: Path) -> list[tuple[int, float]]:
        return [(r.scalar.step, r.scalar.value.number) for r in records(folder)
                if r.WhichOneof("record_type") == "scalar" and r.scalar.key == "loss"]

    assert points(first) == [(s, float(s)) for s in range(1, 8)]
    assert points(second) == [(s, s + 0.5) for s in range(5, 10)]  # 3, 4 not twice
    copy = tmp_path / "copy"
    shutil.copytree(again.dir, copy)
    forget_cursors(copy)
    fresh = tmp_path / "fresh"
    assert deliver_by_name(copy, ["swanlab"], {"swanlab": {"log_dir": str(fresh)}},
                           timeout=120).complete
    (only,) = run_dirs(fresh)
    assert points(only) == [(s, float(s)) for s in range(1, 5)] + [
        (s, s + 0.5) for s in range(5, 10)]


def test_provenance_in_the_run_config(tmp_path: Path) -> None:
    """Issue 25: core's fallback, config under ``_provenance``, in swanlab's run folder."""
    from trackmux.core.delivery.sync import deliver
    from trackmux.testing.provenance import COMMIT, provenance_spool

    result = deliver(provenance_spool(tmp_path), {"swanlab": lambda: SwanLabBackend(
        {"log_dir": str(tmp_path / "swanlog")})}, timeout=120)
    assert result.complete, result.problems
    config = read_swanlab(tmp_path / "swanlog")[0].config
    assert config is not None and config["lr"] == 0.1
    assert config["_provenance.git.commit"] == COMMIT
def test_samples_are_a_table_at_each_step(tmp_path: Path) -> None:
    """log_samples on swanlab (issue 23): core's fallback table of the chosen samples (the
    best whole groups, capped at sample_rows) is an ECharts table media at each step, read
    back from the run folder's records and ``media/echarts`` files: every step's table is
    kept (history, not one overwritten key), with core's columns."""
    from samples_support import OPTIONS, STEPS, check_columns, check_rows, samples_spool

    from trackmux.core.delivery.sync import deliver

    result = deliver(samples_spool(tmp_path), {"swanlab": lambda: SwanLabBackend(
        {"log_dir": str(tmp_path / "swanlog"), **OPTIONS})}, timeout=120)
    assert result.complete, result.problems
    readback, extra = read_swanlab(tmp_path / "swanlog")
    tables = readback.tables["rollout/samples"]
    assert [step for step, _ in tables] == list(STEPS)
    for step, rows in tables:
        check_rows(step, rows)
    assert len(extra["columns"]["rollout/samples"]) == len(STEPS)
    for columns in extra["columns"]["rollout/samples"]:
        check_columns(columns)


# -- distinct keys stay distinct (issue 27 item 2) -----------------------------------------
DISTINCT_KEYS = ["loss/", "loss", " loss", "./loss", "acc.", "acc", "a//b", "a/b"]


def _series_by_key(log_dir: Path) -> dict[str, str]:
    """Which stored swanlab key each logged key landed in (read from the run folders);
    asserts no stored key mixes two logged keys and no logged key is spread over two."""
    readback, _ = read_swanlab(log_dir)
    owners: dict[str, str] = {}
    for name, points in readback.metrics.items():
        keys = {DISTINCT_KEYS[int(value) // 1000] for _, value in points}
        assert len(keys) == 1, f"swanlab key {name!r} mixes {keys}"
        (key,) = keys
        assert key not in owners, f"{key!r} is in {owners.get(key)!r} and {name!r}"
        owners[key] = name
        assert sorted(step for step, _ in points) == [1, 2, 3, 4]
    assert set(owners) == set(DISTINCT_KEYS)
    return owners


def test_distinct_keys_stay_distinct_across_resume_and_sync(tmp_path: Path) -> None:
    """``loss/``, ``loss``, `` loss`` and ``./loss`` stay four swanlab series; a resumed
    attempt sending the keys in reverse order and a fresh ``trackmux sync`` into another
    folder give every key the same stored name."""
    import shutil

    from spool_support import forget_cursors
    from trackmux.core.delivery.sync import deliver_by_name

    value = {key: 1000.0 * i for i, key in enumerate(DISTINCT_KEYS)}
    options = {"swanlab": {"log_dir": str(tmp_path / "swanlog")}}
    run = trackmux.init(project="distinct", backends=["swanlab"], dir=tmp_path / "spool",
                        run_id="keys", backend_options=options)
    for step in (1, 2):
        run.log({k: value[k] + step for k in DISTINCT_KEYS}, step=step)
    assert run.finish(timeout=120).complete
    again = trackmux.init(project="distinct", backends=["swanlab"], dir=tmp_path / "spool",
                          run_id="keys", resume="must", backend_options=options)
    for step in (3, 4):
        again.log({k: value[k] + step for k in reversed(DISTINCT_KEYS)}, step=step)
    assert again.finish(timeout=120).complete
    live = _series_by_key(tmp_path / "swanlog")
    assert live["loss"] == "loss" and live["acc"] == "acc" and live["a/b"] == "a/b"
    assert len(run_dirs(tmp_path / "swanlog")) == 2  # the resumed attempt's own folder

    copy = tmp_path / "copy"
    shutil.copytree(again.dir, copy)
    forget_cursors(copy)
    result = deliver_by_name(copy, ["swanlab"], {"swanlab": {
        "log_dir": str(tmp_path / "fresh")}}, timeout=120)
    assert result.complete, result
    assert _series_by_key(tmp_path / "fresh") == live
