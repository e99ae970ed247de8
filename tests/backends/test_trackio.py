"""The trackio backend passes the conformance suite, read back from trackio's SQLite store.

trackio reads ``TRACKIO_DIR`` once per process, so the whole module shares one directory
(tox sets it; otherwise a session temp dir set before trackio is imported) and each test
gets its own trackio project, named after its tmp_path. Rows are read back with trackio's
own ``SQLiteStorage`` readers and, where exact duplicates matter, straight from the file.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if not os.environ.get("TRACKIO_DIR"):
    os.environ["TRACKIO_DIR"] = tempfile.mkdtemp(prefix="trackio-tests-")
pytest.importorskip("trackio")

from PIL import Image

import trackmux
from trackmux.core.backends.contract import ResumeState, RunInfo
from trackmux.core.events import ConfigEvent, ImageEvent, MetricsEvent, TableEvent
from trackmux.core.values.normalize import flatten
from trackmux.plugins.trackio import TrackioBackend, trackio_key
from trackmux.testing import BackendConformance, Readback

TRACKIO_DIR = Path(os.environ["TRACKIO_DIR"]).absolute()
SECRET = "sk-E2E-TRACKIO-SECRET-41c2"


def project_of(tmp_path: Path) -> str:
    return "tm-" + tmp_path.name.replace(".", "-")


def db_rows(project: str) -> list[dict[str, Any]]:
    """Every metrics row of ``project`` as stored (duplicates kept), oldest first."""
    from trackio.sqlite_storage import SQLiteStorage

    path = SQLiteStorage.get_project_db_path(project)
    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(
            "SELECT run_id, run_name, step, timestamp, metrics, log_id FROM metrics ORDER BY id")]


def read_trackio(project: str) -> Readback:
    """What trackio's store holds for ``project`` (all runs), in trackmux terms."""
    from trackio.sqlite_storage import SQLiteStorage
    from trackio.utils import MEDIA_DIR

    out = Readback()
    runs = {r["run_name"] for r in db_rows(project)}
    for name in sorted(runs):
        for row in SQLiteStorage.get_logs(project, name):
            step = row["step"]
            for key, value in row.items():
                if key in ("step", "timestamp"):
                    continue
                kind = value.get("_type") if isinstance(value, dict) else None
                if kind == "trackio.table":
                    cells = value["_value"]
                    out.tables.setdefault(key, []).append(
                        (step, [list(c.values()) for c in cells]))
                elif kind == "trackio.image":
                    with Image.open(MEDIA_DIR / value["file_path"]) as image:
                        out.images.setdefault(key, []).append((step, image.width, image.height))
                elif kind == "trackio.markdown":
                    out.texts.setdefault(key, []).append((step, value["_value"]))
                elif isinstance(value, (int, float)):
                    out.metrics.setdefault(key, []).append((step, float(value)))
        config = SQLiteStorage.get_run_config(project, name)
        if config:
            out.config = flatten(config)
    return out


