"""Provenance fixtures for backend tests: a fixed record with the fields every backend
maps (git commit, branch, remote, entry script), and a small git tree to run a script in."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from trackmux.core.events import ProvenanceEvent

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REMOTE = "https://github.com/example/train.git"
DIFF = "diff --git a/train.py b/train.py\n--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n-x\n+y\n"


def provenance_event(entry: str = "/work/train.py", step: int = 0,
                     time: float = 1_700_000_000.0) -> ProvenanceEvent:
    data: dict[str, Any] = {
        "schema": 1, "attempt": 1,
        "command": {"argv": ["train.py", "--lr=0.1", "--api_key=***REDACTED***"],
                    "executable": "/usr/bin/python3", "cwd": "/work", "entry": entry},
        "git": {"available": True, "root": "/work", "commit": COMMIT, "branch": "main",
                "detached": False, "dirty": True, "remote": REMOTE, "untracked": ["notes.txt"],
                "untracked_count": 1, "diff_bytes": len(DIFF), "diff_sha256": "f" * 64,
                "diff_truncated": False},
        "python": {"version": "3.11.7", "implementation": "CPython"},
        "packages": {"trackmux": "0.1.0", "torch": "2.13.0"},
        "host": {"hostname": "node-1", "os": "Linux", "platform": "Linux-6", "machine": "x86_64",
                 "cpu": "AMD EPYC", "cpu_count": 2},
        "gpu": {"source": "none"},
        "env": ["CUDA_VISIBLE_DEVICES", "WANDB_MODE"],
    }
    return ProvenanceEvent(data, DIFF, step, time)


def git(root: Path, *args: str) -> str:
    """Run git in ``root`` with a fixed identity; its stdout."""
    done = subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c",
                           "user.email=t@example.com", "-c", "commit.gpgsign=false", *args],
                          capture_output=True, text=True, check=True, timeout=30)
    return done.stdout.strip()


def git_tree(root: Path, files: dict[str, str]) -> str:
    """A repository at ``root`` with ``files`` committed on branch ``main``; the commit."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    for name, text in files.items():
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    return git(root, "rev-parse", "HEAD")


def provenance_spool(tmp_path: Path, name: str = "prov-run") -> Path:
    """A finished run's spool under ``tmp_path``: a config, a metric and a provenance event."""
    from trackmux.core.events import ConfigEvent, MetricsEvent
    from trackmux.core.spool.writer import SpoolWriter

    run_dir = tmp_path / "spool" / "proj" / name
    writer = SpoolWriter(run_dir)
    writer.set_meta(run_id=name, project="proj", name=name, state="finished",
                    started_at=1_700_000_000.0)
    writer.append(ConfigEvent({"lr": 0.1}, 0, 1_700_000_000.0))
    writer.append(MetricsEvent({"loss": 1.0}, 0, 1_700_000_000.0))
    writer.append(provenance_event())
    writer.close()
    return run_dir
