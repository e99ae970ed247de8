"""log_artifact: small files copied by content hash, large ones referenced; a later sync
delivers the same bytes and says when a referenced file changed or is gone."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import trackmux
from trackmux.cli.main import cli
from trackmux.core.events import ArtifactEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.values.artifacts import stored_path


def _checkpoint(root: Path) -> Path:
    folder = root / "global_step_7"
    (folder / "actor").mkdir(parents=True)
    (folder / "config.yaml").write_text("lr: 1e-6\n")
    (folder / "actor" / "model.bin").write_bytes(os.urandom(4096))
    return folder


def _spooled(run_dir: Path) -> list[ArtifactEvent]:
    reader = SpoolReader(run_dir)
    try:
        return [e for e in reader.iter_events() if isinstance(e, ArtifactEvent)]
    finally:
        reader.close()


def test_small_files_copied_by_hash_large_referenced(tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path)
    run = trackmux.init(project="a", backends=[], dir=tmp_path / "spool")
    run.log_artifact(folder, type="model", step=7, copy_max_bytes=1024)
    run.log_artifact(folder / "config.yaml", name="resolved-config", type="config")
    run.finish()
    first, second = _spooled(run.dir)
    assert (first.name, first.type, first.step) == ("global_step_7", "model", 7)
    files = {f.path: f for f in first.files}
    assert set(files) == {"config.yaml", "actor/model.bin"}
    small, large = files["config.yaml"], files["actor/model.bin"]
    assert small.copied and not large.copied
    assert small.sha256 == hashlib.sha256(b"lr: 1e-6\n").hexdigest()
    assert stored_path(run.dir, small.sha256).read_bytes() == b"lr: 1e-6\n"
    assert not stored_path(run.dir, large.sha256).exists()
    assert [f.path for f in second.files] == ["config.yaml"] and second.files[0].copied


def test_file_backend_gets_copies_and_sync_reports_changed_and_gone(tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path)
    (folder / "extra.bin").write_bytes(os.urandom(2048))
    run = trackmux.init(project="a", name="art", backends=[], dir=tmp_path / "spool")
    run.log_artifact(folder, name="ckpt", copy_max_bytes=1024)
    run.finish()
    original = (folder / "actor" / "model.bin").read_bytes()
    (folder / "extra.bin").unlink()  # gone
    (folder / "config.yaml").write_text("changed, but it was copied at log time\n")
    result = CliRunner().invoke(cli, ["sync", str(run.dir), "--to", "file"],
                                env={"VERL_FILE_LOGGER_ROOT": str(tmp_path / "out")})
    assert "extra.bin is gone" in result.output, result.output
    copied = tmp_path / "out" / "a" / "art_artifacts" / "ckpt" / "step0"
    assert (copied / "config.yaml").read_text() == "lr: 1e-6\n"  # the logged bytes
    assert (copied / "actor" / "model.bin").read_bytes() == original
    assert not (copied / "extra.bin").exists()
    record = orjson.loads((tmp_path / "out" / "a" / "art.artifacts.jsonl").read_bytes())
    assert sorted(f["path"] for f in record["files"]) == ["actor/model.bin", "config.yaml"]

    later = trackmux.init(project="a", name="art2", backends=[], dir=tmp_path / "spool")
    later.log_artifact(folder, name="ckpt", copy_max_bytes=1024)
    later.finish()
    (folder / "actor" / "model.bin").write_bytes(os.urandom(4096))  # same size, new bytes
    again = CliRunner().invoke(cli, ["sync", str(later.dir), "--to", "file"],
                               env={"VERL_FILE_LOGGER_ROOT": str(tmp_path / "out2")})
    assert "model.bin changed since it was logged" in again.output, again.output


def test_touched_but_identical_reference_is_still_delivered(tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path)
    run = trackmux.init(project="a", name="t", backends=[], dir=tmp_path / "spool")
    run.log_artifact(folder, name="ckpt", copy_max_bytes=0)
    run.finish()
    model = folder / "actor" / "model.bin"
    os.utime(model, ns=(1, 1))
    result = CliRunner().invoke(cli, ["sync", str(run.dir), "--to", "file"],
                                env={"VERL_FILE_LOGGER_ROOT": str(tmp_path / "out")})
    assert "changed" not in result.output, result.output
    assert (tmp_path / "out" / "a" / "t_artifacts" / "ckpt" / "step0" / "actor" /
            "model.bin").read_bytes() == model.read_bytes()


def test_backend_without_artifacts_gets_a_listing(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    folder = _checkpoint(tmp_path)
    run = trackmux.init(project="a", backends=["console"], dir=tmp_path / "spool",
                        backend_options={"console": {"interval": 0}})
    run.log_artifact(folder, name="ckpt", type="model")
    run.finish()
    out = capsys.readouterr().out
    assert "[artifacts/ckpt @ step 0]" in out and "actor/model.bin" in out


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"path": 3}, TypeError, "path"),
    ({"path": "/nonexistent/trackmux-x"}, ValueError, "does not exist"),
    ({"name": "bad name/../x"}, ValueError, "name"),
    ({"name": 5}, TypeError, "name"),
    ({"type": ""}, ValueError, "type"),
    ({"copy_max_bytes": -1}, ValueError, "copy_max_bytes"),
])
def test_bad_input_names_the_argument(tmp_path: Path, kwargs: dict[str, Any],
                                      error: type[Exception], match: str,
                                      strict: None) -> None:
    folder = _checkpoint(tmp_path)
    run = trackmux.init(project="a", backends=[], dir=tmp_path / "spool")
    args = {"path": folder, **kwargs}
    with pytest.raises(error, match=match):
        run.log_artifact(**args)
    run.finish()


def test_empty_folder_is_an_error(tmp_path: Path, strict: None) -> None:
    (tmp_path / "empty").mkdir()
    run = trackmux.init(project="a", backends=[], dir=tmp_path / "spool")
    with pytest.raises(ValueError, match="no files"):
        run.log_artifact(tmp_path / "empty")
    run.finish()


def test_a_bad_artifact_is_dropped_named_and_counted_by_default(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A tracker never kills training: a checkpoint folder that is not there yet (or is
    empty, or a bad name) drops that call with one warning, the count reaches the finish
    summary, and the run goes on to log the next artifact and its metrics."""
    folder = _checkpoint(tmp_path)
    (tmp_path / "empty").mkdir()
    run = trackmux.init(project="a", backends=[], dir=tmp_path / "spool")
    with caplog.at_level("WARNING", logger="trackmux"):
        run.log_artifact(tmp_path / "not-written-yet", name="ckpt")
        run.log_artifact(tmp_path / "not-written-yet", name="ckpt")
        run.log_artifact(tmp_path / "empty")
        run.log_artifact(folder, name="bad name/../x")
    run.log_artifact(folder, name="ckpt", type="model")
    run.log({"loss": 1.0})
    summary = run.finish()
    warned = [r.getMessage() for r in caplog.records if "bad artifact" in r.getMessage()]
    assert len(warned) == 3 and "does not exist" in warned[0] and "holds no files" in warned[1]
    assert summary.input_dropped == 4
    assert {(p.kind, p.count) for p in summary.problems} >= {("artifact 'ckpt'", 2)}
    reader = SpoolReader(run.dir)
    kept = [e for e in reader.iter_events() if isinstance(e, ArtifactEvent)]
    reader.close()
    assert [(e.name, e.type) for e in kept] == [("ckpt", "model")]
