"""The file backend passes the conformance suite, read back from its own JSON lines."""

from __future__ import annotations

from pathlib import Path

import orjson
from PIL import Image

from trackmux.plugins.file import FileBackend
from trackmux.testing import BackendConformance, Readback


class TestFileBackend(BackendConformance):
    kinds = frozenset({"metrics", "config", "table", "image", "histogram", "artifact"})
    nonfinite = "any"  # verl's format writes NaN/inf as null

    def make_backend(self, tmp_path: Path) -> FileBackend:
        return FileBackend({"root": str(tmp_path / "files")})

    def read_back(self, tmp_path: Path) -> Readback:
        base = tmp_path / "files" / "conformance"
        out = Readback()
        for line in (base / "conformance-run.jsonl").read_bytes().splitlines():
            record = orjson.loads(line)
            for key, value in record["data"].items():
                out.metrics.setdefault(key, []).append(
                    (record["step"], float("nan") if value is None else value))
        tables = base / "conformance-run.tables.jsonl"
        if tables.exists():
            for line in tables.read_bytes().splitlines():
                record = orjson.loads(line)
                out.tables.setdefault(record["key"], []).append((record["step"], record["rows"]))
        histograms = base / "conformance-run.histograms.jsonl"
        if histograms.exists():
            for line in histograms.read_bytes().splitlines():
                record = orjson.loads(line)
                out.histograms.setdefault(record["key"], []).append(
                    (record["step"], record["counts"]))
        artifacts = base / "conformance-run.artifacts.jsonl"
        if artifacts.exists():
            for line in artifacts.read_bytes().splitlines():
                record = orjson.loads(line)
                folder = Path(record["dir"])  # the copies, read back from disk
                files = {p.relative_to(folder).as_posix(): p.stat().st_size
                         for p in folder.rglob("*") if p.is_file()}
                out.artifacts.setdefault(record["name"], []).append((record["step"], files))
        for png in sorted((base / "conformance-run_media").glob("*.png")):
            key, _, rest = png.stem.rpartition("_step")
            step = int(rest.split("_")[0])
            with Image.open(png) as image:
                out.images.setdefault(key.replace("kl_", "kl/", 1), []).append(
                    (step, image.width, image.height))
        config = base / "conformance-run.config.json"
        if config.exists():
            from trackmux.core.normalize import flatten

            out.config = flatten(orjson.loads(config.read_bytes()))
        return out
