"""Issue 27, CLI words: ``trackmux sync RUN --to X -o X.<destination option>=NEW`` delivers
to the new destination and says so (it used to say "nothing to do": the backend's cursor
already covered the run's first destination)."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

import trackmux
from trackmux.cli.main import cli


def _steps(path: Path) -> list[int]:
    return [orjson.loads(line)["step"] for line in path.read_bytes().splitlines()]


def test_sync_to_a_new_folder_delivers_everything_there(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    run = trackmux.init(project="p", name="exp", backends=["file"], dir=tmp_path / "spool",
                        backend_options={"file": {"root": str(first)}})
    for step in range(5):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
    assert run.finish(timeout=30).complete
    runner = CliRunner()
    moved = runner.invoke(cli, ["sync", str(run.dir), "--to", "file", "-o",
                                f"file.root={second}", "--no-progress"])
    assert moved.exit_code == 0, moved.output
    assert "a new destination (root=" in moved.output
    assert "delivered 5 events now to" in moved.output and str(second) in moved.output
    assert _steps(second / "p" / "exp.jsonl") == [0, 1, 2, 3, 4]
    assert _steps(first / "p" / "exp.jsonl") == [0, 1, 2, 3, 4]  # untouched
    again = runner.invoke(cli, ["sync", str(run.dir), "--to", "file", "-o",
                                f"file.root={second}", "--no-progress"])
    assert again.exit_code == 0 and "nothing to do" in again.output, again.output
    assert _steps(second / "p" / "exp.jsonl") == [0, 1, 2, 3, 4]  # exactly once
    same = runner.invoke(cli, ["sync", str(run.dir), "--to", "file", "-o",
                               f"file.root={first}", "--no-progress"])
    assert same.exit_code == 0 and "nothing to do" in same.output, same.output
    assert "new destination" not in same.output  # the run's own folder is not new
