"""Provenance recorded by real runs: a training script in a git tree, run as a process,
read back from the spool, the file backend, ``trackmux show`` and ``trackmux diff``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trackmux.core.events import ConfigEvent, ProvenanceEvent, TextEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.provenance.collect import env_names, redact_argv
from trackmux.provenance.record import wait_recorded
from trackmux.testing.provenance import git, git_tree

SCRIPT = """
import os, sys, trackmux
from trackmux.provenance.record import wait_recorded
kwargs = {}
if os.environ.get("SAVE_CODE"):
    kwargs["save_code"] = True
run = trackmux.init(project="p", name=os.environ["RUN_NAME"], backends=["file"],
                    config={"lr": float(os.environ.get("LR", "0.1"))},
                    backend_options={"file": {"root": os.environ["FILE_ROOT"]}}, **kwargs)
run.log({"loss": 1.0}, step=0)
print(run.dir)
# the probe's answer first: finish() gives it at most 5 s, which a loaded machine exceeds
wait_recorded(run, 600)
run.finish()
"""
TOKEN = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def run_script(repo: Path, tmp_path: Path, name: str, *args: str, **env: str) -> Path:
    environ = {**os.environ, "TRACKMUX_DIR": str(tmp_path / "spool"), "RUN_NAME": name,
               "FILE_ROOT": str(tmp_path / "files"), "TRACKMUX_BACKENDS": "file",
               "WANDB_API_KEY": "wandb-secret-value-0123456789", **env}
    done = subprocess.run([sys.executable, "train.py", *args], cwd=repo, env=environ,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip().splitlines()[-1])


def provenance_of(run_dir: Path) -> list[ProvenanceEvent]:
    reader = SpoolReader(run_dir)
    try:
        return [e for e in reader.iter_events() if isinstance(e, ProvenanceEvent)]
    finally:
        reader.close()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    git_tree(root, {"train.py": SCRIPT, "README": "x\n"})
    git(root, "remote", "add", "origin", f"https://bot:{TOKEN}@github.com/o/train.git")
    return root


def test_a_run_records_its_code_command_and_host_once(repo: Path, tmp_path: Path) -> None:
    (repo / "README").write_text("changed\n")
    (repo / "scratch.txt").write_text("x")
    run_dir = run_script(repo, tmp_path, "a", "--api_key=topsecret123", "--token",
                         "alsosecret456", "--lr=0.1")
    events = provenance_of(run_dir)
    assert len(events) == 1
    data, diff = events[0].data, events[0].diff
    head = git(repo, "rev-parse", "HEAD")
    assert data["git"]["commit"] == head and data["git"]["branch"] == "main"
    assert data["git"]["dirty"] is True and data["git"]["untracked"] == ["scratch.txt"]
    assert data["git"]["remote"] == "https://github.com/o/train.git"
    assert "+changed" in diff and data["git"]["diff_sha256"]
    assert data["command"]["entry"] == str(repo / "train.py")
    assert data["command"]["argv"] == ["train.py", "--api_key=***REDACTED***", "--token",
                                       "***REDACTED***", "--lr=0.1"]
    assert data["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert data["packages"]["trackmux"] and data["host"]["hostname"]
    assert "WANDB_API_KEY" in data["env"] and "TRACKMUX_DIR" in data["env"]
    assert "incomplete" not in data
    raw = b"".join((run_dir / "spool.db").read_bytes() for _ in [0])
    for secret in (TOKEN, "topsecret123", "alsosecret456", "wandb-secret-value-0123456789"):
        assert secret.encode() not in raw
    # the file backend's own convention: files beside the metrics
    stored = json.loads((tmp_path / "files" / "p" / "a.provenance.json").read_text())
    assert stored["git"]["commit"] == head
    assert "+changed" in (tmp_path / "files" / "p" / "a.provenance.diff").read_text()


def test_provenance_off_by_argument_or_environment(repo: Path, tmp_path: Path) -> None:
    run_dir = run_script(repo, tmp_path, "off", TRACKMUX_PROVENANCE="0")
    assert provenance_of(run_dir) == []


def test_bad_provenance_environment_names_the_variable(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    import trackmux

    monkeypatch.setenv("TRACKMUX_PROVENANCE", "maybe")
    with pytest.raises(ValueError, match="TRACKMUX_PROVENANCE"):
        trackmux.init(project="p", backends="none", dir=tmp_path)
    with pytest.raises(TypeError, match="save_code"):
        trackmux.init(project="p", backends="none", dir=tmp_path, provenance=True,
                      save_code="yes")  # type: ignore[arg-type]


def test_save_code_stores_the_script_and_the_diff(repo: Path, tmp_path: Path) -> None:
    (repo / "README").write_text("changed\n")
    run_dir = run_script(repo, tmp_path, "code", SAVE_CODE="1")
    reader = SpoolReader(run_dir)
    try:
        arts = [e for e in reader.iter_events() if e.kind == "artifact"]
    finally:
        reader.close()
    assert [a.name for a in arts] == ["code"] and arts[0].type == "code"
    files = {f.path: f for f in arts[0].files}
    assert set(files) == {"train.py", "uncommitted.diff"} and all(f.copied for f in files.values())
    copied = run_dir / "artifacts" / files["train.py"].sha256[:2] / files["train.py"].sha256
    assert copied.read_text() == SCRIPT


def test_in_process_run_without_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry script that is not there: the working directory is looked at, and outside
    any tree git says so, the run goes on."""
    import trackmux

    monkeypatch.chdir(tmp_path)
    # tox keeps tmp_path inside the checkout (itself a git tree): git must not look above it
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "nothere.py")])
    # `python -m pytest` makes pytest's own __main__.py the entry, whose folder is the
    # interpreter's (in a checkout's .venv: a git tree); this test is about argv's script
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", None)
    run = trackmux.init(project="p", backends="none", dir=tmp_path / "spool")
    assert wait_recorded(run, 600)  # the probe's answer (finish() waits 5 s at most)
    run.finish()
    (event,) = provenance_of(run.dir)
    assert event.data["git"]["available"] is False and event.diff == ""