class TestTrackioBackend(BackendConformance):
    kinds = frozenset({"metrics", "config", "table", "image", "text"})
    nonfinite = "kept"

    def make_backend(self, tmp_path: Path) -> TrackioBackend:
        return TrackioBackend({"dir": str(TRACKIO_DIR), "project": project_of(tmp_path)})

    def read_back(self, tmp_path: Path) -> Readback:
        return read_trackio(project_of(tmp_path))

    def expected_key(self, key: str) -> str:
        return trackio_key(key)

    # -- trackio's own checks ------------------------------------------------------------
    def test_one_row_per_event_and_original_time(self, tmp_path: Path) -> None:
        """Also after the lost-ack redelivery: the store holds each event once (trackio's
        log ids), at the event's own step and wall time, all under one trackio run id."""
        from trackmux.core.spool.reader import SpoolReader
        from trackmux.testing.conformance import sample_run

        run = sample_run(tmp_path, steps=30)
        self.deliver(tmp_path, run, batch_size=7)
        reader = SpoolReader(run.run_dir)
        cursor = reader.cursor("under-test")
        reader.ack("under-test", 5, cursor.remote_id, {"seq": 5})  # lose most acks
        reader.close()
        self.deliver(tmp_path, run, batch_size=7)
        rows = db_rows(project_of(tmp_path))
        assert len(rows) == 31  # config + 30 metrics events
        assert len({r["log_id"] for r in rows}) == 31
        assert {r["run_id"] for r in rows} == {cursor.remote_id}
        metric_rows = [r for r in rows if "reward/mean" in json.loads(r["metrics"])]
        assert [r["step"] for r in metric_rows] == list(range(30))
        from datetime import datetime, timezone

        from trackmux.testing.conformance import metric_time

        stamped = datetime.fromisoformat(metric_rows[4]["timestamp"])
        assert stamped == datetime.fromtimestamp(metric_time(4), timezone.utc)  # its own time

    def test_text_and_caption(self, tmp_path: Path) -> None:
        from trackmux.testing.conformance import TABLE_STEP, sample_run

        run = sample_run(tmp_path, steps=TABLE_STEP + 1)
        self.deliver(tmp_path, run)
        readback = self.read_back(tmp_path)
        assert readback.texts["notes/sample"] == [(TABLE_STEP, "**bold** note")]
        rows = [json.loads(r["metrics"]) for r in db_rows(project_of(tmp_path))]
        images = [r["kl/heatmap_hwc"] for r in rows if "kl/heatmap_hwc" in r]
        assert images[0]["caption"] == "KL per token"


def _info(project: str, tmp_path: Path) -> RunInfo:
    return RunInfo(project, "run-a", "r1", tmp_path / "spool", 1_700_000_000.0)


def test_public_api_run_read_back(tmp_path: Path) -> None:
    """A run through trackmux.init: metrics, a mixed-type table, an image, config with a
    secret; everything comes back from trackio's store, the secret nowhere in it."""
    project = project_of(tmp_path)
    run = trackmux.init(project=project, name="trackio-e2e", backends=["trackio"],
                        config={"trainer": {"api_key": SECRET, "epochs": 2},
                                "actor": {"optim": {"lr": 3e-4}}},
                        dir=tmp_path / "spool")
    for step in range(20):
        run.log({"loss": 1.0 / (step + 1), "step": float(step)}, step=step)
    rows = [["q0", 1, None], [2.5, "a1", True], [None, None, -3]]
    run.log_table("val/generations", ["input", "output", "score"], rows, step=19)
    run.log_image("img/hwc", np.zeros((12, 20, 3), dtype=np.uint8), step=19, caption="hwc")
    summary = run.finish(timeout=120)
    assert summary.complete, summary

    readback = read_trackio(project)
    assert sorted(readback.metrics["loss"]) == [(s, 1.0 / (s + 1)) for s in range(20)]
    assert sorted(readback.metrics["__step"])[3] == (3, 3.0)  # trackio's reserved-key rename
    # core turns a column mixing text and numbers into text; None and bool stay as they are
    shown = [["q0", "1", None], ["2.5", "a1", True], [None, None, -3]]
    assert readback.tables["val/generations"] == [(19, shown)]
    assert readback.images["img/hwc"] == [(19, 20, 12)]
    assert readback.config is not None
    assert readback.config["actor.optim.lr"] == 3e-4
    assert readback.config["_Created"].startswith("20")
    db = TRACKIO_DIR / f"{project}.db"
    assert db.exists()
    assert SECRET.encode() not in db.read_bytes()


def test_config_only_batch_and_redelivered_image_saved_once(tmp_path: Path) -> None:
    """A redelivered image is found in the store before it is saved again: one file."""
    from trackio.utils import MEDIA_DIR

    from trackmux.core.values.media import encode_image

    project = project_of(tmp_path)
    encoded = encode_image(np.zeros((4, 6, 3), dtype=np.uint8))
    batch = [ConfigEvent({"a": 1}, 0, 1.0, seq=1),
             ImageEvent("img", encoded.png, 6, 4, encoded.mode, 2, 2.0, seq=2),
             TableEvent("t", ("x", "y"), (("s", None),), 2, 2.0, seq=3)]
    first = TrackioBackend({"project": project})
    first.open(_info(project, tmp_path), ResumeState())
    first.write(batch[:1])
    first.write(batch[1:])
    remote = first.remote_id
    first.close("crashed")
    again = TrackioBackend({"project": project})
    again.open(_info(project, tmp_path), ResumeState(remote, {}, 0))  # nothing acked
    again.write(batch)
    again.write([MetricsEvent({"m": 1.0}, 3, 3.0, seq=4)])
    again.close("finished")
    assert len(db_rows(project)) == 4
    files = list((MEDIA_DIR / project).rglob("*.png"))
    assert len(files) == 1, files
    readback = read_trackio(project)
    assert readback.tables["t"] == [(2, [["s", None]])]
    assert readback.metrics["m"] == [(3, 1.0)]


