"""The wandb backend, offline, read back from wandb's own transaction log (``run-<id>.wandb``).

``read_back`` uses wandb's reader, ``wandb leet inspect --json``, so the plugin's own log
parser (used to resume) is checked against it rather than against itself.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("wandb")

from trackmux.core.delivery.sync import deliver
from trackmux.core.events import ConfigEvent, ImageEvent, MetricsEvent, TableEvent, TextEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.writer import SpoolWriter
from trackmux.core.values.media import encode_image
from trackmux.plugins.wandb import (
    WandbBackend,
    history_rows,
    log_is_complete,
    read_records,
    run_files,
)
from trackmux.testing import BackendConformance, Readback

T0 = 1_700_000_000.0


@pytest.fixture(autouse=True)
def wandb_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every wandb path inside the test's tmp dir, offline, quiet."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")
    for name in ("DIR", "DATA_DIR", "CACHE_DIR", "CONFIG_DIR", "ARTIFACT_DIR"):
        path = tmp_path / f"wandb_{name.lower()}"
        path.mkdir(exist_ok=True)
        monkeypatch.setenv(f"WANDB_{name}", str(path))
    for name in ("WANDB_RUN_ID", "WANDB_ENTITY", "WANDB_API_KEY", "WANDB_RESUME"):
        monkeypatch.delenv(name, raising=False)


def wandb_cli() -> str:
    found = shutil.which("wandb", path=str(Path(sys.executable).parent))
    return found or "wandb"


def leet_records(path: Path) -> list[dict[str, Any]]:
    """Records of one transaction log as wandb's own reader prints them."""
    out = subprocess.run([wandb_cli(), "leet", "inspect", "--json", str(path)],
                         capture_output=True, text=True, timeout=120, check=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def _number(value: Any) -> float:
    if isinstance(value, str):  # wandb writes NaN and inf as JSON strings
        return float(value)
    return float(value)


def all_run_files(tmp_path: Path) -> list[Path]:
    files = [p for p in tmp_path.rglob("run-*.wandb") if "latest-run" not in p.parts]
    ids = {p.stem[len("run-"):] for p in files}
    assert len(ids) <= 1, f"more than one wandb run id: {ids}"
    return run_files(files[0].parent.parent, ids.pop()) if files else []


def read_wandb(tmp_path: Path) -> tuple[Readback, list[dict[str, Any]]]:
    """Everything the wandb run (all its transaction logs, oldest first) holds."""
    out = Readback()
    rows: list[dict[str, Any]] = []
    config: dict[str, Any] = {}
    for path in all_run_files(tmp_path):
        files_dir = path.parent / "files"
        for record in leet_records(path):
            kind = record.get("type")
            if kind == "run":
                config.update(record["run"].get("config", {}).get("update", {}))
            elif kind == "config":
                config.update(record["config"].get("update", {}))
            elif kind == "artifact":
                art = record["artifact"]
                meta = json.loads(art.get("metadata") or "{}")
                if "trackmux_step" not in meta:
                    continue  # wandb's own (an incremental table's) artifact
                step = meta["trackmux_step"]
                files = {c["path"]: int(c["size"]) for c in art["manifest"]["contents"]}
                out.artifacts.setdefault(art["name"], []).append((step, files))
            elif kind == "history":
                item = record["history"]["item"]
                rows.append(item)
                step = int(item["trackmux/step"])
                media = {k[:-len("._type")] for k in item if k.endswith("._type")}
                for key in media:
                    kind_ = item[f"{key}._type"]
                    if kind_ == "image-file":
                        out.images.setdefault(key, []).append(
                            (step, int(item[f"{key}.width"]), int(item[f"{key}.height"])))
                        out.captions.setdefault(key, []).append(
                            (step, item.get(f"{key}.caption")))
                    elif kind_ == "histogram":
                        out.histograms.setdefault(key, []).append(
                            (step, [int(c) for c in item[f"{key}.values"]]))
                    elif kind_ in ("incremental-table-file", "table-file"):
                        table = json.loads((files_dir / item[f"{key}.path"]).read_text())
                        out.tables.setdefault(key, []).append((step, table["data"]))
                for key, value in item.items():
                    if key.startswith("_") or key == "trackmux/step" or "." in key:
                        continue
                    if key.split(".")[0] in media:
                        continue
                    out.metrics.setdefault(key, []).append((step, _number(value)))
    config.pop("_wandb", None)
    if config:
        from trackmux.core.values.normalize import flatten

        out.config = flatten(config)
    return out, rows


class TestWandbBackend(BackendConformance):
    kinds = frozenset({"metrics", "config", "table", "image", "caption", "histogram",
                       "artifact"})
    nonfinite = "kept"
    invalid_options = {"no_such_option": 1}

    def make_backend(self, tmp_path: Path) -> WandbBackend:
        return WandbBackend({})

    def read_back(self, tmp_path: Path) -> Readback:
        return read_wandb(tmp_path)[0]


# -- wandb-specific ----------------------------------------------------------------------------
def spool(tmp_path: Path, events: list[Any], name: str = "run-0001") -> Path:
    run_dir = tmp_path / "spool" / "proj" / name
    writer = SpoolWriter(run_dir)
    writer.set_meta(run_id=name, project="proj", name="wandb-test", state="finished",
                    started_at=T0)
    for event in events:
        writer.append(event)
    writer.close()
    return run_dir


def deliver_wandb(run_dir: Path, batch_size: int = 1000, **options: Any) -> None:
    result = deliver(run_dir, {"wandb": lambda: WandbBackend(options)}, timeout=120,
                     batch_size=batch_size)
    assert result.complete, (result.pending, result.problems)


def cursor(run_dir: Path) -> Any:
    reader = SpoolReader(run_dir)
    try:
        return reader.cursor("wandb")
    finally:
        reader.close()


def image(key: str, step: int, caption: str | None) -> ImageEvent:
    import numpy as np

    encoded = encode_image(np.zeros((6, 10, 3), dtype=np.uint8))
    return ImageEvent(key, encoded.png, encoded.width, encoded.height, encoded.mode, step,
                      T0 + step, caption)


@pytest.fixture
def late_wandb_flush(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[float]:
    """Issue 17's race, every time. wandb-core closes a run's stream, and only then has its
    transaction log whole, when ``run.finish()`` tells it to as its last step, without
    waiting. Here that message is sent 0.5 s late, and ``wandb.init`` (of the retry) waits
    until the logs are whole: so a scan of the logs between ``finish()`` and ``init`` sees
    them incomplete, as it sometimes did on a loaded machine. (Without the wait in ``init``
    wandb-core refuses the run id while its stream is open; the retry is then delayed until
    the log is whole anyway and the race is missed.)"""
    import wandb
    from wandb.sdk.lib.service import service_connection

    delay = 0.5
    inform_finish = service_connection.ServiceConnection.inform_finish
    init = wandb.init
    timers: list[threading.Timer] = []

    def late_finish(self: Any, run_id: str) -> None:
        timers.append(threading.Timer(delay, inform_finish, (self, run_id)))
        timers[-1].start()

    def init_once_written(*args: Any, **kwargs: Any) -> Any:
        for timer in timers:
            timer.join()
        deadline = time.monotonic() + 30
        while not all(log_is_complete(p) for p in tmp_path.rglob("run-*.wandb")
                      if "latest-run" not in p.parts):
            assert time.monotonic() < deadline, "wandb did not write its logs in 30 s"
            time.sleep(0.01)
        time.sleep(0.2)  # wandb-core drops the closed stream's run id just after
        return init(*args, **kwargs)

    monkeypatch.setattr(service_connection.ServiceConnection, "inform_finish", late_finish)
    monkeypatch.setattr(wandb, "init", init_once_written)
    yield delay
    for timer in timers:
        timer.join()


def test_close_returns_once_the_log_is_whole(tmp_path: Path, late_wandb_flush: float) -> None:
    """After a delivery, wandb's log holds every row (and its exit record) already."""
    run_dir = spool(tmp_path, [MetricsEvent({"m": float(s)}, s, T0 + s) for s in range(5)])
    deliver_wandb(run_dir)
    (path,) = all_run_files(tmp_path)
    assert log_is_complete(path)
    assert [r["_trackmux_seq"] for r in history_rows(path)] == [1, 2, 3, 4, 5]


def test_mid_batch_retry_exactly_once_when_wandb_flushes_late(
        tmp_path: Path, late_wandb_flush: float) -> None:
    """Issue 17 (steps 15-18 twice in 1 of 4 CI runs): the retry's backend read the failed
    attempt's log before wandb-core had written its last rows, and wrote them again."""
    BackendConformance.test_mid_batch_failure_is_retried_exactly_once(TestWandbBackend(),
                                                                      tmp_path)
    _, rows = read_wandb(tmp_path)
    seqs = [r["_trackmux_seq"] for r in rows]
    assert len(seqs) == len(set(seqs)), seqs


def test_caption_is_kept(tmp_path: Path) -> None:
    run_dir = spool(tmp_path, [image("samples/pic", 3, "a cat, step 3"),
                               image("samples/plain", 3, None)])
    deliver_wandb(run_dir)
    _, rows = read_wandb(tmp_path)
    row = next(r for r in rows if "samples/pic._type" in r)
    assert row["samples/pic.caption"] == "a cat, step 3"
    assert (row["samples/pic.width"], row["samples/pic.height"]) == (10, 6)
    plain = next(r for r in rows if "samples/plain._type" in r)
    assert "samples/plain.caption" not in plain


def test_table_grows_incrementally(tmp_path: Path) -> None:
    """Each step's table file holds only that step's rows; the increments are numbered."""
    cols = ("prompt", "response", "score")
    events = [TableEvent("val/gen", cols, tuple((f"p{s}-{i}", f"r{s}-{i}", s + i / 10)
                                                 for i in range(3)), s, T0 + s)
              for s in (10, 20, 30)]
    run_dir = spool(tmp_path, events)
    deliver_wandb(run_dir)
    readback, rows = read_wandb(tmp_path)
    assert [(step, [r[0] for r in data]) for step, data in readback.tables["val/gen"]] == [
        (s, [f"p{s}-{i}" for i in range(3)]) for s in (10, 20, 30)]
    table_rows = [r for r in rows if "val/gen._type" in r]
    assert [r["val/gen._type"] for r in table_rows] == ["incremental-table-file"] * 3
    assert [r["val/gen.increment_num"] for r in table_rows] == [0, 1, 2]
    assert [r["val/gen.nrows"] for r in table_rows] == [3, 6, 9]  # the table grows ...
    sizes = [(all_run_files(tmp_path)[0].parent / "files" / r["val/gen.path"]).stat().st_size
             for r in table_rows]
    assert max(sizes) < 2 * min(sizes), sizes  # ... but no file re-sends the earlier rows


def test_mixed_type_column_and_text(tmp_path: Path) -> None:
    events = [TableEvent("t", ("a",), (("x",), (1,), (None,), (2.5,)), 1, T0),
              TextEvent("notes", "**hello**", 2, T0 + 2)]
    run_dir = spool(tmp_path, events)
    deliver_wandb(run_dir)
    readback, _ = read_wandb(tmp_path)
    assert readback.tables["t"] == [(1, [["x"], [1], [None], [2.5]])]
    assert readback.tables["notes"] == [(2, [[2, "**hello**"]])]


def test_backwards_step_is_kept_on_the_trackmux_axis(tmp_path: Path) -> None:
    """Late data (step 3 after step 5) would be dropped by log(step=3); here it is kept."""
    steps = [1, 2, 5, 3, 4, 6]
    events = [MetricsEvent({"loss": float(s)}, s, T0 + i) for i, s in enumerate(steps)]
    run_dir = spool(tmp_path, events)
    deliver_wandb(run_dir)
    readback, rows = read_wandb(tmp_path)
    assert readback.metrics["loss"] == [(s, float(s)) for s in steps]
    wandb_steps = [r["_step"] for r in rows]
    assert wandb_steps == sorted(wandb_steps) and len(set(wandb_steps)) == len(steps)
    records = leet_records(all_run_files(tmp_path)[0])
    metrics = [r["metric"] for r in records if r.get("type") == "metric"]
    assert {"glob_name": "*", "step_metric": "trackmux/step"}.items() <= {
        **next(m for m in metrics if m.get("glob_name") == "*")}.items()


def test_summary_holds_value_at_highest_step(tmp_path: Path) -> None:
    events = [MetricsEvent({"acc": 0.9}, 10, T0), MetricsEvent({"acc": 0.1}, 2, T0 + 1)]
    deliver_wandb(spool(tmp_path, events))
    out = subprocess.run([wandb_cli(), "leet", "inspect", "--json", "--summary",
                          str(all_run_files(tmp_path)[0])],
                         capture_output=True, text=True, timeout=120, check=True)
    summary = json.loads(out.stdout)
    assert summary["summary"]["acc"] == 0.9
    assert summary["project"] == "proj" and summary["name"] == "wandb-test"


def test_config_nested_and_updated(tmp_path: Path) -> None:
    events = [ConfigEvent({"actor": {"lr": 1e-6}, "api_key": "***"}, 0, T0),
              MetricsEvent({"x": 1.0}, 0, T0)]
    deliver_wandb(spool(tmp_path, events))
    readback, _ = read_wandb(tmp_path)
    assert readback.config is not None
    assert readback.config["actor.lr"] == 1e-6


def test_resume_continues_the_same_run_id(tmp_path: Path) -> None:
    """A second delivery (a later sync) continues the wandb run id stored in the spool."""
    first = [MetricsEvent({"m": float(s)}, s, T0 + s) for s in range(5)]
    run_dir = spool(tmp_path, first)
    deliver_wandb(run_dir)
    state = cursor(run_dir)
    assert state.remote_id and state.acked_seq == 5
    writer = SpoolWriter(run_dir)  # the training run went on after the first sync
    for s in range(5, 8):
        writer.append(MetricsEvent({"m": float(s)}, s, T0 + s))
    writer.close()
    deliver_wandb(run_dir)
    assert cursor(run_dir).remote_id == state.remote_id
    files = all_run_files(tmp_path)
    assert len(files) == 2 and all(p.name == f"run-{state.remote_id}.wandb" for p in files)
    readback, rows = read_wandb(tmp_path)
    assert readback.metrics["m"] == [(s, float(s)) for s in range(8)]
    assert [r["_step"] for r in rows] == list(range(8))  # wandb's own step keeps growing
    run_records = [r["run"] for p in files for r in leet_records(p) if r.get("type") == "run"]
    assert all(r["run_id"] == state.remote_id for r in run_records)


def test_redelivery_of_an_unacknowledged_batch_is_skipped(tmp_path: Path) -> None:
    """The crash window: write() reached wandb, the ack was lost. No duplicate rows."""
    events = [MetricsEvent({"m": float(s)}, s, T0 + s) for s in range(6)]
    cols = ("a",)
    events.insert(3, TableEvent("tbl", cols, (("r1",),), 2, T0 + 2))
    run_dir = spool(tmp_path, events)
    deliver_wandb(run_dir)
    state = cursor(run_dir)
    reader = SpoolReader(run_dir)
    reader.ack("wandb", 2, state.remote_id, {"seq": 2, "step": 2})  # acks 3..7 were lost
    reader.close()
    deliver_wandb(run_dir)
    readback, rows = read_wandb(tmp_path)
    assert readback.metrics["m"] == [(s, float(s)) for s in range(6)]
    assert readback.tables["tbl"] == [(2, [["r1"]])]
    assert [r["_trackmux_seq"] for r in rows] == list(range(1, 8))


def test_resumed_incremental_table_continues_numbering(tmp_path: Path) -> None:
    run_dir = spool(tmp_path, [TableEvent("tbl", ("a",), (("r0",),), 0, T0)])
    deliver_wandb(run_dir)
    writer = SpoolWriter(run_dir)
    writer.append(TableEvent("tbl", ("a",), (("r1",),), 1, T0 + 1))
    writer.close()
    deliver_wandb(run_dir)
    readback, rows = read_wandb(tmp_path)
    assert readback.tables["tbl"] == [(0, [["r0"]]), (1, [["r1"]])]
    second = [r for r in rows if "tbl._type" in r][1]
    assert second["tbl.increment_num"] == 1
    assert len(second["tbl.previous_increments_paths"]) == 1


def test_own_log_reader_agrees_with_leet(tmp_path: Path) -> None:
    """The parser used on resume reads the same history as wandb's reader."""
    events = [MetricsEvent({"a/b": float(s), "n": math.nan}, s, T0 + s) for s in range(300)]
    events.append(TableEvent("big", ("text",), tuple((("x" * 5000),) for _ in range(20)), 300,
                             T0))  # records spanning LevelDB blocks
    deliver_wandb(spool(tmp_path, events))
    path = all_run_files(tmp_path)[0]
    ours = list(history_rows(path))
    theirs = [r["history"]["item"] for r in leet_records(path) if r.get("type") == "history"]
    assert len(ours) == len(theirs) == 301
    for mine, leet in zip(ours, theirs, strict=True):
        assert mine["_step"] == leet["_step"]
        assert mine["_trackmux_seq"] == leet["_trackmux_seq"]
        if "a/b" in leet:
            assert mine["a/b"] == leet["a/b"]
    # read from a later block on (the completeness check at close reads the last two only):
    # the records that begin there, the last of them the exit record
    every = [r.SerializeToString() for r in read_records(path)]
    for start in range(32768, path.stat().st_size, 32768):
        later = [r.SerializeToString() for r in read_records(path, start)]
        assert 0 < len(later) < len(every) and later == every[-len(later):]
    assert path.stat().st_size > 2 * 32768 and log_is_complete(path)


def test_files_default_to_the_spool_run_dir(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WANDB_DIR")
    run_dir = spool(tmp_path, [MetricsEvent({"x": 1.0}, 0, T0)])
    deliver_wandb(run_dir)
    assert list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))


def test_dir_option_and_proxy(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    run_dir = spool(tmp_path, [MetricsEvent({"x": 1.0}, 0, T0)])
    deliver_wandb(run_dir, dir=str(target), proxy="http://127.0.0.1:9", project="other")
    files = list(target.glob("wandb/offline-run-*/run-*.wandb"))
    assert files
    run = next(r["run"] for r in leet_records(files[0]) if r.get("type") == "run")
    assert run["project"] == "other"


@pytest.mark.parametrize("options, word", [
    ({"bogus": 1}, "bogus"),
    ({"mode": "sometimes"}, "mode"),
    ({"tables": "all"}, "tables"),
    ({"settings": "x"}, "settings"),
    ({"tags": "a,b"}, "tags"),
])
def test_bad_options_name_the_option(options: dict[str, Any], word: str) -> None:
    with pytest.raises(ValueError, match=word):
        WandbBackend(options)


def test_registered_without_importing_wandb() -> None:
    code = ("import sys; from trackmux.core.backends.registry import get_registry; "
            "spec = get_registry().backend('wandb'); "
            "assert 'wandb' not in sys.modules, 'wandb imported'; print(spec.extra)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "wandb"


def test_live_run_through_the_public_api(tmp_path: Path) -> None:
    """trackmux.init(backends=["wandb"]): the issue's sample run, read back from wandb."""
    import numpy as np

    import trackmux

    secret = "sk-live-wandb-secret-1234"
    run = trackmux.init(project="live", name="live-run", backends=["wandb"],
                        config={"trainer": {"api_key": secret, "epochs": 2},
                                "actor": {"lr": 1e-6}},
                        dir=tmp_path / "spool", backend_options={"wandb": {"tags": ["t1"]}})
    for step in range(100):
        run.log({"loss": 1.0 / (step + 1), "step_sq": float(step * step)}, step=step)
    run.log_table("val/gen", ["prompt", "response", "score"],
                  [[f"p{i}", f"r{i}", i] for i in range(10)], step=99)
    run.log_image("img/hwc", np.zeros((16, 32, 3), dtype=np.uint8), step=99, caption="hwc")
    run.log_image("img/chw", np.zeros((3, 8, 24), dtype=np.uint8), step=99, caption="chw")
    summary = run.finish(timeout=120)
    assert summary is not None
    readback, _ = read_wandb(tmp_path)
    assert readback.metrics["loss"] == [(s, 1.0 / (s + 1)) for s in range(100)]
    assert readback.metrics["step_sq"] == [(s, float(s * s)) for s in range(100)]
    assert readback.tables["val/gen"] == [(99, [[f"p{i}", f"r{i}", i] for i in range(10)])]
    assert readback.images["img/hwc"] == [(99, 32, 16)]
    assert readback.images["img/chw"] == [(99, 24, 8)]
    assert readback.config is not None and readback.config["actor.lr"] == 1e-6
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_a_project_wandb_refuses_is_mapped_not_retried(tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """Issue 18, class 8: ``team/qwen2:grpo`` reaches wandb as ``team-qwen2-grpo``."""
    import trackmux

    with caplog.at_level("WARNING", "trackmux"):
        run = trackmux.init(project="team/qwen2:grpo", name="r", backends=["wandb"],
                            dir=tmp_path / "spool")
        for step in range(5):
            run.log({"loss": float(step)}, step=step)
        summary = run.finish(timeout=120)
    assert summary.complete and not summary.problems, summary
    assert any("team-qwen2-grpo" in r.getMessage() for r in caplog.records)
    readback, _ = read_wandb(tmp_path)
    assert readback.metrics["loss"] == [(s, float(s)) for s in range(5)]


def test_an_event_wandb_cannot_take_is_reported_not_retried(tmp_path: Path) -> None:
    broken = ImageEvent("bad/img", b"not a png", 4, 4, "RGB", 1, T0 + 1, None)
    events = [MetricsEvent({"m": 0.0}, 0, T0), broken, MetricsEvent({"m": 2.0}, 2, T0 + 2)]
    run_dir = spool(tmp_path, events)
    result = deliver(run_dir, {"wandb": lambda: WandbBackend({})}, timeout=120)
    assert result.complete
    assert any(p.kind == "rejected" and "bad/img" in p.message for p in result.problems)
    readback, _ = read_wandb(tmp_path)
    assert readback.metrics["m"] == [(0, 0.0), (2, 2.0)]
    assert "bad/img" not in readback.images


def test_resume_with_rewind_keeps_one_wandb_run(tmp_path: Path) -> None:
    """Resume rule (docs/backends/wandb.md): the resumed attempt continues the same wandb run
    id; rows are appended (wandb's ``_step`` keeps growing), the resumed values follow the
    superseded ones on the ``trackmux/step`` axis, so the summary (last row) holds the live
    values; a fresh sync of the spool sends only the live rows."""
    import trackmux
    from spool_support import forget_cursors

    spool_root = tmp_path / "spool"
    run = trackmux.init(project="resume", backends=["wandb"], dir=spool_root, run_id="r")
    for step in range(1, 8):
        run.log({"loss": float(step)}, step=step)
    assert run.finish(timeout=120).complete
    first_id = cursor(run.dir).remote_id
    again = trackmux.init(project="resume", backends=["wandb"], dir=spool_root, run_id="r",
                          resume="must", rewind_to=4)
    for step in range(5, 10):
        again.log({"loss": step + 0.5}, step=step)
    assert again.finish(timeout=120).complete
    assert cursor(run.dir).remote_id == first_id
    files = all_run_files(tmp_path)
    assert len(files) == 2 and all(p.name == f"run-{first_id}.wandb" for p in files)
    readback, rows = read_wandb(tmp_path)
    live = [(s, float(s)) for s in range(1, 5)] + [(s, s + 0.5) for s in range(5, 10)]
    assert readback.metrics["loss"] == [(s, float(s)) for s in range(1, 8)] + live[4:]
    assert [r["_step"] for r in rows] == list(range(12))
    # the last row of each step is the live value
    last = {}
    for step, value in readback.metrics["loss"]:
        last[step] = value
    assert sorted(last.items()) == live
    # fresh destination: a copy of the spool whose wandb cursor is gone
    copy = tmp_path / "copy"
    shutil.copytree(again.dir, copy)
    forget_cursors(copy)
    fresh = tmp_path / "fresh"
    deliver(copy, {"wandb": lambda: WandbBackend({"dir": str(fresh)})}, timeout=120)
    (path,) = [p for p in fresh.rglob("run-*.wandb") if "latest-run" not in p.parts]
    got = [(int(r["trackmux/step"]), float(r["loss"])) for r in history_rows(path)]
    assert got == live


def test_provenance_as_config_section_and_code_artifact(tmp_path: Path) -> None:
    """Issue 25: read back from wandb's own transaction log."""
    from trackmux.testing.provenance import COMMIT, DIFF, provenance_spool

    deliver_wandb(provenance_spool(tmp_path))
    config: dict[str, Any] = {}
    code: list[dict[str, Any]] = []
    for path in all_run_files(tmp_path):
        for record in leet_records(path):
            if record.get("type") == "config":
                config.update(record["config"].get("update", {}))
            elif record.get("type") == "artifact" and record["artifact"]["type"] == "code":
                code.append(record["artifact"])
    assert config["_provenance"]["git"]["commit"] == COMMIT
    assert config["lr"] == 0.1
    (artifact,) = code
    files = {c["path"] for c in artifact["manifest"]["contents"]}
    assert files == {"provenance.json", "diff.patch"}  # the entry script is not on this host
    patch = next(tmp_path.rglob("trackmux-code-*/diff.patch"))
    assert patch.read_text() == DIFF


def test_a_finding_of_the_doctor_is_an_alert_a_summary_line_and_a_table_row(
        tmp_path: Path) -> None:
    """issue 22: offline, wandb keeps the alert in the run's transaction log; the summary
    and the ``doctor/findings`` table are what the UI shows."""
    from trackmux.core.events import FindingEvent

    # the message quotes the model's words: Slack must not read them as a mention or a link
    finding = FindingEvent("kl_blowup", "warning", ("actor/ppo_kl",),
                           "actor/ppo_kl rose 3.4x; the samples say <!channel> & "
                           "<http://x.example|look>", 3, T0 + 3)
    deliver_wandb(spool(tmp_path, [MetricsEvent({"x": 1.0}, 1, T0), finding]))
    [path] = all_run_files(tmp_path)
    records = leet_records(path)
    alerts = [r["alert"] for r in records if r.get("type") == "alert"]
    assert alerts and alerts[0]["title"] == "trackmux doctor: kl_blowup at step 3"
    assert alerts[0]["text"] == ("actor/ppo_kl rose 3.4x; the samples say &lt;!channel&gt; "
                                 "&amp; &lt;http://x.example|look&gt;")
    out = subprocess.run([wandb_cli(), "leet", "inspect", "--json", "--summary", str(path)],
                         capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout)["summary"]["doctor/kl_blowup"] == finding.line()
    readback, _ = read_wandb(tmp_path)
    [(step, rows)] = readback.tables["doctor/findings"]
    assert step == 3 and rows == [[3, "kl_blowup", "warning", "actor/ppo_kl", finding.message]]


def test_samples_are_a_table_with_every_step(tmp_path: Path) -> None:
    """log_samples on wandb: the chosen samples of each step (best groups, capped) in the
    incremental table, each row carrying its step: the history is kept, not overwritten."""
    from samples_support import OPTIONS, STEPS, check_rows, sample_events

    deliver_wandb(spool(tmp_path, sample_events(T0)), **OPTIONS)
    readback, _ = read_wandb(tmp_path)
    tables = readback.tables["rollout/samples"]
    assert [step for step, _ in tables] == list(STEPS)
    for step, rows in tables:
        check_rows(step, rows)


def test_trajectories_are_a_table_of_conversations_with_every_step(tmp_path: Path) -> None:
    """Conversations on wandb (issue 37): each step's chosen samples in the incremental
    table, the conversation as its transcript (unicode, U+2028, markup and JSON arguments
    as text) beside turns, tool calls and failed tool calls, read from the run files."""
    from trajectory_support import OPTIONS, STEPS, check_table, trajectory_events

    deliver_wandb(spool(tmp_path, trajectory_events(T0)), **OPTIONS)
    readback, _ = read_wandb(tmp_path)
    tables = readback.tables["agent/rollouts"]
    assert [step for step, _ in tables] == list(STEPS)
    for step, rows in tables:
        check_table(step, rows)