def test_argv_and_env_never_carry_values() -> None:
    assert redact_argv(["x.py", "--hf_token", "hf_abcdefghijklmnop", "--password=pw",
                        "+trainer.wandb_api_key=k", "--url=https://u:p@host/x", "--n", "3"]) == [
        "x.py", "--hf_token", "***REDACTED***", "--password=***REDACTED***",
        "+trainer.wandb_api_key=***REDACTED***", "--url=https://***@host/x", "--n", "3"]
    assert env_names({"WANDB_API_KEY": "v", "HOME": "/h", "NCCL_DEBUG": "INFO",
                      "RANK": "0"}) == ["NCCL_DEBUG", "RANK", "WANDB_API_KEY"]


def _third_party(tmp_path: Path, capabilities: frozenset[str]) -> list[Any]:
    """Deliver a run holding provenance to a backend with ``capabilities``; its events."""
    import trackmux
    from trackmux.core.backends.contract import Backend, ResumeState, RunInfo
    from trackmux.core.delivery.sync import deliver
    from trackmux.testing.provenance import provenance_event

    got: list[Any] = []

    class ThirdParty(Backend):
        name = "thirdparty"

        def open(self, run: RunInfo, resume: ResumeState) -> None: ...

        def write(self, events: Any) -> None:
            got.extend(events)

        def close(self, status: str) -> None: ...

    ThirdParty.capabilities = capabilities
    run = trackmux.init(project="p", backends="none", dir=tmp_path, config={"lr": 0.1},
                        provenance=False)
    run._append(provenance_event())
    run.log_config({"later": 1})
    run.finish()
    result = deliver(run.dir, {"thirdparty": ThirdParty}, timeout=30)
    assert result.complete
    return got


def test_fallback_config_under_provenance_key(tmp_path: Path) -> None:
    got = _third_party(tmp_path, frozenset({"metrics", "config"}))
    configs = [e.config for e in got if isinstance(e, ConfigEvent)]
    assert configs[1]["lr"] == 0.1 and configs[1]["_provenance"]["git"]["branch"] == "main"
    assert configs[2]["later"] == 1 and "_provenance" in configs[2]  # kept in later merges
    assert not any(isinstance(e, ProvenanceEvent) for e in got)


def test_fallback_text_without_config(tmp_path: Path) -> None:
    got = _third_party(tmp_path, frozenset({"metrics", "text"}))
    (text,) = [e for e in got if isinstance(e, TextEvent)]
    assert text.key == "provenance" and "0123456789abcdef" in text.text
    assert "+y" in text.text  # the diff


def test_show_and_diff_two_real_runs(repo: Path, tmp_path: Path) -> None:
    a = run_script(repo, tmp_path, "a")
    (repo / "train.py").write_text(SCRIPT + "\n# tuned\n")
    git(repo, "commit", "-qam", "tune")
    b = run_script(repo, tmp_path, "b", LR="0.2")
    cli = [sys.executable, "-m", "trackmux"]
    shown = subprocess.run([*cli, "show", str(a)], capture_output=True, text=True, timeout=60)
    assert "provenance (attempt 1):" in shown.stdout and "on main" in shown.stdout
    same = subprocess.run([*cli, "diff", str(a), str(a)], capture_output=True, text=True,
                          timeout=60)
    assert same.returncode == 0 and "no differences" in same.stdout
    differ = subprocess.run([*cli, "diff", str(a), str(b), "--json"], capture_output=True,
                            text=True, timeout=60)
    assert differ.returncode == 1, differ.stderr
    result = json.loads(differ.stdout)
    keys = {area: {d["key"] for d in items} for area, items in result["differences"].items()}
    assert keys["config"] == {"lr"} and "commit" in keys["code"]
    assert keys["packages"] == set() and keys["hardware"] == set()
    text = subprocess.run([*cli, "diff", str(a), str(b)], capture_output=True, text=True,
                          timeout=60)
    assert "lr: 0.1 -> 0.2" in text.stdout
    bad = subprocess.run([*cli, "diff", str(a), str(tmp_path / "nope")], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "nope" in bad.stderr


def test_on_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import trackmux

    monkeypatch.delenv("TRACKMUX_PROVENANCE")
    run = trackmux.init(project="p", backends="none", dir=tmp_path)
    assert run.provenance is True  # type: ignore[union-attr]
    run.finish()
    assert len(provenance_of(run.dir)) == 1  # type: ignore[arg-type]
    off = trackmux.init(project="p", backends="none", dir=tmp_path, provenance=False)
    off.finish()
    assert provenance_of(off.dir) == []  # type: ignore[arg-type]


def test_report_shows_provenance_and_highlights_differences(repo: Path, tmp_path: Path
                                                            ) -> None:
    from trackmux.report.load import load_run
    from trackmux.report.page import render

    a = run_script(repo, tmp_path, "a")
    (repo / "README").write_text("dirty now\n")
    b = run_script(repo, tmp_path, "b")
    runs = [load_run(a), load_run(b)]
    runs[0].label, runs[1].label = "a", "b"
    page = render(runs)
    assert '<section id="provenance">' in page and 'href="#provenance"' in page
    assert '<tr class="diff"><td class="mono">git.dirty</td>' in page
    assert "uncommitted diff of b" in page and "+dirty now" in page
