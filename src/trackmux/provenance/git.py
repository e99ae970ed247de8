"""The git state of the working tree a run's entry script lives in, read with the git CLI.

Why the CLI and not GitPython or dulwich: ``git`` is on every machine that has a
checkout, needs no dependency in the trainer, and one ``git status --porcelain=v2`` call
gives commit, branch, detached HEAD, dirty flag and the untracked files together. Every
call has a timeout (``GIT_TIMEOUT``) and runs with ``GIT_OPTIONAL_LOCKS=0`` so it never
takes the index lock a user's own git command may need. No git binary, no repository, a
hung or failing call: the section says why (``error``) and the run goes on.

Caps (stated in docs/provenance.md): the diff of tracked files is kept up to
``MAX_DIFF_BYTES`` (its size and sha256 are of the whole diff, so two runs compare even
when cut); the untracked files are listed up to ``MAX_UNTRACKED`` names.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

GIT_TIMEOUT = 5.0
MAX_DIFF_BYTES = 1_000_000
MAX_UNTRACKED = 200


class GitError(Exception):
    """A git call failed or timed out; the message says which and why."""


def _git(root: Path, *args: str, timeout: float = GIT_TIMEOUT) -> bytes:
    exe = shutil.which("git")
    if exe is None:
        raise GitError("no git binary on PATH")
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run([exe, "-C", str(root), *args], capture_output=True,
                              timeout=timeout, env=env, stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} timed out after {timeout:g} s") from None
    except OSError as exc:
        raise GitError(f"git {args[0]}: {exc}") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise GitError(f"git {args[0]}: {message[-1] if message else done.returncode}")
    return done.stdout


def clean_remote(url: str) -> str:
    """``url`` without credentials: ``https://user:token@host/x`` -> ``https://host/x``.
    scp-style ``git@host:x`` keeps its user (``git`` is an account name, not a secret)."""
    url = url.strip()
    if "://" not in url:
        return url
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def state(start: Path) -> dict[str, Any]:
    """Commit, branch, remote, dirty flag and untracked files of the tree holding ``start``
    (cheap: two git calls). The diff is :func:`diff`, read later off the trainer's path."""
    out: dict[str, Any] = {"available": False}
    try:
        root = Path(_git(start, "rev-parse", "--show-toplevel").decode().strip())
    except GitError as exc:
        out["error"] = str(exc)
        return out
    out.update(available=True, root=str(root))
    try:
        status = _git(root, "status", "--porcelain=v2", "--branch", "-z",
                      "--untracked-files=normal")
    except GitError as exc:
        out["error"] = str(exc)
        return out
    commit: str | None = None
    branch: str | None = None
    dirty = False
    untracked: list[str] = []
    for record in status.decode(errors="replace").split("\0"):
        if record.startswith("# branch.oid "):
            oid = record.split(" ", 2)[2]
            commit = None if oid == "(initial)" else oid
        elif record.startswith("# branch.head "):
            head = record.split(" ", 2)[2]
            branch = None if head == "(detached)" else head
        elif record.startswith("? "):
            untracked.append(record[2:])
        elif record[:2] in ("1 ", "2 ", "u "):
            dirty = True
    out.update(commit=commit, branch=branch, detached=commit is not None and branch is None,
               dirty=dirty, untracked=untracked[:MAX_UNTRACKED],
               untracked_count=len(untracked))
    try:
        remote = _git(root, "config", "--get", "remote.origin.url").decode().strip()
    except GitError:  # no remote named origin: take the first one, if any
        try:
            names = _git(root, "remote").decode().split()
            remote = (_git(root, "config", "--get", f"remote.{names[0]}.url").decode().strip()
                      if names else "")
        except GitError:
            remote = ""
    out["remote"] = clean_remote(remote) or None
    return out


def diff(root: str) -> tuple[str, dict[str, Any]]:
    """The uncommitted diff of tracked files against HEAD (staged and not), capped at
    ``MAX_DIFF_BYTES``, and its facts: whole size, sha256, whether it was cut."""
    try:
        raw = _git(Path(root), "diff", "HEAD", "--no-color", "--no-ext-diff", timeout=15.0)
    except GitError as exc:
        try:  # no commit yet: everything staged is the change
            raw = _git(Path(root), "diff", "--cached", "--no-color", "--no-ext-diff")
        except GitError:
            return "", {"diff_error": str(exc)}
    facts: dict[str, Any] = {"diff_bytes": len(raw),
                             "diff_sha256": hashlib.sha256(raw).hexdigest() if raw else None,
                             "diff_truncated": len(raw) > MAX_DIFF_BYTES}
    return raw[:MAX_DIFF_BYTES].decode(errors="replace"), facts
