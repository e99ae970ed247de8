"""The conformance suite every built-in backend passes, and third parties run on theirs.

A subclass provides two things: ``make_backend(tmp_path)`` (the backend under test, told
to keep its storage inside ``tmp_path``) and ``read_back(tmp_path)`` (what the backend's
own storage holds, read with the backend library's own reader). The suite writes a
sample run to a real spool and delivers it through core's real delivery worker, so
fallbacks, batching and cursors are exercised exactly as in production.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trackmux.core.backend import Backend
from trackmux.core.events import (
    ArtifactEvent,
    ConfigEvent,
    HistogramEvent,
    ImageEvent,
    MetricsEvent,
    TableEvent,
    TextEvent,
)
from trackmux.core.normalize import to_json_value
from trackmux.core.redact import redact
from trackmux.core.spool import SpoolWriter
from trackmux.core.spool_reader import SpoolReader
from trackmux.core.sync import SyncResult, deliver

SECRET = "sk-CONFORMANCE-SECRET-8f3a9c"
URL_PASSWORD = "hunter2-conformance"
METRIC_KEYS = ("reward/mean", "kl/divergence", "timing_s/gen", "val-core/acc/mean@5")
TABLE_STEP = 50
TABLE_COLUMNS = ("input", "output", "score")


@dataclass
class Readback:
    """What a backend's storage holds, in trackmux terms. Keys as the backend names them.

    metrics: key -> [(step, value)], in step order; tables: key -> [(step, rows)];
    images: key -> [(step, width, height)]; texts: key -> [(step, text)];
    config: flat key -> value (values may come back as strings), or None if not stored;
    histograms: key -> [(step, counts)] where the backend shows histograms natively;
    artifacts: name -> [(step, {file path: size})] where the backend keeps artifacts.
    """

    metrics: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    tables: dict[str, list[tuple[int, list[list[Any]]]]] = field(default_factory=dict)
    images: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    texts: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    config: dict[str, Any] | None = None
    histograms: dict[str, list[tuple[int, list[int]]]] = field(default_factory=dict)
    artifacts: dict[str, list[tuple[int, dict[str, int]]]] = field(default_factory=dict)


@dataclass
class SampleRun:
    run_dir: Path
    metrics: dict[str, list[tuple[int, float]]]
    table_rows: list[list[Any]]
    image_sizes: list[tuple[int, int]]


def _png(width: int, height: int, channels_first: bool) -> ImageEvent:
    import numpy as np

    from trackmux.core.media import encode_image

    array = np.linspace(0, 1, width * height * 3).reshape(height, width, 3)
    if channels_first:
        array = array.transpose(2, 0, 1)
    encoded = encode_image(array)
    key = "kl/heatmap_chw" if channels_first else "kl/heatmap_hwc"
    return ImageEvent(key, encoded.png, encoded.width, encoded.height, encoded.mode,
                      TABLE_STEP, 1_700_000_000.0 + TABLE_STEP, "KL per token")


def sample_run(tmp_path: Path, steps: int = 100, nonfinite: bool = False) -> SampleRun:
    """Write the suite's sample run straight into a spool under ``tmp_path``."""
    run_dir = tmp_path / "spool" / "conformance" / "run-0001"
    writer = SpoolWriter(run_dir)
    writer.set_meta(run_id="run-0001", project="conformance", name="conformance-run",
                    state="finished", started_at=1_700_000_000.0)
    config = redact(to_json_value({
        "trainer": {"total_epochs": 3, "api_key": SECRET, "logger": ["console", "wandb"]},
        "actor": {"optim": {"lr": 1e-6, "betas": [0.9, 0.999]}, "ppo_mini_batch_size": 64},
        "tracking_uri": f"https://alice:{URL_PASSWORD}@mlflow.example/",
    }))
    writer.append(ConfigEvent(config, 0, 1_700_000_000.0))
    expected: dict[str, list[tuple[int, float]]] = {k: [] for k in METRIC_KEYS}
    rows: list[list[Any]] = [[f"prompt {i}", f"response {i} | ünïcode", i / 10]
                             for i in range(10)]
    for step in range(steps):
        data = {
            "reward/mean": 0.1 + step / steps,
            "kl/divergence": 0.01 * (step % 7),
            "timing_s/gen": 1.5 + (step % 3),
            "val-core/acc/mean@5": float(step) / 3.0,
        }
        if nonfinite and step == 10:
            data["kl/divergence"] = math.nan
        if nonfinite and step == 11:
            data["kl/divergence"] = math.inf
        for key, value in data.items():
            expected[key].append((step, value))
        writer.append(MetricsEvent(data, step, 1_700_000_000.0 + step))
        if step == TABLE_STEP:
            writer.append(TableEvent("val/generations", TABLE_COLUMNS,
                                     tuple(tuple(r) for r in rows), step, 1_700_000_000.0 + step))
            writer.append(_png(32, 16, channels_first=False))
            writer.append(_png(24, 8, channels_first=True))
            writer.append(TextEvent("notes/sample", "**bold** note", step,
                                    1_700_000_000.0 + step))
    writer.close()
    return SampleRun(run_dir, expected, rows, [(32, 16), (24, 8)])


