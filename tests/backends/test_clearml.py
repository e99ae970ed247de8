"""The clearml backend passes the conformance suite, read back from ClearML offline sessions.

Every test runs ClearML in offline mode with its cache dir inside the test's tmp_path, and
tox points ClearML's server addresses at a closed local port, so nothing can reach a
server. Sessions are read from their own files: ``metrics.jsonl`` (scalars, tables as
plotly tables, image records), the image files, ``log.jsonl`` and ``task.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("clearml")

import trackmux
from trackmux.core.backends.contract import ResumeState, RunInfo
from trackmux.core.events import ConfigEvent, MetricsEvent, TableEvent, TextEvent
from trackmux.core.values.normalize import flatten
from trackmux.plugins.clearml import MARK, ClearMLBackend, key_of, session_events, title_series
from trackmux.testing import BackendConformance, Readback

SECRET = "sk-E2E-CLEARML-SECRET-5d0e"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLEARML_OFFLINE_MODE", "1")


def sessions(root: Path) -> list[Path]:
    return sorted(p for p in (root / "offline").glob("*") if p.is_dir())


def read_session(folder: Path) -> tuple[Readback, dict[str, Any]]:
    """One offline session in trackmux terms (duplicates kept), plus {"task": task.json,
    "log": console lines, "marks": seq marks, "columns": {table key: [each header]}}."""
    from clearml.utilities.pyhocon import ConfigFactory

    out = Readback()
    extra: dict[str, Any] = {"marks": [], "log": [], "columns": {}}
    for event in session_events(folder):
        key = key_of(event.get("metric", ""), event.get("variant", ""))
        step = int(event.get("iter") or 0)
        if event["type"] == "training_stats_scalar":
            if (event["metric"], event["variant"]) == MARK:
                extra["marks"].append(int(event["value"]))
            else:
                out.metrics.setdefault(key, []).append((step, float(event["value"])))
        elif event["type"] == "plot":
            table = json.loads(event["plot_str"])["data"][0]
            columns = table["cells"]["values"]
            rows = [list(r) for r in zip(*columns, strict=True)]
            assert table["header"]["values"]
            out.tables.setdefault(key, []).append((step, rows))
            extra["columns"].setdefault(key, []).append(table["header"]["values"])
        elif event["type"] == "training_debug_image":
            with Image.open(event["url"]) as image:
                out.images.setdefault(key, []).append((step, image.width, image.height))
    log = folder / "log.jsonl"
    if log.exists():
        for line in log.read_text(encoding="utf-8").splitlines():
            extra["log"].extend(e["msg"] for e in json.loads(line))
    task = json.loads((folder / "task.json").read_text(encoding="utf-8"))
    extra["task"] = task
    hyper = (task.get("configuration") or {}).get("Hyperparameters")
    if hyper:
        out.config = flatten(dict(ConfigFactory.parse_string(hyper["value"])))
    return out, extra


def read_all(root: Path) -> Readback:
    (folder,) = sessions(root)  # one task, continued in place
    return read_session(folder)[0]


class TestClearMLBackend(BackendConformance):
    kinds = frozenset({"metrics", "config", "table", "image"})
    nonfinite = "any"  # ClearML reports NaN and inf as 0.0 (its default_nan_value)

    def make_backend(self, tmp_path: Path) -> ClearMLBackend:
        return ClearMLBackend({"dir": str(tmp_path / "clearml"), "offline": True})

    def read_back(self, tmp_path: Path) -> Readback:
        return read_all(tmp_path / "clearml")


def _info(tmp_path: Path) -> RunInfo:
    return RunInfo("proj", "name", "r1", tmp_path / "spool", 0.0)


def test_public_api_run_read_back(tmp_path: Path) -> None:
    """A run through trackmux.init: scalars at their steps, a table mixing text, numbers
    and None, an image, text in the console log, config without the secret."""
    root = tmp_path / "clearml"
    run = trackmux.init(project="e2e", name="clearml-e2e", backends=["clearml"],
                        config={"trainer": {"api_key": SECRET, "epochs": 2},
                                "actor": {"optim": {"lr": 3e-4}}},
                        dir=tmp_path / "spool",
                        backend_options={"clearml": {"dir": str(root)}})
    for step in range(0, 40, 2):
        run.log({"loss": 1.0 / (step + 1), "acc": step / 100}, step=step)
    rows = [["q0", "1", None], ["2.5", None, True], [None, "a2", -3]]
    run.log_table("val/generations", ["input", "output", "score"], rows, step=38)
    run.log_image("img/hwc", np.zeros((12, 20, 3), dtype=np.uint8), step=38)
    run.log_text("notes/run", "hello clearml", step=38)
    summary = run.finish(timeout=180)
    assert summary.complete, summary

    (folder,) = sessions(root)
    readback, extra = read_session(folder)
    assert readback.metrics["loss"] == [(s, 1.0 / (s + 1)) for s in range(0, 40, 2)]
    assert readback.tables["val/generations"] == [(38, rows)]
    assert readback.images["img/hwc"] == [(38, 20, 12)]
    assert any("notes/run @ step 38: hello clearml" in line for line in extra["log"])
    assert readback.config is not None
    assert readback.config["actor.optim.lr"] == 3e-4
    assert extra["task"]["name"] == "clearml-e2e"
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_resume_continues_the_same_task_at_the_logged_steps(tmp_path: Path) -> None:
    root = tmp_path / "clearml"
    first = ClearMLBackend({"dir": str(root), "offline": True})
    first.open(_info(tmp_path), ResumeState())
    first.write([ConfigEvent({"lr": 0.1}, 0, 0.0, seq=1)]
                + [MetricsEvent({"m/x": float(s)}, s, 0.0, seq=s + 2) for s in range(5)])
    first.flush()
    # core acknowledges after flush: by then the reports are in the session file
    assert first.session is not None
    assert [e["value"] for e in session_events(first.session)
            if (e["metric"], e["variant"]) == MARK] == [1, 2, 3, 4, 5, 6]
    remote, state = first.remote_id, first.state()
    first.close("finished")
    assert remote is not None and remote.startswith("offline-")

    second = ClearMLBackend({"dir": str(root), "offline": True})
    second.open(_info(tmp_path), ResumeState(remote, state, 6))
    second.write([MetricsEvent({"m/x": float(s)}, s, 0.0, seq=s + 2) for s in range(5, 9)])
    assert second.remote_id == remote
    second.close("finished")
    readback = read_all(root)
    assert readback.metrics["m/x"] == [(s, float(s)) for s in range(9)]


def test_redelivery_of_a_batch_cut_by_a_crash(tmp_path: Path) -> None:
    """Events fully written are skipped; of the event a crash cut in half, only the missing
    reports are added; the state handed back is older than what was written (lost ack)."""
    root = tmp_path / "clearml"
    batch = [MetricsEvent({"a/x": 1.0, "a/y": 2.0}, 3, 0.0, seq=1),
             TableEvent("t/rows", ("s", "n"), (("z", None),), 3, 0.0, seq=2),
             TextEvent("t/note", "once", 3, 0.0, seq=3),
             MetricsEvent({"b/x": 3.0, "b/y": 4.0}, 4, 0.0, seq=4)]
    first = ClearMLBackend({"dir": str(root), "offline": True})
    first.open(_info(tmp_path), ResumeState())
    first.write(batch[:3])
    first._task.get_logger().report_scalar("b", "x", value=3.0, iteration=4)  # half of seq 4
    first.flush()
    remote = first.remote_id
    first.close("crashed")

    again = ClearMLBackend({"dir": str(root), "offline": True})
    again.open(_info(tmp_path), ResumeState(remote, {"seq": 0}, 0))
    again.write(batch)
    again.write([MetricsEvent({"a/x": 5.0}, 5, 0.0, seq=5)])
    again.close("finished")
    readback, extra = read_session(sessions(root)[0])
    assert readback.metrics == {"a/x": [(3, 1.0), (5, 5.0)], "a/y": [(3, 2.0)],
                                "b/x": [(4, 3.0)], "b/y": [(4, 4.0)]}
    assert readback.tables == {"t/rows": [(3, [["z", None]])]}
    assert sum("t/note @ step 3: once" in line for line in extra["log"]) == 1
    assert extra["marks"] == [1, 2, 3, 4, 5]


def test_samples_are_a_table_plot_at_each_step(tmp_path: Path) -> None:
    """log_samples on clearml (issue 23): core's fallback table of the chosen samples (the
    best whole groups, capped at sample_rows) is a ``report_table`` plot at each iteration,
    read back from the offline session's ``metrics.jsonl``: every step's table is kept
    (history), with core's columns as its header."""
    from samples_support import OPTIONS, STEPS, check_columns, check_rows, samples_spool

    from trackmux.core.delivery.sync import deliver

    root = tmp_path / "clearml"
    result = deliver(samples_spool(tmp_path), {"clearml": lambda: ClearMLBackend(
        {"dir": str(root), "offline": True, **OPTIONS})}, timeout=180)
    assert result.complete, result.problems
    (folder,) = sessions(root)
    readback, extra = read_session(folder)
    tables = readback.tables["rollout/samples"]
    assert [step for step, _ in tables] == list(STEPS)
    for step, rows in tables:
        check_rows(step, rows)
    assert len(extra["columns"]["rollout/samples"]) == len(STEPS)
    for columns in extra["columns"]["rollout/samples"]:
        check_columns(columns)


