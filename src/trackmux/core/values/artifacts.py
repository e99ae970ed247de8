"""Artifacts: files and folders logged by content hash, so every delivery sends the same bytes.

``log_artifact`` walks the path once, in the caller's thread (it reads every file to hash
it: call it at a checkpoint, not in the inner loop). A file of at most ``copy_max_bytes``
(default 50 MB, ``TRACKMUX_ARTIFACT_COPY_MAX_BYTES``) is copied into the run folder as
``artifacts/<sha256[:2]>/<sha256>``, so the spool's folder alone can replay it later; a
larger one is referenced where it is, with its size, mtime and sha256.

At delivery (live or ``trackmux sync``) :func:`resolve` finds each file again; a
referenced file whose size, mtime or hash changed, or that is gone, is left out and
reported, never sent in its new state.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from trackmux.core.events import ArtifactEvent, ArtifactFile

DEFAULT_COPY_MAX_BYTES = 50 * 1024 * 1024
ARTIFACTS_DIR = "artifacts"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_CHUNK = 1 << 20


def check_name(name: object, argument: str) -> str:
    """An artifact name or type: letters, digits, ``.``, ``_``, ``-`` (wandb's and mlflow's
    common ground), at most 128 characters."""
    if not isinstance(name, str):
        raise TypeError(f"{argument} must be str, got {type(name).__name__}")
    if not _NAME.match(name):
        raise ValueError(f"{argument} {name!r:.80} must be 1-128 letters, digits, '.', '_' or "
                         "'-', starting with a letter or digit")
    return name


def copy_limit(value: int | None) -> int:
    if value is None:
        raw = os.environ.get("TRACKMUX_ARTIFACT_COPY_MAX_BYTES")
        if not raw:
            return DEFAULT_COPY_MAX_BYTES
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"TRACKMUX_ARTIFACT_COPY_MAX_BYTES must be an int, got {raw!r}"
                             ) from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"copy_max_bytes must be an int >= 0, got {value!r}")
    return value


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def stored_path(run_dir: Path, sha256: str) -> Path:
    return run_dir / ARTIFACTS_DIR / sha256[:2] / sha256


def _files(root: Path) -> list[tuple[str, Path]]:
    if root.is_file():
        return [(root.name, root)]
    found = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            full = Path(dirpath) / name
            if full.is_file():
                found.append((full.relative_to(root).as_posix(), full))
    return sorted(found)


def collect(path: object, name: str | None, type_: str, run_dir: Path,
            copy_max_bytes: int) -> tuple[str, str, str, tuple[ArtifactFile, ...]]:
    """Hash (and copy the small files of) ``path``; return name, type, source and files."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    root = Path(path).expanduser().absolute()
    if not root.exists():
        raise ValueError(f"path {str(root)!r} does not exist")
    name = check_name(name if name is not None else _default_name(root), "name")
    type_ = check_name(type_, "type")
    entries = _files(root)
    if not entries:
        raise ValueError(f"path {str(root)!r} holds no files")
    files = []
    for rel, full in entries:
        stat = full.stat()
        digest = sha256_of(full)
        copied = stat.st_size <= copy_max_bytes
        if copied:
            target = stored_path(run_dir, digest)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(target.name + f".tmp{os.getpid()}")
                shutil.copyfile(full, tmp)
                os.replace(tmp, target)
        files.append(ArtifactFile(rel, stat.st_size, digest, stat.st_mtime_ns, copied))
    return name, type_, str(root), tuple(files)


def _default_name(root: Path) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", root.name).lstrip("._-")
    return cleaned[:128] or "artifact"


@dataclass(frozen=True)
class Resolved:
    """Where each file of an artifact can be read now, and what could not be found."""

    files: list[tuple[ArtifactFile, Path]]
    problems: list[str]


def referenced_path(event: ArtifactEvent, file: ArtifactFile) -> Path:
    source = Path(event.source)
    return source if len(event.files) == 1 and source.name == file.path and not (
        source.is_dir()) else source / file.path


def resolve(event: ArtifactEvent, run_dir: Path) -> Resolved:
    """Each file of ``event`` as it was logged: a copy from the run folder, or the
    referenced file if its size, mtime (or, when those moved, its hash) still match."""
    found: list[tuple[ArtifactFile, Path]] = []
    problems: list[str] = []
    for file in event.files:
        if file.copied:
            path = stored_path(run_dir, file.sha256)
            if path.is_file():
                found.append((file, path))
            else:
                problems.append(f"artifact {event.name!r}: the copy of {file.path} "
                                f"({file.sha256[:12]}) is missing from {run_dir}")
            continue
        path = referenced_path(event, file)
        try:
            stat = path.stat()
        except OSError:
            problems.append(f"artifact {event.name!r}: referenced file {path} is gone")
            continue
        if stat.st_size == file.size and stat.st_mtime_ns == file.mtime_ns:
            found.append((file, path))
        elif stat.st_size == file.size and sha256_of(path) == file.sha256:
            found.append((file, path))  # touched, same content
        else:
            problems.append(f"artifact {event.name!r}: referenced file {path} changed since "
                            f"it was logged (sha256 was {file.sha256[:12]}); not delivered")
    return Resolved(found, problems)


def listing(event: ArtifactEvent) -> str:
    """A markdown table of the artifact's files (the fallback for backends without
    artifacts, and what the report shows)."""
    lines = [f"artifact **{event.name}** ({event.type}) from `{event.source}`", "",
             "| file | bytes | sha256 | kept |", "|---|---|---|---|"]
    for f in event.files:
        kept = "copied" if f.copied else "referenced"
        name = f.path.replace("|", "\\|")
        lines.append(f"| {name} | {f.size} | {f.sha256[:16]} | {kept} |")
    return "\n".join(lines)