HISTOGRAM_KEY = "reward/dist"
HISTOGRAM_STEPS = (0, 1, 2)


def histogram_run(tmp_path: Path) -> tuple[Path, list[HistogramEvent]]:
    """A spool holding a few histograms (one with NaN and inf counted apart)."""
    from trackmux.core.histogram import bin_values

    run_dir = tmp_path / "spool" / "conformance" / "run-0001"
    writer = SpoolWriter(run_dir)
    writer.set_meta(run_id="run-0001", project="conformance", name="conformance-run",
                    state="finished", started_at=1_700_000_000.0)
    events = []
    for step in HISTOGRAM_STEPS:
        values = [((i * 37) % 101) / 100 + step for i in range(500)]
        if step == HISTOGRAM_STEPS[-1]:
            values += [math.nan, math.nan, math.inf]
        b = bin_values(values, 16)
        event = HistogramEvent(HISTOGRAM_KEY, b.counts, b.edges, b.count, b.min, b.max,
                               b.mean, b.std, step, 1_700_000_000.0 + step, b.nan, b.inf,
                               b.neginf)
        writer.append(MetricsEvent({"reward/mean": float(step)}, step, event.time))
        writer.append(event)
        events.append(event)
    writer.close()
    return run_dir, events


ARTIFACT_NAME = "ckpt-step7"
ARTIFACT_STEP = 7


