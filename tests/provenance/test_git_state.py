"""Git state against real repositories: dirty, detached, no repository, no git binary, a
remote URL with a token (issue 25)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trackmux.provenance import git
from trackmux.testing.provenance import git as run_git
from trackmux.testing.provenance import git_tree


def test_clean_tree(tmp_path: Path) -> None:
    commit = git_tree(tmp_path / "repo", {"train.py": "print(1)\n"})
    state = git.state(tmp_path / "repo")
    assert state["available"] and state["commit"] == commit and state["branch"] == "main"
    assert state["dirty"] is False and state["detached"] is False
    assert state["untracked"] == [] and state["remote"] is None
    diff, facts = git.diff(state["root"])
    assert diff == "" and facts["diff_bytes"] == 0 and facts["diff_sha256"] is None


def test_dirty_tree_with_untracked_files(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git_tree(repo, {"train.py": "lr = 1\n"})
    (repo / "train.py").write_text("lr = 2\n")
    (repo / "notes.txt").write_text("scratch\n")
    state = git.state(repo / ".")
    assert state["dirty"] is True
    assert state["untracked"] == ["notes.txt"] and state["untracked_count"] == 1
    diff, facts = git.diff(state["root"])
    assert "-lr = 1" in diff and "+lr = 2" in diff
    assert facts["diff_bytes"] == len(diff.encode()) and len(facts["diff_sha256"]) == 64
    assert facts["diff_truncated"] is False


def test_diff_is_capped_and_hashed_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    repo = tmp_path / "repo"
    git_tree(repo, {"big.txt": "a\n"})
    (repo / "big.txt").write_text("b\n" * 5000)
    monkeypatch.setattr(git, "MAX_DIFF_BYTES", 1000)
    diff, facts = git.diff(str(repo))
    assert len(diff) == 1000 and facts["diff_truncated"] is True
    assert facts["diff_bytes"] > 10_000


def test_untracked_list_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    git_tree(repo, {"a": "a"})
    for i in range(12):
        (repo / f"u{i}.txt").write_text("x")
    monkeypatch.setattr(git, "MAX_UNTRACKED", 5)
    state = git.state(repo)
    assert len(state["untracked"]) == 5 and state["untracked_count"] == 12


def test_detached_head(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    first = git_tree(repo, {"a": "1"})
    (repo / "a").write_text("2")
    run_git(repo, "commit", "-qam", "second")
    run_git(repo, "checkout", "-q", "--detach", first)
    state = git.state(repo)
    assert state["commit"] == first and state["branch"] is None and state["detached"] is True


def test_no_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # tox keeps tmp_path inside the checkout (itself a git tree): git must not look above it
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    state = git.state(tmp_path)
    assert state["available"] is False and "not a git repository" in state["error"]


def test_no_git_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git_tree(tmp_path / "repo", {"a": "1"})
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    state = git.state(tmp_path / "repo")
    assert state == {"available": False, "error": "no git binary on PATH"}


@pytest.mark.parametrize(("url", "clean"), [
    ("https://oauth2:ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/o/r.git",
     "https://github.com/o/r.git"),
    ("https://user:pa55w0rd@gitlab.example.com:8443/g/r", "https://gitlab.example.com:8443/g/r"),
    ("ssh://git@github.com/o/r.git", "ssh://github.com/o/r.git"),
    ("git@github.com:o/r.git", "git@github.com:o/r.git"),
    ("https://github.com/o/r.git", "https://github.com/o/r.git"),
])
def test_credentials_leave_the_remote_url(url: str, clean: str) -> None:
    assert git.clean_remote(url) == clean


def test_remote_with_a_token_is_stored_without_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git_tree(repo, {"a": "1"})
    run_git(repo, "remote", "add", "origin",
            "https://x-access-token:ghs_SECRETSECRETSECRET@github.com/o/r.git")
    state = git.state(repo)
    assert state["remote"] == "https://github.com/o/r.git"
    assert "SECRET" not in repr(state)
