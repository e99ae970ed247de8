"""Plugin contract v1: retry by reopening, permanent failures, quarantine, merged config,
options checked at init(), notes apart from problems; through real runs, spools and CLI."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import trackmux
from trackmux.cli.main import cli
from trackmux.core.backends.registry import BackendSpec, get_registry
from trackmux.core.spool.reader import SpoolReader

CALLS: list[str] = []
RECEIVED: list[trackmux.Event] = []


class PoisonBackend(trackmux.Backend):
    """Fails deterministically on metrics with key "poison" (AttributeError, as the dvclive
    plugin did); with option ``permanent`` its open() refuses the project for good."""

    capabilities = frozenset({"metrics", "config"})

    def open(self, run: trackmux.RunInfo, resume: trackmux.ResumeState) -> None:
        CALLS.append("open")
        if self.options.get("permanent"):
            raise trackmux.PermanentBackendError(f"project {run.project!r} is refused")
        self.seen = resume.acked_seq

    def write(self, events: Sequence[trackmux.Event]) -> None:
        CALLS.append("write")
        for event in events:
            if isinstance(event, trackmux.MetricsEvent) and "poison" in event.data:
                value: Any = 5
                value.copy()  # AttributeError: 'int' object has no attribute 'copy'
        RECEIVED.extend(e for e in events if e.seq > self.seen)
        self.seen = max([self.seen, *(e.seq for e in events)])

    def close(self, status: str) -> None:
        CALLS.append(f"close:{status}")


@trackmux.hookimpl
def trackmux_register_backends(register: Any) -> None:
    register("poison", PoisonBackend)


@pytest.fixture
def poison() -> Iterator[None]:
    if "poison" not in get_registry().backends:
        trackmux.register_plugin(types.SimpleNamespace(
            trackmux_register_backends=trackmux_register_backends), "poison-plugin")
    CALLS.clear()
    RECEIVED.clear()
    yield


def test_deterministic_failure_of_one_event_is_quarantined_and_later_events_flow(
        poison: None, tmp_path: Path) -> None:
    run = trackmux.init(project="q", backends=["poison"], dir=tmp_path)
    for step in range(30):
        run.log({"x": step, **({"poison": 1} if step == 7 else {})}, step=step)
    summary = run.finish(timeout=60)
    assert summary.complete, summary
    assert summary.quarantined == {"poison": 1}
    steps = [e.step for e in RECEIVED if isinstance(e, trackmux.MetricsEvent)]
    assert steps == [s for s in range(30) if s != 7]
    rejected = [p for p in summary.problems if p.kind == "rejected"]
    assert rejected and "AttributeError" in rejected[0].message, summary.problems
    reader = SpoolReader(run.dir)
    entries = reader.quarantined()
    reader.close()
    assert [(q.backend, q.kind) for q in entries] == [("poison", "metrics")]
    assert "'int' object has no attribute 'copy'" in entries[0].reason
    shown = CliRunner().invoke(cli, ["show", str(run.dir)])
    assert "poison: delivered, 1 quarantined" in shown.output, shown.output
    assert f"event {entries[0].seq} (metrics)" in shown.output
    listed = CliRunner().invoke(cli, ["runs", str(tmp_path)])
    assert "1 quarantined" in listed.output, listed.output
    again = CliRunner().invoke(cli, ["sync", str(run.dir)])  # a later sync is not wedged
    assert again.exit_code == 0, again.output
    assert "nothing to do" in again.output


def test_every_failed_write_is_followed_by_close_and_a_new_open(poison: None,
                                                                 tmp_path: Path) -> None:
    run = trackmux.init(project="q", backends=["poison"], dir=tmp_path)
    run.log({"poison": 1}, step=0)
    run.finish(timeout=60)
    writes = [i for i, c in enumerate(CALLS) if c == "write"]
    for i in writes[:-1]:
        assert CALLS[i + 1:i + 3] == ["close:retrying", "open"], CALLS


def test_permanent_failure_is_reported_once_not_retried_and_sync_exits_nonzero(
        poison: None, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="trackmux")
    run = trackmux.init(project="team/qwen2:grpo", backends=["poison", "file"], dir=tmp_path,
                        backend_options={"poison": {"permanent": True},
                                         "file": {"root": str(tmp_path / "files")}})
    for step in range(10):
        run.log({"x": step}, step=step)
    summary = run.finish(timeout=60)
    assert CALLS == ["open"], CALLS  # not retried, not closed twice
    assert "is refused" in summary.failed["poison"]
    assert summary.pending == {"poison": summary.events}  # kept in the spool
    assert "file" not in summary.pending
    failures = [r.getMessage() for r in caplog.records if "failed permanently" in r.getMessage()]
    assert len(failures) == 1 and "'poison'" in failures[0] and "is refused" in failures[0]
    result = CliRunner().invoke(
        cli, ["sync", str(run.dir), "--to", "poison", "-o", "poison.permanent=true"])
    assert result.exit_code == 1, result.output
    assert "FAILED, not retried" in result.stdout and "is refused" in result.stdout


def test_bad_options_fail_at_init_before_any_io(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"backend_options\['file'\].*bogus"):
        trackmux.init(project="p", backends=["file"], dir=tmp_path,
                      backend_options={"file": {"bogus": 1}})
    with pytest.raises(ValueError, match=r"backend_options\['console'\].*stream"):
        trackmux.init(project="p", backends=["console"], dir=tmp_path,
                      backend_options={"console": {"stream": "nowhere"}})
    assert not list(tmp_path.iterdir())


def test_config_events_merge_nested_in_backend_show_and_report(tmp_path: Path) -> None:
    files = tmp_path / "files"
    run = trackmux.init(project="cfg", name="merge", backends=["file"], dir=tmp_path / "s",
                        config={"a": 1, "b": {"c": 2}},
                        backend_options={"file": {"root": str(files)}})
    run.log({"x": 1.0}, step=0)
    run.log_config({"b": {"d": 3}})
    run.finish(timeout=60)
    want = {"a": 1, "b": {"c": 2, "d": 3}}
    assert orjson.loads((files / "cfg" / "merge.config.json").read_bytes()) == want
    shown = CliRunner().invoke(cli, ["show", str(run.dir)])
    assert '"c": 2' in shown.output and '"d": 3' in shown.output, shown.output
    from trackmux.report.load import load_run

    assert load_run(run.dir).config == want
    # a backend that joins later (sync) gets the same merged config
    other = trackmux.init(project="cfg", name="late", backends=["console"], dir=tmp_path / "s",
                          config={"a": 1, "b": {"c": 2}})
    other.log_config({"b": {"d": 3}})
    other.finish(timeout=60)
    later = tmp_path / "later"
    result = CliRunner().invoke(cli, ["sync", str(other.dir), "--to", "file", "-o",
                                      f"file.root={later}"])
    assert result.exit_code == 0, result.output
    assert "delivered 2 events" in result.output
    assert orjson.loads((later / "cfg" / "late.config.json").read_bytes()) == want


def test_a_kind_a_backend_cannot_show_is_a_note_not_a_problem(tmp_path: Path) -> None:
    import numpy as np

    run = trackmux.init(project="n", backends=["console"], dir=tmp_path)
    run.log({"x": 1.0}, step=0)
    run.log_image("img", np.zeros((4, 4, 3), dtype=np.uint8), step=0)
    summary = run.finish(timeout=60)
    assert summary.problems == [], summary.problems
    assert [n.kind for n in summary.notes] == ["no-image"], summary.notes


def test_install_hint_names_the_third_party_distribution() -> None:
    def factory(options: dict[str, Any]) -> trackmux.Backend:
        raise AssertionError

    ours = BackendSpec("wandb", factory, "wandb", "trackmux", "0.1", ("wandb",), "wandb")
    theirs = BackendSpec("trackio", factory, "p", "trackmux-trackio", "1.0", ("trackio",))
    extra = BackendSpec("dv", factory, "p", "trackmux-dv", "1.0", ("dvclive",), "live")
    assert ours.install_hint() == ("pip install wandb (or, in the trackmux checkout, "
                                   "pip install -e '.[wandb]')")
    assert theirs.install_hint() == "pip install 'trackmux-trackio'"
    assert extra.install_hint() == "pip install 'trackmux-dv[live]'"


def test_memory_backend_works_outside_pytest(tmp_path: Path) -> None:
    code = f"""
import trackmux
from trackmux.testing import use_memory_backend
store = use_memory_backend()
run = trackmux.init(project="m", backends=["memory"], dir={str(tmp_path)!r})
run.log({{"x": 1.5}}, step=3)
run.finish()
print(store[run.id].metrics())
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'x': [(3, 1.5)]}"


def test_a_backend_failing_on_every_event_is_retried_not_quarantined(
        test_backends: Any, tmp_path: Path) -> None:
    """Every write raises the same RuntimeError: the first event is skipped tentatively,
    the second fails the same way, so the skip is undone and nothing is quarantined."""
    run = trackmux.init(project="q", backends=["raising", "memory"], dir=tmp_path,
                        backend_options={"raising": {"where": "write"}})
    for step in range(20):
        run.log({"x": step}, step=step)
    summary = run.finish(timeout=20)
    assert summary.quarantined == {}
    assert summary.pending == {"raising": summary.events}
    reader = SpoolReader(run.dir)
    assert reader.quarantined() == [] and reader.cursor("raising").acked_seq == 0
    reader.close()
    assert [p.kind for p in summary.problems] == ["write"], summary.problems