def artifact_run(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """A spool holding one folder artifact: two small copied files, one large referenced."""
    from trackmux.core.artifacts import collect

    run_dir = tmp_path / "spool" / "conformance" / "run-0001"
    writer = SpoolWriter(run_dir)
    writer.set_meta(run_id="run-0001", project="conformance", name="conformance-run",
                    state="finished", started_at=1_700_000_000.0)
    source = tmp_path / "checkpoint"
    (source / "shards").mkdir(parents=True)
    (source / "config.json").write_text('{"lr": 1e-06}')
    (source / "shards" / "tokenizer.txt").write_text("a b c\n" * 10)
    (source / "shards" / "model.bin").write_bytes(bytes(range(256)) * 64)
    name, type_, root, files = collect(source, ARTIFACT_NAME, "model", run_dir, 1024)
    writer.append(MetricsEvent({"reward/mean": 1.0}, ARTIFACT_STEP, 1_700_000_007.0))
    writer.append(ArtifactEvent(name, type_, root, files, ARTIFACT_STEP, 1_700_000_007.0))
    writer.close()
    return run_dir, {f.path: f.size for f in files}


class BackendConformance:
    """Subclass and implement ``make_backend`` and ``read_back``; pytest collects the tests.

    Class attributes to adjust: ``kinds`` (what ``read_back`` can see: a subset of
    metrics, config, table, image, text), ``expected_key`` (how the backend renames keys),
    ``nonfinite`` ("kept": NaN/inf read back as such; "any": not checked).
    """

    kinds: frozenset[str] = frozenset({"metrics", "config", "table", "image"})
    #: add "histogram" to ``kinds`` when ``read_back`` fills ``Readback.histograms``;
    #: otherwise the suite checks core's fallback (summary scalars) among the metrics.
    nonfinite: str = "kept"

    def make_backend(self, tmp_path: Path) -> Backend:
        raise NotImplementedError

    def read_back(self, tmp_path: Path) -> Readback:
        raise NotImplementedError

    def expected_key(self, key: str) -> str:
        return key

    # -- helpers -------------------------------------------------------------------
    def deliver(self, tmp_path: Path, run: SampleRun, batch_size: int = 1000,
                on_progress: Callable[[Any], None] | None = None) -> SyncResult:
        result = deliver(run.run_dir, {"under-test": lambda: self.make_backend(tmp_path)},
                         timeout=120, batch_size=batch_size, on_progress=on_progress)
        assert result.complete, f"delivery incomplete: {result.pending} {result.problems}"
        return result

    def assert_metrics(self, readback: Readback, run: SampleRun) -> None:
        for key, points in run.metrics.items():
            name = self.expected_key(key)
            assert name in readback.metrics, f"{name!r} missing; got {sorted(readback.metrics)}"
            got = sorted(readback.metrics[name])
            assert [s for s, _ in got] == [s for s, _ in points], f"steps of {name!r} differ"
            for (step, want), (_, have) in zip(points, got, strict=False):
                if math.isnan(want):
                    if self.nonfinite == "kept":
                        assert math.isnan(have), f"{name}@{step}: NaN became {have}"
                elif math.isinf(want):
                    if self.nonfinite == "kept":
                        assert have == want or abs(have) > 1e300, f"{name}@{step}: inf is {have}"
                else:
                    assert math.isclose(have, want, rel_tol=1e-6, abs_tol=1e-9), (
                        f"{name}@{step}: {have} != {want}")

    # -- the suite -------------------------------------------------------------------
    def test_metrics_every_value_at_its_step(self, tmp_path: Path) -> None:
        run = sample_run(tmp_path)
        self.deliver(tmp_path, run)
        self.assert_metrics(self.read_back(tmp_path), run)

    def test_nan_and_inf_do_not_stop_delivery(self, tmp_path: Path) -> None:
        run = sample_run(tmp_path, steps=20, nonfinite=True)
        self.deliver(tmp_path, run)
        self.assert_metrics(self.read_back(tmp_path), run)

    def test_config_flattened_and_secret_absent(self, tmp_path: Path) -> None:
        run = sample_run(tmp_path, steps=3)
        self.deliver(tmp_path, run)
        readback = self.read_back(tmp_path)
        if "config" in self.kinds:
            assert readback.config, "config was not stored"
            text = repr(readback.config)
            assert "1e-06" in text or "1e-6" in text or "0.000001" in text, text[:500]
        for path in tmp_path.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert SECRET.encode() not in data, f"secret found in {path}"
                assert URL_PASSWORD.encode() not in data, f"URL password found in {path}"

    def test_table_rows(self, tmp_path: Path) -> None:
        if "table" not in self.kinds:
            return
        run = sample_run(tmp_path, steps=TABLE_STEP + 1)
        self.deliver(tmp_path, run)
        tables = self.read_back(tmp_path).tables
        name = self.expected_key("val/generations")
        assert name in tables, f"table {name!r} missing; got {sorted(tables)}"
        step, rows = tables[name][-1]
        assert step == TABLE_STEP
        assert [[str(c) for c in r] for r in rows] == [[str(c) for c in r]
                                                         for r in run.table_rows]

    def test_images_keep_their_sizes(self, tmp_path: Path) -> None:
        if "image" not in self.kinds:
            return
        run = sample_run(tmp_path, steps=TABLE_STEP + 1)
        self.deliver(tmp_path, run)
        images = self.read_back(tmp_path).images
        hwc = images.get(self.expected_key("kl/heatmap_hwc"))
        chw = images.get(self.expected_key("kl/heatmap_chw"))
        assert hwc and chw, f"images missing; got {sorted(images)}"
        assert (hwc[-1][1], hwc[-1][2]) == run.image_sizes[0]
        assert (chw[-1][1], chw[-1][2]) == run.image_sizes[1]
        assert hwc[-1][0] == TABLE_STEP

    def test_redelivery_after_lost_acknowledgement_is_exactly_once(self, tmp_path: Path
                                                                   ) -> None:
        """A crash after write() but before the ack makes core send a batch again."""
        run = sample_run(tmp_path, steps=60)
        snapshots: list[tuple[int, Any, Any]] = []

        def snapshot(progress: Any) -> None:
            if progress.state == "delivering":
                reader = SpoolReader(run.run_dir)
                cursor = reader.cursor("under-test")
                reader.close()
                snapshots.append((cursor.acked_seq, cursor.remote_id, cursor.state))

        self.deliver(tmp_path, run, batch_size=8, on_progress=snapshot)
        assert len(snapshots) >= 4
        acked, remote_id, state = snapshots[len(snapshots) // 2]
        reader = SpoolReader(run.run_dir)
        reader.ack("under-test", acked, remote_id, state)  # the later acks were "lost"
        reader.close()
        self.deliver(tmp_path, run, batch_size=8)
        self.assert_metrics(self.read_back(tmp_path), run)

    def test_second_delivery_sends_nothing(self, tmp_path: Path) -> None:
        run = sample_run(tmp_path, steps=10)
        first = self.deliver(tmp_path, run)
        second = self.deliver(tmp_path, run)
        assert second.acked == first.acked
        self.assert_metrics(self.read_back(tmp_path), run)

    def test_histograms_native_or_fallback(self, tmp_path: Path) -> None:
        """Native histograms keep their counts per step; other backends get core's summary
        scalars (NaN/inf counts included): no backend drops a distribution silently."""
        _check_histograms(self, tmp_path)

    def test_artifacts_native_or_listed(self, tmp_path: Path) -> None:
        """Every file of an artifact (copied or referenced) reaches a backend that keeps
        artifacts; a backend that shows text gets core's listing of the files."""
        _check_artifacts(self, tmp_path)


def _check_histograms(suite: BackendConformance, tmp_path: Path) -> None:
    run_dir, events = histogram_run(tmp_path)
    result = deliver(run_dir, {"under-test": lambda: suite.make_backend(tmp_path)},
                     timeout=120)
    assert result.complete, f"delivery incomplete: {result.pending} {result.problems}"
    readback = suite.read_back(tmp_path)
    if "histogram" in suite.kinds:
        name = suite.expected_key(HISTOGRAM_KEY)
        got = readback.histograms.get(name)
        assert got, f"histogram {name!r} missing; got {sorted(readback.histograms)}"
        assert [s for s, _ in sorted(got)] == [e.step for e in events]
        for (_, counts), event in zip(sorted(got), events, strict=True):
            assert [int(c) for c in counts] == list(event.counts), f"counts at {event.step}"
        return
    from trackmux.core.fallbacks import histogram_metrics

    for event in events:
        for key, want in histogram_metrics(event).data.items():
            name = suite.expected_key(key)
            points = dict(readback.metrics.get(name, []))
            assert event.step in points, f"fallback scalar {name!r} missing at {event.step}"
            assert math.isclose(points[event.step], want, rel_tol=1e-5, abs_tol=1e-9), (
                f"{name}@{event.step}: {points[event.step]} != {want}")



def _check_artifacts(suite: BackendConformance, tmp_path: Path) -> None:
    run_dir, sizes = artifact_run(tmp_path)
    result = deliver(run_dir, {"under-test": lambda: suite.make_backend(tmp_path)},
                     timeout=120)
    assert result.complete, f"delivery incomplete: {result.pending} {result.problems}"
    readback = suite.read_back(tmp_path)
    if "artifact" in suite.kinds:
        got = readback.artifacts.get(ARTIFACT_NAME)
        assert got, f"artifact {ARTIFACT_NAME!r} missing; got {sorted(readback.artifacts)}"
        step, files = got[-1]
        assert step == ARTIFACT_STEP and files == sizes
    elif "text" in suite.kinds:
        texts = readback.texts.get(suite.expected_key(f"artifacts/{ARTIFACT_NAME}"))
        assert texts, f"artifact listing missing; got {sorted(readback.texts)}"
        assert all(path in texts[-1][1] for path in sizes), texts[-1][1]
