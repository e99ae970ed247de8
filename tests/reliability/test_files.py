"""Files: spool directories are 0700 and every spool file 0600; no key, project or run
name can make trackmux or a file-writing backend write outside its directory."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trackmux
from trackmux.core.delivery.fallbacks import contained, safe_filename


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_spool_directories_are_0700_and_files_0600(tmp_path: Path, memory_backend: Any) -> None:
    old = os.umask(0o022)  # a permissive umask must not leak into the spool
    try:
        run = trackmux.init(project="perm", backends=["memory"], dir=tmp_path / "root")
        assert isinstance(run, trackmux.Run)
        run.log({"x": 1.0})
        run.log_image("img", np.zeros((4, 4), dtype=np.uint8))
        run._spool.flush(5)
        live = sorted(p.name for p in run.dir.iterdir())
        assert {"spool.db", "spool.db-wal", "spool.db-shm", "run.lock"} <= set(live), live
        assert any(name.startswith("deliver-") for name in live)
        for path in run.dir.iterdir():
            assert _mode(path) == 0o600, (path.name, oct(_mode(path)))
        assert _mode(run.dir) == 0o700
        assert _mode(run.dir.parent) == 0o700  # the project directory trackmux created
        assert _mode(run.dir.parent.parent) == 0o700  # and the root it created
        run.finish(timeout=5)
        assert "delivery.db" in {p.name for p in run.dir.iterdir()}  # the memory cursor
        for path in run.dir.iterdir():
            assert _mode(path) == 0o600, (path.name, oct(_mode(path)))
    finally:
        os.umask(old)


@pytest.mark.parametrize("name", ["../../etc", "/etc/passwd", "..", ".", "a/../../b",
                                  "..\\..\\win", "x\x00y", "~root", ""])
def test_project_and_run_names_stay_inside_the_spool_root(
        tmp_path: Path, name: str, memory_backend: Any) -> None:
    root = tmp_path / "root"
    run = trackmux.init(project=name or None, name=name or None, backends=["memory", "file"],
                        dir=root, backend_options={"file": {"root": str(tmp_path / "files")}})
    assert isinstance(run, trackmux.Run)
    run.log({"x": 1.0})
    run.log_image("img", np.zeros((2, 2), dtype=np.uint8))
    run.finish(timeout=5)
    assert root.resolve() in run.dir.resolve().parents
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert all(tmp_path.resolve() in p.resolve().parents for p in written)
    files = [p for p in (tmp_path / "files").rglob("*") if p.is_file()]
    assert files and all((tmp_path / "files").resolve() in p.resolve().parents for p in files)


@pytest.mark.parametrize("key", ["../../../escape", "/abs/path/img", "..", "a/../../b",
                                 "../" * 30 + "etc/passwd", "ok/../../x", "\\..\\..\\x"])
def test_image_keys_cannot_escape_the_file_backends_media_directory(
        tmp_path: Path, key: str) -> None:
    out = tmp_path / "deep" / "out.jsonl"
    run = trackmux.init(project="p", backends=["file"], dir=tmp_path / "spool",
                        backend_options={"file": {"path": str(out)}})
    run.log_image(key, np.full((3, 3), 200, dtype=np.uint8), step=1)
    assert run.finish(timeout=60).complete  # returns once delivered; 60 s for a loaded CI
    media = out.with_name("out_media")
    pngs = list(tmp_path.rglob("*.png"))
    assert len(pngs) == 1 and pngs[0].parent == media, pngs


@pytest.mark.parametrize("key", ["../x", "/etc/x", "..", "a/../../b", "", "..\\x", "x" * 500])
def test_safe_filename_and_contained(tmp_path: Path, key: str) -> None:
    name = safe_filename(key)
    assert "/" not in name and "\\" not in name and name not in ("", ".", "..")
    assert len(name) <= 120
    assert contained(tmp_path, name).parent == tmp_path.resolve()
    with pytest.raises(ValueError, match="outside"):
        contained(tmp_path, "../escape")
