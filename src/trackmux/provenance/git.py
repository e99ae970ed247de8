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

Files secret by their name (:data:`SECRET_FILES`: ``.env*``, ``*credentials*``, ``*.pem``,
``*.key``, ``id_rsa*``, ``*.p12``, ``secrets.*``, ...) are left out of the diff before
anything else reads it: their section becomes its ``diff --git`` line and a line saying
the file was left out, and ``diff_left_out`` names them. Size and sha256 are of the diff
without them. The rest is redacted as text by the caller (record.py), in the trainer.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

GIT_TIMEOUT = 5.0
MAX_DIFF_BYTES = 1_000_000
MAX_UNTRACKED = 200


#: file names (matched on the base name, case-insensitive) whose content is a secret whole
SECRET_FILES = (
    ".env", ".env.*", "*.env", ".envrc", "*credential*", "*creds*", "secret", "secrets",
    "secret.*", "secrets.*", "*.secret", "*.secrets", "*_secret.*", "*_secrets.*",
    "client_secret*", "service-account*.json", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks",
    "*.keystore", "*.ppk", "*.kdbx", "*.asc", "*.gpg", "id_rsa*", "id_dsa*", "id_ecdsa*",
    "id_ed25519*", ".netrc", "_netrc", ".pgpass", ".pypirc", ".npmrc", ".git-credentials",
    ".htpasswd", "*.tfvars", "*.tfstate", "kubeconfig", ".dockercfg",
)
_SECRET_FILE = re.compile("|".join(fnmatch.translate(p) for p in SECRET_FILES), re.IGNORECASE)
_SECTION = re.compile(rb"(?m)^(?=diff --git )")
_NAME_LINES = (b"--- ", b"+++ ", b"rename from ", b"rename to ", b"copy from ", b"copy to ")
LEFT_OUT = "# trackmux: {name} left out of this record: secret by its name"


def is_secret_file(path: str) -> bool:
    """True when a file's name says its content is a secret (:data:`SECRET_FILES`)."""
    name = path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return bool(name) and _SECRET_FILE.match(name) is not None


def _names(section: bytes) -> list[str]:
    """The paths a diff section names (header, ---/+++ and rename lines), without a/ b/."""
    lines = section.split(b"\n", 40)
    found = lines[0][len(b"diff --git "):].split(b" ")
    found += [line.split(b" ", 1 if line.startswith((b"--- ", b"+++ ")) else 2)[-1]
              for line in lines[1:] if line.startswith(_NAME_LINES)]
    out = []
    for raw in found:
        name = raw.decode(errors="replace").strip().strip('"').split("\t")[0]
        out.append(name[2:] if name[:2] in ("a/", "b/") else name)
    return [n for n in out if n and n != "/dev/null"]


def drop_secret_files(raw: bytes) -> tuple[bytes, list[str]]:
    """``raw`` (a git diff) without the sections of files secret by name, each replaced by
    its header and a line saying it was left out; and the paths left out."""
    if not raw:
        return raw, []
    kept: list[bytes] = []
    left_out: list[str] = []
    for section in _SECTION.split(raw):
        secret = [n for n in _names(section) if is_secret_file(n)] if section.startswith(
            b"diff --git ") else []
        if not secret:
            kept.append(section)
            continue
        left_out.append(secret[-1])
        header = section.split(b"\n", 1)[0]
        kept.append(header + b"\n" + LEFT_OUT.format(name=secret[-1]).encode() + b"\n")
    return b"".join(kept), sorted(set(left_out))


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
    """The uncommitted diff of tracked files against HEAD (staged and not), files secret by
    name left out, capped at ``MAX_DIFF_BYTES``, and its facts: whole size, sha256, whether
    it was cut, which files were left out."""
    try:
        raw = _git(Path(root), "diff", "HEAD", "--no-color", "--no-ext-diff", timeout=15.0)
    except GitError as exc:
        try:  # no commit yet: everything staged is the change
            raw = _git(Path(root), "diff", "--cached", "--no-color", "--no-ext-diff")
        except GitError:
            return "", {"diff_error": str(exc)}
    raw, left_out = drop_secret_files(raw)
    facts: dict[str, Any] = {"diff_bytes": len(raw),
                             "diff_sha256": hashlib.sha256(raw).hexdigest() if raw else None,
                             "diff_truncated": len(raw) > MAX_DIFF_BYTES}
    if left_out:
        facts["diff_left_out"] = left_out
    return raw[:MAX_DIFF_BYTES].decode(errors="replace"), facts
