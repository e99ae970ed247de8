"""The tensorboard backend passes the conformance suite, read back with TensorBoard's own
EventAccumulator, and survives being killed in the middle of a delivery."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("tensorboard")

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.util import tensor_util

from trackmux.core.backends.contract import ResumeState, RunInfo
from trackmux.core.delivery.sync import deliver
from trackmux.core.events import MetricsEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.plugins.tensorboard import Framer, TensorBoardBackend, resolve_log_dir
from trackmux.testing import BackendConformance, Readback
from trackmux.testing.conformance import SECRET, sample_run

SIZE_GUIDANCE = {"scalars": 0, "tensors": 0, "images": 0, "histograms": 0}
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


@pytest.fixture(autouse=True)
def _no_tensorboard_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TENSORBOARD_DIR", raising=False)


def _cells(line: str) -> list[str]:
    """A markdown table row as core's fallback wrote it, unescaped."""
    inner = line.strip()[1:-1]
    return [c.strip().replace("\\|", "|").replace("<br>", "\n").replace("\\\\", "\\")
            for c in _CELL_SPLIT.split(inner)]


def parse_markdown_table(text: str) -> tuple[list[str], list[list[str]]]:
    lines = text.splitlines()
    return _cells(lines[0]), [_cells(line) for line in lines[2:]]


def load(log_dir: Path) -> event_accumulator.EventAccumulator:
    # purge_orphaned_data=False: show every record the file holds, duplicates included.
    acc = event_accumulator.EventAccumulator(str(log_dir), size_guidance=SIZE_GUIDANCE,
                                             purge_orphaned_data=False)
    acc.Reload()
    return acc


def readback_dir(log_dir: Path) -> Readback:
    acc = load(log_dir)
    tags = acc.Tags()
    out = Readback()
    for tag in tags["scalars"]:
        out.metrics[tag] = [(e.step, e.value) for e in acc.Scalars(tag)]
        out.times[tag] = [(e.step, e.wall_time) for e in acc.Scalars(tag)]
    for tag in tags["histograms"]:
        out.histograms[tag] = [(e.step, [int(c) for c in e.histogram_value.bucket])
                               for e in acc.Histograms(tag)]
    for tag in tags["images"]:
        out.images[tag] = [(e.step, e.width, e.height) for e in acc.Images(tag)]
    for tag in tags["tensors"]:
        for e in acc.Tensors(tag):
            value = tensor_util.make_ndarray(e.tensor_proto)
            if value.dtype != object:
                continue  # the hparams plugin's summary, not text
            text = value.item().decode("utf-8")
            if tag == "config":
                _, rows = parse_markdown_table(text)
                out.config = {key: value for key, value in rows}
            elif text.startswith("| "):
                out.tables.setdefault(tag, []).append((e.step, parse_markdown_table(text)[1]))
            else:
                out.texts.setdefault(tag, []).append((e.step, text))
    return out


def event_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "tb").rglob("*tfevents*"))