def test_samples_are_a_table_row_at_each_step(tmp_path: Path) -> None:
    """log_samples on trackio (issue 23): core's fallback table of the chosen samples (the
    best whole groups, capped at sample_rows) is a ``trackio.table`` in a row of its own at
    each step of trackio's store: every step's table is kept (history), with core's
    columns, each once."""
    from samples_support import OPTIONS, STEPS, check_columns, check_rows, samples_spool

    from trackmux.core.delivery.sync import deliver

    project = project_of(tmp_path)
    result = deliver(samples_spool(tmp_path), {"trackio": lambda: TrackioBackend(
        {"dir": str(TRACKIO_DIR), "project": project, **OPTIONS})}, timeout=120)
    assert result.complete, result.problems
    tables = read_trackio(project).tables["rollout/samples"]
    assert [step for step, _ in tables] == list(STEPS)
    for step, rows in tables:
        check_rows(step, rows)
    stored = [json.loads(r["metrics"]) for r in db_rows(project)]
    headers = [list(cells[0]) for cells in (m["rollout/samples"]["_value"] for m in stored
                                           if "rollout/samples" in m)]
    assert len(headers) == len(STEPS)
    for columns in headers:
        check_columns(columns)


def test_dir_conflict_after_import_is_named(tmp_path: Path) -> None:
    backend = TrackioBackend({"dir": str(tmp_path / "elsewhere")})
    with pytest.raises(ValueError, match=r"dir=.*TRACKIO_DIR"):
        backend.open(_info("p", tmp_path), ResumeState())


