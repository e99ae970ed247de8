"""The conformance suite every built-in backend passes, and third parties run on theirs.

A subclass provides two methods: ``make_backend(self, tmp_path)`` (the backend under test,
told to keep its storage inside ``tmp_path``) and ``read_back(self, tmp_path)`` (what the
backend's own storage holds, read with the backend library's own reader). The suite
writes a sample run to a real spool and delivers it through core's real delivery worker,
so fallbacks, batching, cursors, retries and quarantine run exactly as in production.
Values are compared with ``math.isclose(rel_tol=1e-6, abs_tol=1e-9)`` except in
``test_exact_ints_and_float64``, which asks for equality (``precision = "float32"``
relaxes it to float32's 2**-23 for stores that keep float32).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trackmux.core.backends.contract import Backend, ResumeState, RunInfo
from trackmux.core.delivery.sync import SyncResult, deliver
from trackmux.core.errors import PermanentBackendError
from trackmux.core.events import (
    ArtifactEvent,
    ConfigEvent,
    Event,
    FindingEvent,
    HistogramEvent,
    ImageEvent,
    MetricsEvent,
    TableEvent,
    TextEvent,
)
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.writer import SpoolWriter
from trackmux.core.values.normalize import flatten, to_json_value
from trackmux.core.values.redact import redact

if TYPE_CHECKING:  # pytest only when the suite runs: trackmux.testing works without it
    import pytest

SECRET = "sk-CONFORMANCE-SECRET-8f3a9c"
URL_PASSWORD = "hunter2-conformance"
METRIC_KEYS = ("reward/mean", "kl/divergence", "timing_s/gen", "val-core/acc/mean@5")
TABLE_STEP = 50
TABLE_COLUMNS = ("input", "output", "score")
T0 = 1_700_000_000.0
CAPTION = "KL per token"
TEXT_KEY = "notes/sample"
TEXT = "**bold** note"
#: keys of the extended run: exact ints, float64 precision, reserved words, space, unicode
EXACT_INT_KEY = "exact/int"
FLOAT64_KEY = "exact/float64"
AWKWARD_KEYS = ("step", "time", "eval/with space", "ünïcode/ключ")
SECOND_CONFIG = {"actor": {"optim": {"warmup_steps": 10}}, "stage": "second"}
SECOND_CONFIG_STEP = 2
#: leaves the merged config must hold after the two config events (path -> value)
MERGED_LEAVES = {("actor", "optim", "lr"): 1e-6, ("actor", "optim", "warmup_steps"): 10,
                 ("actor", "ppo_mini_batch_size"): 64, ("stage",): "second",
                 ("trainer", "total_epochs"): 3}


@dataclass
class Readback:
    """What a backend's storage holds, in trackmux terms. Keys as the backend names them.

    metrics: key -> [(step, value)], in step order; tables: key -> [(step, rows)];
    images: key -> [(step, width, height)]; texts: key -> [(step, text)];
    config: key -> value, flat (keys joined with ``/`` or ``.``) or nested; values may
    come back as strings; None if not stored. Only for kinds "caption" and "time":
    captions: image key -> [(step, caption)]; times: metric key -> [(step, unix time)].
    histograms: key -> [(step, counts)] where the backend shows histograms natively;
    artifacts: name -> [(step, {file path: size})] where the backend keeps artifacts.
    """

    metrics: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    tables: dict[str, list[tuple[int, list[list[Any]]]]] = field(default_factory=dict)
    images: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    texts: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    config: dict[str, Any] | None = None
    captions: dict[str, list[tuple[int, str | None]]] = field(default_factory=dict)
    times: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
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

    from trackmux.core.values.media import encode_image

    array = np.linspace(0, 1, width * height * 3).reshape(height, width, 3)
    if channels_first:
        array = array.transpose(2, 0, 1)
    encoded = encode_image(array)
    key = "kl/heatmap_chw" if channels_first else "kl/heatmap_hwc"
    return ImageEvent(key, encoded.png, encoded.width, encoded.height, encoded.mode,
                      TABLE_STEP, T0 + TABLE_STEP, CAPTION)


def metric_time(step: int) -> float:
    """The wall time the sample run stamps on step ``step`` (whole milliseconds)."""
    return T0 + step + 0.25


def sample_run(tmp_path: Path, steps: int = 100, nonfinite: bool = False,
               extended: bool = False) -> SampleRun:
    """Write the suite's sample run straight into a spool under ``tmp_path``.

    ``extended`` adds a second config event (merged into the first), exact ints
    (``2**40 + step``), a float64-only value and awkward keys to every step."""
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
        if extended:
            data[EXACT_INT_KEY] = 2**40 + step
            data[FLOAT64_KEY] = 1 / 3 + step
            for i, key in enumerate(AWKWARD_KEYS):
                data[key] = step * 10 + i
        for key, value in data.items():
            expected.setdefault(key, []).append((step, value))
        writer.append(MetricsEvent(data, step, metric_time(step)))
        if extended and step == SECOND_CONFIG_STEP:
            writer.append(ConfigEvent(dict(SECOND_CONFIG), step, metric_time(step)))
        if step == TABLE_STEP:
            writer.append(TableEvent("val/generations", TABLE_COLUMNS,
                                     tuple(tuple(r) for r in rows), step, 1_700_000_000.0 + step))
            writer.append(_png(32, 16, channels_first=False))
            writer.append(_png(24, 8, channels_first=True))
            writer.append(TextEvent(TEXT_KEY, TEXT, step, T0 + step))
    writer.close()
    return SampleRun(run_dir, expected, rows, [(32, 16), (24, 8)])


#: the late-event run: steps before the late events, the finding's onset, steps after
LATE_BEFORE = 20
LATE_AFTER = 5
FINDING_STEP = 7
FINDING_RULE = "kl_blowup"


def late_run(tmp_path: Path) -> tuple[SampleRun, FindingEvent]:
    """A run in the order a live run reaches a backend (docs/plugins.md, "Steps that come
    late"): metrics of steps 0-19, then provenance recorded at step 0 (it is collected on a
    thread after ``init()``) and a doctor finding at its onset step 7 (judged at step 19),
    then steps 20-24. A store that keeps a "current step" moved back to 7 by the late
    events files steps 20-24 (or its summary) at the wrong step."""
    from trackmux.testing.provenance import provenance_event

    run_dir = tmp_path / "spool" / "conformance" / "run-0001"
    writer = SpoolWriter(run_dir)
    writer.set_meta(run_id="run-0001", project="conformance", name="conformance-run",
                    state="finished", started_at=T0)
    writer.append(ConfigEvent({"trainer": {"total_epochs": 3}}, 0, T0))
    expected: dict[str, list[tuple[int, float]]] = {"reward/mean": [], "kl/divergence": []}

    def metrics(step: int) -> None:
        data = {"reward/mean": 0.1 + step / 100, "kl/divergence": 0.01 * (step + 1)}
        for key, value in data.items():
            expected[key].append((step, value))
        writer.append(MetricsEvent(data, step, metric_time(step)))

    for step in range(LATE_BEFORE):
        metrics(step)
    writer.append(provenance_event(step=0, time=T0))
    finding = FindingEvent(FINDING_RULE, "warning", ("kl/divergence",),
                           "kl/divergence rose 4.0x above its level (conformance)",
                           FINDING_STEP, metric_time(LATE_BEFORE - 1))
    writer.append(finding)
    for step in range(LATE_BEFORE, LATE_BEFORE + LATE_AFTER):
        metrics(step)
    writer.close()
    return SampleRun(run_dir, expected, [], []), finding


class _Injected(Backend):
    """Wraps the backend under test and fails on purpose on one ``write()`` call."""

    def __init__(self, inner: Backend, plan: dict[str, Any]) -> None:
        super().__init__(inner.options)
        self.inner = inner
        self.plan = plan
        setattr(self, "capabilities", inner.capabilities)  # noqa: B010 - a ClassVar
        setattr(self, "name", inner.name)  # noqa: B010

    def _call(self, what: str) -> None:
        self.plan["calls"].append(what)

    def open(self, run: RunInfo, resume: ResumeState) -> None:
        self._call("open")
        self.inner.open(run, resume)

    def write(self, events: Sequence[Event]) -> None:
        self._call("write")
        self.plan["writes"] += 1
        if self.plan["writes"] == self.plan["fail_at"]:
            if self.plan["how"] == "permanent":
                raise PermanentBackendError("injected: the project name is refused")
            self.inner.write(events[:max(1, len(events) // 2)])
            self.inner.flush()
            raise OSError("injected failure in the middle of a batch")
        self.inner.write(events)

    def flush(self) -> None:
        self.inner.flush()

    def close(self, status: str) -> None:
        self._call(f"close:{status}")
        self.inner.close(status)

    @property
    def remote_id(self) -> str | None:
        return self.inner.remote_id

    def state(self) -> dict[str, Any]:
        self._call("state")
        return self.inner.state()

    def media_dir(self) -> Path | None:
        return self.inner.media_dir()


def _config_leaves(config: dict[str, Any]) -> dict[tuple[str, ...], Any]:
    """Readback config (flat with ``/`` or ``.``, or nested) as path -> value."""
    return {tuple(p for p in re.split(r"[/.]", key) if p): value
            for key, value in flatten(config).items()}


def _same_value(have: Any, want: Any) -> bool:
    if str(have) == str(want):
        return True
    try:
        return math.isclose(float(have), float(want), rel_tol=1e-9)
    except (TypeError, ValueError):
        return False


HISTOGRAM_KEY = "reward/dist"
HISTOGRAM_STEPS = (0, 1, 2)


def histogram_run(tmp_path: Path) -> tuple[Path, list[HistogramEvent]]:
    """A spool holding a few histograms (one with NaN and inf counted apart)."""
    from trackmux.core.values.histogram import bin_values

    run_dir = tmp_path / "spool" / "conformance" / "run-0001"
    writer = SpoolWriter(run_dir)
    writer.set_meta(run_id="run-0001", project="conformance", name="conformance-run",
                    state="finished", started_at=1_700_000_000.0)
    events = []
    for step in HISTOGRAM_STEPS:
        values = [((i * 37) % 101) / 100 + step for i in range(500)]
        if step == HISTOGRAM_STEPS[-1]:
            values += [math.nan, math.nan, math.inf]
        event = bin_values(values, 16).event(HISTOGRAM_KEY, step, 1_700_000_000.0 + step)
        writer.append(MetricsEvent({"reward/mean": float(step)}, step, event.time))
        writer.append(event)
        events.append(event)
    writer.close()
    return run_dir, events


ARTIFACT_NAME = "ckpt-step7"
ARTIFACT_STEP = 7


def artifact_run(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """A spool holding one folder artifact: two small copied files, one large referenced."""
    from trackmux.core.values.artifacts import collect

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

    Class attributes to adjust:

    - ``kinds``: what ``read_back`` can see, a subset of metrics, config, table, image,
      text, caption (image captions) and time (each metric's original wall time);
    - ``nonfinite``: "kept" (NaN/inf read back as such) or "any" (not checked);
    - ``precision``: "float64" (values read back exactly) or "float32";
    - ``invalid_options``: options the backend's constructor must refuse (ValueError,
      TypeError or PermanentBackendError) without any I/O; None skips that check.

    Method to override: ``expected_key(key)``, how the backend renames a key.
    """

    kinds: frozenset[str] = frozenset({"metrics", "config", "table", "image"})
    #: add "histogram" to ``kinds`` when ``read_back`` fills ``Readback.histograms``;
    #: otherwise the suite checks core's fallback (summary scalars) among the metrics.
    nonfinite: str = "kept"
    precision: str = "float64"
    invalid_options: dict[str, Any] | None = None

    def make_backend(self, tmp_path: Path) -> Backend:
        raise NotImplementedError

    def read_back(self, tmp_path: Path) -> Readback:
        raise NotImplementedError

    def expected_key(self, key: str) -> str:
        return key

    # -- helpers -------------------------------------------------------------------
    def deliver(self, tmp_path: Path, run: SampleRun, batch_size: int = 1000,
                on_progress: Callable[[Any], None] | None = None,
                factory: Callable[[], Backend] | None = None) -> SyncResult:
        result = deliver(run.run_dir,
                         {"under-test": factory or (lambda: self.make_backend(tmp_path))},
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

    def test_mixed_type_table_cells(self, tmp_path: Path) -> None:
        """verl's rollout tables mix str, numbers and None (None in text and in number
        columns, as core leaves them): every cell comes back, a missing one as missing
        ("", "None", "null" and NaN count as missing; numbers compare as floats)."""
        if "table" not in self.kinds:
            return
        columns = ("prompt", "response", "reward", "acc", "note")
        rows = (("p0", "r0", 0.5, 1, None), ("p1", None, None, 0, "x"),
                ("p2", "r2", -1.25, None, "y"))

        def cell(value: Any) -> Any:
            if value is None or value in ("", "None", "null", "nan", "NaN") or (
                    isinstance(value, float) and math.isnan(value)):
                return None
            try:
                return float(value)
            except (TypeError, ValueError):
                return str(value)

        run_dir = tmp_path / "spool" / "conformance" / "run-0001"
        writer = SpoolWriter(run_dir)
        writer.set_meta(run_id="run-0001", project="conformance", name="conformance-run",
                        state="finished", started_at=1_700_000_000.0)
        writer.append(MetricsEvent({"reward/mean": 0.5}, 3, 1_700_000_003.0))
        writer.append(TableEvent("rollout/samples", columns, rows, 3, 1_700_000_003.0))
        writer.close()
        self.deliver(tmp_path, SampleRun(run_dir, {}, [], []))
        tables = self.read_back(tmp_path).tables
        name = self.expected_key("rollout/samples")
        assert name in tables, f"table {name!r} missing; got {sorted(tables)}"
        step, got = tables[name][-1]
        assert step == 3
        assert [[cell(c) for c in r] for r in got] == [[cell(c) for c in r] for r in rows]

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

    # -- the plugin contract v1 ------------------------------------------------------
    def test_text(self, tmp_path: Path) -> None:
        if "text" not in self.kinds:
            return
        run = sample_run(tmp_path, steps=TABLE_STEP + 1)
        self.deliver(tmp_path, run)
        texts = self.read_back(tmp_path).texts
        name = self.expected_key(TEXT_KEY)
        assert name in texts, f"text {name!r} missing; got {sorted(texts)}"
        assert texts[name][-1] == (TABLE_STEP, TEXT), texts[name]

    def test_captions(self, tmp_path: Path) -> None:
        if "caption" not in self.kinds:
            return
        run = sample_run(tmp_path, steps=TABLE_STEP + 1)
        self.deliver(tmp_path, run)
        captions = self.read_back(tmp_path).captions
        for key in ("kl/heatmap_hwc", "kl/heatmap_chw"):
            name = self.expected_key(key)
            assert captions.get(name), f"caption of {name!r} missing; got {sorted(captions)}"
            assert captions[name][-1] == (TABLE_STEP, CAPTION), captions[name]

    def test_original_timestamps(self, tmp_path: Path) -> None:
        if "time" not in self.kinds:
            return
        run = sample_run(tmp_path, steps=10)
        self.deliver(tmp_path, run)
        times = self.read_back(tmp_path).times
        name = self.expected_key("reward/mean")
        assert name in times, f"times of {name!r} missing; got {sorted(times)}"
        got = sorted(times[name])
        assert [s for s, _ in got] == list(range(10))
        for step, have in got:
            assert abs(have - metric_time(step)) < 1e-3, f"{name}@{step}: time {have}"

    def test_config_merged_across_two_events(self, tmp_path: Path) -> None:
        if "config" not in self.kinds:
            return
        run = sample_run(tmp_path, steps=5, extended=True)
        self.deliver(tmp_path, run)
        config = self.read_back(tmp_path).config
        assert config, "config was not stored"
        leaves = _config_leaves(config)
        for path, want in MERGED_LEAVES.items():
            found = [v for p, v in leaves.items() if p[-len(path):] == path]
            assert found, f"config {'/'.join(path)} missing after the second log_config; " \
                          f"got {sorted(leaves)[:40]}"
            assert any(_same_value(v, want) for v in found), (path, found, want)

    def test_exact_ints_and_float64(self, tmp_path: Path) -> None:
        run = sample_run(tmp_path, steps=12, extended=True)
        self.deliver(tmp_path, run)
        metrics = self.read_back(tmp_path).metrics
        rel = 0.0 if self.precision == "float64" else 2.0 ** -23
        for key in (EXACT_INT_KEY, FLOAT64_KEY):
            name = self.expected_key(key)
            assert name in metrics, f"{name!r} missing; got {sorted(metrics)}"
            got = sorted(metrics[name])
            assert [s for s, _ in got] == [s for s, _ in run.metrics[key]], name
            for (step, want), (_, have) in zip(run.metrics[key], got, strict=True):
                ok = have == want if rel == 0.0 else math.isclose(have, want, rel_tol=rel)
                assert ok, f"{name}@{step}: read back {have!r}, logged {want!r}"

    def test_awkward_keys(self, tmp_path: Path) -> None:
        """Reserved words (step, time), a space and unicode are ordinary keys."""
        run = sample_run(tmp_path, steps=12, extended=True)
        self.deliver(tmp_path, run)
        self.assert_metrics(self.read_back(tmp_path), run)

    def test_mid_batch_failure_is_retried_exactly_once(self, tmp_path: Path) -> None:
        """A write() that delivered half its batch, then raised: core closes the backend
        ("retrying"), opens a new one at the acknowledged state and retries; nothing is
        stored twice."""
        run = sample_run(tmp_path, steps=40)
        plan: dict[str, Any] = {"calls": [], "writes": 0, "fail_at": 3, "how": "mid-batch"}
        self.deliver(tmp_path, run, batch_size=8,
                     factory=lambda: _Injected(self.make_backend(tmp_path), plan))
        calls = plan["calls"]
        failed_at = [i for i, c in enumerate(calls) if c == "write"][2]
        assert calls[failed_at + 1:failed_at + 5] == ["close:retrying", "open", "state",
                                                     "write"], calls
        self.assert_metrics(self.read_back(tmp_path), run)

    def test_permanent_failure_is_not_retried(self, tmp_path: Path) -> None:
        """PermanentBackendError: one report naming the backend and cause, no retry, the
        delivery ends "failed" at once; a later delivery continues exactly once."""
        run = sample_run(tmp_path, steps=30)
        plan: dict[str, Any] = {"calls": [], "writes": 0, "fail_at": 2, "how": "permanent"}
        result = deliver(run.run_dir, {"under-test": lambda: _Injected(
            self.make_backend(tmp_path), plan)}, timeout=120, batch_size=8)
        assert "project name is refused" in result.failed.get("under-test", ""), result
        assert plan["calls"].count("write") == 2 and plan["calls"].count("open") == 1, plan
        failures = [p for p in result.problems if p.kind == "failed"]
        assert [(p.backend, p.count) for p in failures] == [("under-test", 1)], failures
        assert "project name is refused" in failures[0].message
        assert 0 < result.acked["under-test"] < result.target
        self.deliver(tmp_path, run, batch_size=8)
        self.assert_metrics(self.read_back(tmp_path), run)

    def test_invalid_options_refused_before_any_io(self, tmp_path: Path) -> None:
        if self.invalid_options is None:
            return
        import pytest

        cls = type(self.make_backend(tmp_path))
        before = sorted(tmp_path.rglob("*"))
        with pytest.raises((ValueError, TypeError, PermanentBackendError)):
            cls(self.invalid_options)
        assert sorted(tmp_path.rglob("*")) == before, "the constructor wrote files"

    def test_nothing_written_outside_tmp_path(self, tmp_path: Path,
                                              tmp_path_factory: pytest.TempPathFactory,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
        """Every kind, delivered from an empty working directory with an empty HOME:
        both stay empty (storage goes where ``make_backend`` said)."""
        outside = tmp_path_factory.mktemp("outside")
        (outside / "cwd").mkdir()
        (outside / "home").mkdir()
        monkeypatch.chdir(outside / "cwd")
        monkeypatch.setenv("HOME", str(outside / "home"))
        run = sample_run(tmp_path, steps=TABLE_STEP + 1, extended=True)
        self.deliver(tmp_path, run)
        leftovers = sorted(str(p.relative_to(outside)) for p in outside.rglob("*")
                           if p.is_file())
        assert not leftovers, f"written outside {tmp_path}: {leftovers[:20]}"

    def test_late_events_at_a_lower_step(self, tmp_path: Path) -> None:
        """Provenance (step 0) and a doctor finding (onset step 7) arrive after step 19 was
        delivered: each lands at its own step, and so do the steps after them. A finding
        reaches a backend without "finding" as text ``doctor/<rule>`` (or, without text, a
        metric: 1 warning, 2 critical); provenance reaches a config backend without
        "provenance" as the config's ``_provenance``."""
        run, finding = late_run(tmp_path)
        capabilities = self.make_backend(tmp_path).capabilities
        self.deliver(tmp_path, run)
        readback = self.read_back(tmp_path)
        self.assert_metrics(readback, run)
        if "time" in self.kinds:
            name = self.expected_key("reward/mean")
            got = dict(readback.times.get(name, []))
            for step in range(LATE_BEFORE, LATE_BEFORE + LATE_AFTER):
                assert step in got and abs(got[step] - metric_time(step)) < 1e-3, (
                    f"{name}@{step} after the late events: time {got.get(step)}")
        key = self.expected_key(finding.key)
        if "finding" not in capabilities and "text" in capabilities and "text" in self.kinds:
            texts = readback.texts.get(key)
            assert texts, f"the finding's text {key!r} missing; got {sorted(readback.texts)}"
            assert [s for s, _ in texts] == [FINDING_STEP], (
                f"the finding came after step {LATE_BEFORE - 1} but belongs at its onset "
                f"step {FINDING_STEP}: {texts}")
            assert FINDING_RULE in texts[0][1], texts
        elif "finding" not in capabilities and "text" not in capabilities:
            assert sorted(readback.metrics.get(key, [])) == [(FINDING_STEP, 1.0)], (
                f"the finding as metric {key!r} at step {FINDING_STEP}: "
                f"{readback.metrics.get(key)}")
        if ("config" in self.kinds and "config" in capabilities
                and "provenance" not in capabilities):
            config = readback.config
            assert config, "config was not stored"
            leaves = _config_leaves(config)
            assert any("_provenance" in path for path in leaves), (
                f"provenance is not in the config under _provenance; got {sorted(leaves)[:20]}")
            assert any(path[-2:] == ("trainer", "total_epochs") and _same_value(v, 3)
                       for path, v in leaves.items()), "the run's config was lost"

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
    from trackmux.core.delivery.fallbacks import histogram_metrics

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