class TestTensorBoardBackend(BackendConformance):
    kinds = frozenset({"metrics", "config", "table", "image", "text", "time", "histogram"})
    nonfinite = "kept"
    precision = "float32"  # scalars are simple_value, a float32
    invalid_options = {"no_such_option": 1}

    def make_backend(self, tmp_path: Path) -> TensorBoardBackend:
        return TensorBoardBackend({"root": str(tmp_path / "tb")})

    def read_back(self, tmp_path: Path) -> Readback:
        return readback_dir(tmp_path / "tb" / "conformance" / "conformance-run")

    # -- tensorboard-specific read-back ------------------------------------------------
    def test_one_file_where_verl_puts_it(self, tmp_path: Path) -> None:
        run = sample_run(tmp_path, steps=5)
        self.deliver(tmp_path, run)
        files = event_files(tmp_path)
        assert [f.parent for f in files] == [tmp_path / "tb" / "conformance" / "conformance-run"]
        assert files[0].name == "events.out.tfevents.1700000000.trackmux.run-0001"

    def test_full_run_read_back(self, tmp_path: Path) -> None:
        """The issue's sample run: every value, the table's rows, image sizes, text, config."""
        run = sample_run(tmp_path, steps=100)
        self.deliver(tmp_path, run)
        back = self.read_back(tmp_path)
        self.assert_metrics(back, run)
        assert all(len(back.metrics[k]) == 100 for k in run.metrics)
        [(step, rows)] = back.tables["val/generations"]
        assert step == 50 and rows == [[str(c) for c in r] for r in run.table_rows]
        assert back.images["kl/heatmap_hwc"] == [(50, 32, 16)]
        assert back.images["kl/heatmap_chw"] == [(50, 24, 8)]
        assert back.texts["notes/sample"] == [(50, "**bold** note")]
        assert back.config is not None
        assert back.config["actor.optim.lr"] == "1e-06"
        assert back.config["trainer.total_epochs"] == "3"
        assert back.config["actor.optim.betas"] == "[0.9, 0.999]"
        assert SECRET not in repr(back.config)
        assert "trainer.api_key" in back.config  # the key stays, its value is redacted

    def test_histogram_is_native_and_tensorboard_ui_reads_it(self, tmp_path: Path) -> None:
        """The histo proto as TensorBoard's histogram plugin reads it (migrated to its
        tensor form by the server's own data_compat), NaN/inf as scalars beside it."""
        from tensorboard.backend.event_processing import plugin_event_accumulator
        from tensorboard.plugins.histogram import metadata as histogram_metadata

        from trackmux.testing.conformance import HISTOGRAM_KEY, histogram_run

        run_dir, events = histogram_run(tmp_path)
        result = deliver(run_dir, {"tb": lambda: self.make_backend(tmp_path)}, timeout=60)
        assert result.complete
        acc = load(tmp_path / "tb" / "conformance" / "conformance-run")
        stored = acc.Histograms(HISTOGRAM_KEY)
        last, want = stored[-1].histogram_value, events[-1]
        assert (last.min, last.max, last.num) == (want.min, want.max, want.count)
        assert list(last.bucket_limit) == list(want.edges[1:])
        assert acc.Scalars(f"{HISTOGRAM_KEY}/nan")[-1].value == 2
        assert acc.Scalars(f"{HISTOGRAM_KEY}/inf")[-1].value == 1
        server = plugin_event_accumulator.EventAccumulator(
            str(tmp_path / "tb" / "conformance" / "conformance-run"),
            size_guidance={"tensors": 0})
        server.Reload()  # what `tensorboard --logdir` loads: legacy histo migrated
        meta = server.SummaryMetadata(HISTOGRAM_KEY)
        assert meta.plugin_data.plugin_name == histogram_metadata.PLUGIN_NAME
        tensors = server.Tensors(HISTOGRAM_KEY)
        assert [t.step for t in tensors] == [e.step for e in events]
        buckets = tensor_util.make_ndarray(tensors[-1].tensor_proto)
        assert buckets.shape == (len(want.counts), 3)
        assert buckets[:, 2].tolist() == list(want.counts)

    def test_image_colorspace_and_png(self, tmp_path: Path) -> None:
        run = sample_run(tmp_path, steps=51)
        self.deliver(tmp_path, run)
        acc = load(tmp_path / "tb" / "conformance" / "conformance-run")
        [image] = acc.Images("kl/heatmap_hwc")
        assert image.encoded_image_string.startswith(b"\x89PNG\r\n\x1a\n")

    def test_hparams_summary_carries_config(self, tmp_path: Path) -> None:
        from tensorboard.plugins.hparams import plugin_data_pb2

        run = sample_run(tmp_path, steps=2)
        self.deliver(tmp_path, run)
        acc = load(tmp_path / "tb" / "conformance" / "conformance-run")
        [event] = acc.Tensors("_hparams_/session_start_info")
        content = acc.SummaryMetadata("_hparams_/session_start_info").plugin_data.content
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
        hparams = data.session_start_info.hparams
        assert hparams["actor.optim.lr"].number_value == pytest.approx(1e-6)
        assert hparams["trainer.logger"].string_value == "['console', 'wandb']"
        assert SECRET not in str(data)
        assert event.step == 0

    def test_no_torch_or_tensorflow_imported(self, tmp_path: Path) -> None:
        code = textwrap.dedent(f"""
            import sys
            from pathlib import Path
            from trackmux.core.delivery.sync import deliver
            from trackmux.plugins.tensorboard import TensorBoardBackend
            run_dir = Path({str(sample_run(tmp_path, steps=3).run_dir)!r})
            deliver(run_dir, {{"tb": lambda: TensorBoardBackend({{"root": {str(tmp_path)!r}}})}},
                    timeout=60)
            print(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "tensorflow")))
        """)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120, check=True)
        assert out.stdout.strip() == "[]", out.stdout + out.stderr

    def test_tensorboard_dir_env_wins_like_verl(self, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
        info = RunInfo("proj", "exp", "r1", tmp_path, 0.0)
        assert resolve_log_dir({}, info) == tmp_path / "tensorboard"  # the run's folder
        assert resolve_log_dir({"root": "tensorboard_log"}, info) == Path(
            "tensorboard_log/proj/exp").absolute()  # verl's rule (the drop-in sets root)
        monkeypatch.setenv("TENSORBOARD_DIR", str(tmp_path / "custom"))
        assert resolve_log_dir({"root": "ignored"}, info) == tmp_path / "custom"
        assert resolve_log_dir({"log_dir": str(tmp_path / "opt")}, info) == tmp_path / "opt"
        monkeypatch.delenv("TENSORBOARD_DIR")
        weird = RunInfo("../up", "a/b", "r1", tmp_path, 0.0)
        resolved = resolve_log_dir({"root": str(tmp_path)}, weird)
        assert resolved.parent.parent == tmp_path

    def test_bad_option_is_named(self) -> None:
        with pytest.raises(ValueError, match="'logdir'"):
            TensorBoardBackend({"logdir": "x"})
        with pytest.raises(TypeError, match="'root'"):
            TensorBoardBackend({"root": 3})

    def test_resume_truncates_unacknowledged_bytes(self, tmp_path: Path) -> None:
        """Direct proof of the mechanism: bytes after the recorded offset are dropped."""
        info = RunInfo("p", "n", "r", tmp_path, 1_700_000_000.0)
        first = TensorBoardBackend({"root": str(tmp_path / "tb")})
        first.open(info, ResumeState())
        first.write([MetricsEvent({"x": 1.0}, 1, 1.0, seq=1)])
        first.flush()
        checkpoint = first.state()
        first.write([MetricsEvent({"x": 2.0}, 2, 2.0, seq=2)])  # never acknowledged
        first.close("crashed")
        again = TensorBoardBackend({"root": str(tmp_path / "tb")})
        again.open(info, ResumeState(first.remote_id, checkpoint, 1))
        again.write([MetricsEvent({"x": 2.0}, 2, 2.0, seq=2)])
        again.close("finished")
        back = readback_dir(tmp_path / "tb" / "p" / "n")
        assert back.metrics["x"] == [(1, 1.0), (2, 2.0)]

    @pytest.mark.parametrize("where", ["after_flush", "torn_write"])
    def test_killed_mid_delivery_then_resynced_exactly_once(self, tmp_path: Path,
                                                             where: str) -> None:
        """SIGKILL the delivering process (after a batch reached the file but before its ack,
        or halfway through writing a batch); a second delivery completes the file with each
        value exactly once."""
        run = sample_run(tmp_path, steps=60)
        code = textwrap.dedent(f"""
            import os, signal
            from pathlib import Path
            from trackmux.core.delivery.sync import deliver
            from trackmux.plugins.tensorboard import TensorBoardBackend

            class Dying(TensorBoardBackend):
                batches = 0
                def write(self, events):
                    Dying.batches += 1
                    if Dying.batches == 4 and {where!r} == "torn_write":
                        def half(data):
                            os.pwrite(self._fd, data[: len(data) // 2], self._offset)
                            os.kill(os.getpid(), signal.SIGKILL)
                        self._append = half
                    super().write(events)
                def flush(self):
                    super().flush()
                    if Dying.batches == 4:
                        os.kill(os.getpid(), signal.SIGKILL)

            deliver(Path({str(run.run_dir)!r}),
                    {{"under-test": lambda: Dying({{"root": {str(tmp_path / "tb")!r}}})}},
                    timeout=60, batch_size=8)
        """)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == -9, proc.stderr
        reader = SpoolReader(run.run_dir)
        acked = reader.cursor("under-test").acked_seq
        reader.close()
        assert 0 < acked < 60
        log_dir = tmp_path / "tb" / "conformance" / "conformance-run"
        partial = readback_dir(log_dir).metrics.get("reward/mean", [])
        if where == "after_flush":
            # the unacknowledged batch is in the file: without truncation it would repeat
            assert len(partial) > acked - 1
        self.deliver(tmp_path, run, batch_size=8)
        back = self.read_back(tmp_path)
        self.assert_metrics(back, run)
        assert [len(v) for v in back.metrics.values()] == [60] * 4
        assert len(event_files(tmp_path)) == 1

    def test_a_lost_cursor_rewrites_the_same_file(self, tmp_path: Path) -> None:
        """If the spool forgot everything (cursor reset), delivery starts the file again."""
        run = sample_run(tmp_path, steps=10)
        deliver(run.run_dir, {"tb": lambda: self.make_backend(tmp_path)}, timeout=60)
        reader = SpoolReader(run.run_dir)
        reader.ack("tb2", 0, None, {})
        reader.close()
        deliver(run.run_dir, {"tb2": lambda: self.make_backend(tmp_path)}, timeout=60)
        back = self.read_back(tmp_path)
        self.assert_metrics(back, run)
        assert len(event_files(tmp_path)) == 1

    def test_a_deleted_event_file_is_rebuilt_from_the_spool(self, tmp_path: Path) -> None:
        """Issue 18: output gone is noticed and rewritten whole, not restarted half-empty."""
        run = sample_run(tmp_path, steps=20)
        self.deliver(tmp_path, run)
        before = self.read_back(tmp_path)
        for path in event_files(tmp_path):
            path.unlink()
        self.deliver(tmp_path, run)
        after = self.read_back(tmp_path)
        self.assert_metrics(after, run)
        assert after.metrics == before.metrics and after.images == before.images
        assert len(event_files(tmp_path)) == 1

    def test_the_default_location_is_announced(self, tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
        run = sample_run(tmp_path, steps=2)
        with caplog.at_level("WARNING", "trackmux"):
            result = deliver(run.run_dir, {"tensorboard": lambda: TensorBoardBackend()},
                             timeout=60)
        where = run.run_dir / "tensorboard"
        assert any(str(where) in r.getMessage() and "default" in r.getMessage()
                   for r in caplog.records)
        assert result.where["tensorboard"] == str(where)


def test_end_to_end_through_trackmux_init(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's run through the public API: 100 steps, nested config with a secret,
    a 10-row table, an HWC and a CHW image; TENSORBOARD_DIR chooses the directory."""
    import numpy as np

    import trackmux

    monkeypatch.setenv("TENSORBOARD_DIR", str(tmp_path / "tbdir"))
    run = trackmux.init(project="e2e", name="run", backends=["tensorboard"], dir=tmp_path,
                        config={"actor": {"optim": {"lr": 3e-4}}, "api_key": SECRET})
    for step in range(100):
        run.log({"loss": 1.0 / (step + 1), "acc": step / 100}, step=step)
    rows = [[f"q{i}", f"a{i}", i] for i in range(10)]
    run.log_table("val/samples", ["input", "output", "score"], rows, step=99)
    run.log_image("img/hwc", np.zeros((12, 20, 3)), step=99)
    run.log_image("img/chw", np.ones((3, 7, 5)), step=99)
    summary = run.finish(timeout=60)
    assert summary.complete and summary.delivered["tensorboard"] == summary.events, summary
    back = readback_dir(tmp_path / "tbdir")
    assert back.metrics["loss"] == [(s, pytest.approx(1.0 / (s + 1))) for s in range(100)]
    assert [s for s, _ in back.metrics["acc"]] == list(range(100))
    assert back.tables["val/samples"] == [(99, [[str(c) for c in r] for r in rows])]
    assert back.images["img/hwc"] == [(99, 20, 12)] and back.images["img/chw"] == [(99, 5, 7)]
    assert back.config is not None and back.config["actor.optim.lr"] == "0.0003"
    for path in (tmp_path / "tbdir").iterdir():
        assert SECRET.encode() not in path.read_bytes()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=300), min_size=0, max_size=60),
       st.integers(min_value=0, max_value=40))
def test_batched_crc_matches_tensorboards(blobs: list[bytes], copies: int) -> None:
    """The numpy lane CRC agrees with tensorboard's masked_crc32c, including short and
    unequal records (``copies`` makes groups large enough to take the numpy path)."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    records = blobs + [bytes([i % 256]) * (100 + i % 7) for i in range(copies)]
    assert Framer().masked_crcs(records) == [masked_crc32c(r) for r in records]


def test_framed_records_read_by_tensorboards_reader(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing import event_file_loader

    payloads = [bytes([i]) * (50 + i) for i in range(40)]
    path = tmp_path / "events.out.tfevents.0.x"
    path.write_bytes(Framer().frame(payloads))
    reader = event_file_loader.RawEventFileLoader(str(path))
    assert list(reader.Load()) == payloads


def _write_million(tmp_path: Path) -> dict[str, Any]:  # pragma: no cover - benchmark helper
    import time

    info = RunInfo("bench", "tb", "b", tmp_path, 0.0)
    backend = TensorBoardBackend({"root": str(tmp_path)})
    backend.open(info, ResumeState())
    keys = [f"train/metric_{i:02d}" for i in range(100)]
    batches = [[MetricsEvent({k: s * 0.5 + i for i, k in enumerate(keys)}, s, float(s), seq=s + 1)
                for s in range(start, start + 1000)] for start in range(0, 10_000, 1000)]
    began, cpu = time.perf_counter(), time.process_time()
    for batch in batches:
        backend.write(batch)
        backend.flush()
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    backend.close("finished")
    return {"points": 1_000_000, "seconds": seconds, "cpu_seconds": cpu,
            "bytes": os.path.getsize(backend.path)}


if __name__ == "__main__":  # python tests/backends/test_tensorboard.py: the 1M-point timing
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(_write_million(Path(tmp)))


def test_an_output_disk_that_fills_then_frees_writes_each_event_once(
        tmp_path: Path, small_tmpfs: Path, fill_disk: Any) -> None:
    """Issue 18: the event files' disk (a 1 MB tmpfs) fills mid-run and is freed; the
    batches that failed are retried and each step is in the file exactly once."""
    import time

    import numpy as np

    import trackmux

    run = trackmux.init(project="p", name="r", backends=["tensorboard"], dir=tmp_path / "sp",
                        backend_options={"tensorboard": {"log_dir": str(small_tmpfs / "tb")}})
    rng = np.random.default_rng(0)
    for step in range(40):
        run.log({"x": float(step)}, step=step)
    # the first 40 steps are delivered before the disk fills (not a sleep: on a loaded
    # machine they were not always)
    assert run.flush(60)
    deadline = time.monotonic() + 60
    while (progress := run.delivery()["tensorboard"])[0] < progress[1]:
        assert time.monotonic() < deadline, progress
        time.sleep(0.02)
    filler = small_tmpfs / "filler"
    fill_disk(filler)
    for step in range(40, 120):
        run.log({"x": float(step)}, step=step)
        if step % 10 == 0:
            run.log_image("noise", rng.integers(0, 255, (64, 64, 3), dtype=np.uint8), step=step)
    # a delivery failed on the full disk (reported, retried) before the space comes back
    while not any(p.backend == "tensorboard" for p in run.problems()):
        assert time.monotonic() < deadline + 60, "no delivery failed on the full disk"
        time.sleep(0.02)
    filler.unlink()
    summary = run.finish(timeout=60)
    assert summary.complete, summary
    back = readback_dir(small_tmpfs / "tb")
    assert [s for s, _ in back.metrics["x"]] == list(range(120))
    assert [s for s, _, _ in back.images["noise"]] == list(range(40, 120, 10))
def test_resume_with_rewind_shows_one_point_per_step(tmp_path: Path) -> None:
    """Resume rule (docs/backends/tensorboard.md): the same event file continues, and the
    SessionLog START marker at rewind_to + 1 makes TensorBoard's own reader (purging
    orphaned data, its default) show the resumed value at each re-done step."""
    import trackmux

    options = {"tensorboard": {"log_dir": str(tmp_path / "tb")}}
    run = trackmux.init(project="p", backends=["tensorboard"], dir=tmp_path, run_id="r",
                        backend_options=options)
    for step in range(1, 8):
        run.log({"loss": float(step)}, step=step)
    assert run.finish(timeout=60).complete
    again = trackmux.init(project="p", backends=["tensorboard"], dir=tmp_path, run_id="r",
                          resume="must", rewind_to=4, backend_options=options)
    for step in range(5, 10):
        again.log({"loss": step + 0.5}, step=step)
    assert again.finish(timeout=60).complete
    assert len(event_files(tmp_path)) == 1  # the same file, continued
    acc = event_accumulator.EventAccumulator(str(tmp_path / "tb"),
                                             size_guidance=SIZE_GUIDANCE)  # purges (default)
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [
        (1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0), (5, 5.5), (6, 6.5), (7, 7.5), (8, 8.5),
        (9, 9.5)]
    raw = [(e.step, e.value) for e in load(tmp_path / "tb").Scalars("loss")]
    assert (6, 6.0) in raw  # without purging, the superseded point is still in the file


def test_provenance_as_text(tmp_path: Path) -> None:
    """Issue 25: the TEXT tab's ``provenance`` tag, read back with TensorBoard's reader."""
    from trackmux.core.delivery.sync import deliver
    from trackmux.testing.provenance import COMMIT, provenance_spool

    result = deliver(provenance_spool(tmp_path), {"tensorboard": lambda: TensorBoardBackend(
        {"root": str(tmp_path / "tb")})}, timeout=60)
    assert result.complete, result.problems
    readback = readback_dir(tmp_path / "tb" / "proj" / "prov-run")
    ((step, text),) = readback.texts["provenance"]
    assert step == 0 and COMMIT in text and "+y" in text
    assert readback.config == {"lr": "0.1"}


def test_samples_are_markdown_text_at_each_step(tmp_path: Path) -> None:
    """log_samples on tensorboard: a markdown table per step (its text step slider)."""
    from samples_support import OPTIONS, STEPS, check_rows, sample_events

    from trackmux.core.spool.writer import SpoolWriter

    run_dir = tmp_path / "spool" / "p" / "r1"
    writer = SpoolWriter(run_dir)
    writer.set_meta(run_id="r1", project="p", name="samples", state="finished",
                    started_at=1.7e9)
    for event in sample_events(1.7e9):
        writer.append(event)
    writer.close()
    result = deliver(run_dir, {"tb": lambda: TensorBoardBackend(
        {"root": str(tmp_path / "tb"), **OPTIONS})}, timeout=60)
    assert result.complete, result.problems
    tables = readback_dir(next((tmp_path / "tb").rglob("*tfevents*")).parent).tables
    assert [step for step, _ in tables["rollout/samples"]] == list(STEPS)
    for step, rows in tables["rollout/samples"]:
        check_rows(step, rows)


def test_trajectories_are_transcripts_at_each_step(tmp_path: Path) -> None:
    """Conversations on tensorboard (issue 37): text with one transcript per chosen sample
    at each step (its text step slider), every turn in order, read from the event files."""
    from trajectory_support import BEST, OPTIONS, STEPS, check_transcript, trajectory_spool

    run_dir = trajectory_spool(tmp_path)
    result = deliver(run_dir, {"tb": lambda: TensorBoardBackend(
        {"root": str(tmp_path / "tb"), **OPTIONS})}, timeout=60)
    assert result.complete, result.problems
    texts = readback_dir(next((tmp_path / "tb").rglob("*tfevents*")).parent).texts
    assert [step for step, _ in texts["agent/rollouts"]] == list(STEPS)
    for step, text in texts["agent/rollouts"]:
        parts = text.split("**sample ")[1:]
        assert [int(p.split("**")[0]) for p in parts] == BEST
        for i, part in zip(BEST, parts, strict=True):
            lines = part.split("\n")  # not splitlines(): U+2028 is text here
            check_transcript("\n".join(line[4:] for line in lines), step, i)
            assert f"{i % 2} failed" in lines[0]