def test_keys_split_as_verl_splits_them() -> None:
    assert title_series("reward/mean") == ("reward", "mean")
    assert title_series("val-core/acc/mean@5") == ("val-core", "acc/mean@5")
    assert title_series("loss") == ("loss", "loss")
    assert key_of(*title_series("val-core/acc/mean@5")) == "val-core/acc/mean@5"
    assert key_of(*title_series("loss")) == "loss"


def test_offline_comes_from_env_or_option(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ClearMLBackend().offline
    monkeypatch.setenv("CLEARML_OFFLINE_MODE", "0")
    assert not ClearMLBackend().offline
    assert ClearMLBackend({"offline": True}).offline


def test_bad_options_are_named() -> None:
    with pytest.raises(ValueError, match="unknown clearml option"):
        ClearMLBackend({"offline_mode": True})
    with pytest.raises(TypeError, match="offline"):
        ClearMLBackend({"offline": "yes"})
    with pytest.raises(TypeError, match="project"):
        ClearMLBackend({"project": 1})


def test_plugin_registered_without_importing_clearml() -> None:
    import subprocess
    import sys

    code = ("import sys, trackmux.plugins.clearml as m; "
            "from trackmux.core.backends.registry import get_registry; "
            "assert 'clearml' in get_registry().backends; "
            "assert 'clearml' not in sys.modules, 'imported at module import'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_provenance_in_the_task_configuration(tmp_path: Path) -> None:
    """Issue 25: core's fallback, config under ``_provenance``, in the offline session."""
    from trackmux.core.delivery.sync import deliver
    from trackmux.testing.provenance import COMMIT, provenance_spool

    result = deliver(provenance_spool(tmp_path), {"clearml": lambda: ClearMLBackend(
        {"dir": str(tmp_path / "clearml"), "offline": True})}, timeout=120)
    assert result.complete, result.problems
    config = read_all(tmp_path / "clearml").config
    assert config is not None and config["lr"] == 0.1
    assert config["_provenance.git.commit"] == COMMIT
def test_distinct_keys_stay_distinct_across_resume(tmp_path: Path) -> None:
    """``loss`` and ``loss/loss`` are one (title, series) as verl splits keys, and
    ``trackmux/seq`` is the backend's own mark: each key keeps its own series, the same
    ones after a resume that sends the keys in the reverse order."""
    keys = ["loss/loss", "loss", "trackmux/seq", "reward/mean"]
    value = {key: 1000.0 * i for i, key in enumerate(keys)}
    root = tmp_path / "clearml"
    first = ClearMLBackend({"dir": str(root), "offline": True})
    first.open(_info(tmp_path), ResumeState())
    first.write([MetricsEvent({k: value[k] + s for k in keys}, s, 0.0, seq=s + 1)
                 for s in range(2)])
    first.flush()
    remote, state = first.remote_id, first.state()
    first.close("finished")
    second = ClearMLBackend({"dir": str(root), "offline": True})
    second.open(_info(tmp_path), ResumeState(remote, state, 2))
    second.write([MetricsEvent({k: value[k] + s for k in reversed(keys)}, s, 0.0, seq=s + 1)
                  for s in range(2, 4)])
    second.close("finished")
    readback, extra = read_session(sessions(root)[0])
    owners: dict[str, str] = {}
    for name, points in readback.metrics.items():
        (key,) = {keys[int(v) // 1000] for _, v in points}
        assert key not in owners
        owners[key] = name
        assert sorted(s for s, _ in points) == [0, 1, 2, 3]
    assert set(owners) == set(keys)
    assert owners["loss"] == "loss" and owners["reward/mean"] == "reward/mean"
    assert extra["marks"] == [1, 2, 3, 4]