def test_dir_option_applies_before_trackio_is_imported(tmp_path: Path) -> None:
    """In a fresh process the dir option decides where trackio writes, and TRACKIO_DIR is
    left as it was afterwards."""
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from trackmux.core.backends.contract import ResumeState, RunInfo\n"
        "from trackmux.core.events import MetricsEvent\n"
        "from trackmux.plugins.trackio import TrackioBackend\n"
        "assert 'trackio' not in sys.modules\n"
        f"b = TrackioBackend({{'dir': {str(tmp_path / 'chosen')!r}, 'project': 'p1'}})\n"
        f"b.open(RunInfo('x', 'n', 'r', Path({str(tmp_path)!r}), 0.0), ResumeState())\n"
        "b.write([MetricsEvent({'m': 2.0}, 7, 0.0, seq=1)])\n"
        "b.close('finished')\n"
        "print(os.environ.get('TRACKIO_DIR', 'unset'))\n")
    env = {k: v for k, v in os.environ.items() if k != "TRACKIO_DIR"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "unset"
    with sqlite3.connect(tmp_path / "chosen" / "p1.db") as conn:
        (step, metrics), = conn.execute("SELECT step, metrics FROM metrics").fetchall()
    assert step == 7 and math.isclose(json.loads(metrics)["m"], 2.0)


def test_bad_options_are_named() -> None:
    with pytest.raises(ValueError, match="unknown trackio option"):
        TrackioBackend({"space_id": "x"})
    with pytest.raises(TypeError, match="project"):
        TrackioBackend({"project": 3})
    with pytest.raises(TypeError, match="dir"):
        TrackioBackend({"dir": 3})


def test_plugin_registered_without_importing_trackio() -> None:
    code = ("import sys, trackmux.plugins.trackio as m; "
            "from trackmux.core.backends.registry import get_registry; "
            "assert 'trackio' in get_registry().backends; "
            "assert 'trackio' not in sys.modules, 'imported at module import'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_provenance_in_the_run_config(tmp_path: Path) -> None:
    """Issue 25: core's fallback, config under ``_provenance``, in trackio's own store."""
    from trackmux.core.delivery.sync import deliver
    from trackmux.testing.provenance import COMMIT, provenance_spool

    project = project_of(tmp_path)
    result = deliver(provenance_spool(tmp_path), {"trackio": lambda: TrackioBackend(
        {"dir": str(TRACKIO_DIR), "project": project})}, timeout=60)
    assert result.complete, result.problems
    config = read_trackio(project).config
    assert config is not None and config["lr"] == 0.1
    assert config["_provenance.git.commit"] == COMMIT


def test_a_finding_of_the_doctor_is_a_trackio_alert(tmp_path: Path) -> None:
    """issue 22: read back with trackio's own ``get_alerts``; a redelivery adds none."""
    from trackio.sqlite_storage import SQLiteStorage

    from trackmux.core.events import FindingEvent

    project = project_of(tmp_path)
    backend = TrackioBackend({"dir": str(TRACKIO_DIR), "project": project})
    backend.open(_info(project, tmp_path), ResumeState())
    finding = FindingEvent("reward_collapse", "critical", ("critic/score/mean",),
                           "critic/score/mean fell 61% <!here>", 120, 1_700_000_100.0,
                           seq=1)
    backend.write([finding])
    again = TrackioBackend({"dir": str(TRACKIO_DIR), "project": project})
    again.open(_info(project, tmp_path), ResumeState(remote_id=backend.remote_id))
    again.write([finding])  # a batch delivered again after a lost acknowledgement
    alerts = SQLiteStorage.get_alerts(project)
    assert [(a["title"], a["text"], a["level"], a["step"]) for a in alerts] == [
        ("trackmux doctor: reward_collapse at step 120",
         "critic/score/mean fell 61% &lt;!here&gt;", "error", 120)]  # Slack's escaping


def test_an_alert_title_escapes_a_rule_named_by_a_plugin(tmp_path: Path) -> None:
    """The title is forwarded to Slack too; a rule name is a plugin's or a user's word."""
    from trackio.sqlite_storage import SQLiteStorage

    from trackmux.core.events import FindingEvent

    project = project_of(tmp_path)
    backend = TrackioBackend({"dir": str(TRACKIO_DIR), "project": project})
    backend.open(_info(project, tmp_path), ResumeState())
    backend.write([FindingEvent("mine<!channel>", "warning", ("loss",), "loss & more", 3,
                                1_700_000_100.0, seq=1)])
    [alert] = SQLiteStorage.get_alerts(project)
    assert (alert["title"], alert["text"]) == (
        "trackmux doctor: mine&lt;!channel&gt; at step 3", "loss &amp; more")


def test_trajectories_are_trackio_traces_at_each_step(tmp_path: Path) -> None:
    """Conversations on trackio (issue 37): its own traces (``trackio.Trace``), the chosen
    samples' messages exactly as logged, the summary in each trace's metadata, read back
    with trackio's own trace reader."""
    from trackio.sqlite_storage import SQLiteStorage
    from trajectory_support import BEST, KEY, OPTIONS, STEPS, messages, trajectory_spool

    from trackmux.core.delivery.sync import deliver

    project = project_of(tmp_path)
    result = deliver(trajectory_spool(tmp_path), {"trackio": lambda: TrackioBackend(
        {"dir": str(TRACKIO_DIR), "project": project, **OPTIONS})}, timeout=120)
    assert result.complete, result.problems
    traces = SQLiteStorage.get_traces(project, run="agent")
    found = sorted((t["step"], t["metadata"]["sample"], t) for t in traces
                   if t["key"] == trackio_key(KEY))
    assert [(s, i) for s, i, _ in found] == [(s, i) for s in STEPS for i in BEST]
    for step, i, trace in found:
        assert trace["messages"] == messages(step, i)
        meta = trace["metadata"]
        assert (meta["turns"], meta["tool_errors"], meta["tools"]) == (2, i % 2, ["search"])
        assert meta["status"] == ("error" if i % 2 else "ok") and meta["reward"] == i
