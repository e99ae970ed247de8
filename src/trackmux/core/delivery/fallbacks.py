"""Core's stand-ins for event kinds a backend cannot show, so no plugin re-implements them.

- a table becomes a markdown table (a text event) for a backend that shows text;
- an image becomes a PNG file in the backend's ``media_dir()`` (plus a text event with
  its path where text is shown);
- an artifact's files are found again (copies in the run folder, referenced files checked
  against their size, mtime and hash; a changed or gone file is left out and reported);
  a backend without artifacts gets a markdown listing of its files as text;
- a histogram becomes summary scalars (``key/mean``, ``key/p05`` ... ``key/p95``, see
  :func:`histogram_metrics`) for a backend that shows metrics;
- provenance (what produced the run) goes into a config-showing backend's config under
  ``_provenance`` (done by the worker, which holds the merged config: see
  :func:`provenance_config`), else becomes a markdown text event ``provenance`` where
  text is shown (:func:`provenance_markdown`);
- a finding of the doctor becomes one line of text (key ``doctor/<rule>``) where text is
  shown, else a metric ``doctor/<rule>`` (1 warning, 2 critical) at its onset step;
- a batch of samples (``log_samples``) becomes a table of the samples the backend's cap
  and policy choose (core/delivery/sample_rows.py), for a backend without "samples";
  conversations (a ``messages`` column) as transcripts, and as markdown text with one
  transcript per sample for a backend with text but no tables;
- anything else the backend cannot show is skipped and reported once, never silently.

Before any of that, a table longer than its cap (the event's ``max_rows``, the backend's
``max_rows`` option, whichever is smaller) is cut to that many rows, chosen evenly over
the table (first and last kept), so every delivery of it shows the same rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from trackmux.core.backends.contract import Backend
from trackmux.core.events import (
    ArtifactEvent,
    Cell,
    Event,
    FindingEvent,
    HistogramEvent,
    ImageEvent,
    MetricsEvent,
    ProvenanceEvent,
    SamplesEvent,
    TableEvent,
    TextEvent,
)
from trackmux.core.values import artifacts
from trackmux.core.values.histogram import summary_scalars

#: a finding as a metric, where no text can be shown (fallbacks.adapt)
SEVERITY_LEVEL = {"info": 0, "warning": 1, "critical": 2}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_MARKDOWN_CELL = 2000


def safe_filename(key: str, max_length: int = 120) -> str:
    """A file name derived from a key that cannot leave its directory (no ``/``, no ``..``)."""
    name = _UNSAFE.sub("_", key).strip("._") or "key"
    if len(name) > max_length:
        name = name[:max_length - 9] + "_" + hashlib.sha1(key.encode()).hexdigest()[:8]
    return name


# File systems allow 255 bytes per name; keep room for suffixes (".tables.jsonl",
# "-<run id>.jsonl", "_media").
MAX_COMPONENT_BYTES = 200


def path_component(name: str) -> str:
    """``name`` as one directory level: kept as written (verl does) unless it could leave
    its directory (empty, ``.``, ``..``, a separator or NUL), then made safe; a name over
    ``MAX_COMPONENT_BYTES`` is cut and given a hash of the whole name (stays unique)."""
    if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        name = safe_filename(name, MAX_COMPONENT_BYTES)
    encoded = name.encode("utf-8", "surrogatepass")
    if len(encoded) > MAX_COMPONENT_BYTES:
        digest = hashlib.sha1(encoded).hexdigest()[:10]
        head = encoded[:MAX_COMPONENT_BYTES - 11].decode("utf-8", "ignore")
        name = f"{head}-{digest}"
    return name


def contained(directory: Path, name: str) -> Path:
    """``directory / name``, refusing any result outside ``directory``."""
    target = (directory / name).resolve()
    if directory.resolve() not in target.parents:
        raise ValueError(f"refusing to write {name!r} outside {directory}")
    return target


def _markdown_cell(value: Cell) -> str:
    text = "" if value is None else str(value)
    if len(text) > MAX_MARKDOWN_CELL:
        text = text[:MAX_MARKDOWN_CELL] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "<br>")


def table_to_markdown(event: TableEvent) -> str:
    header = "| " + " | ".join(_markdown_cell(c) for c in event.columns) + " |"
    rule = "|" + "|".join("---" for _ in event.columns) + "|"
    body = ["| " + " | ".join(_markdown_cell(c) for c in row) + " |" for row in event.rows]
    return "\n".join([header, rule, *body])


def image_to_file(event: ImageEvent, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(event.png).hexdigest()[:12]
    path = contained(directory, f"{safe_filename(event.key)}_step{event.step}_{digest}.png")
    if not path.exists():
        tmp = path.with_suffix(".png.tmp")
        tmp.write_bytes(event.png)
        tmp.replace(path)
    return path


def histogram_metrics(event: HistogramEvent) -> MetricsEvent:
    """The summary scalars of a histogram at its own step (names in docs/values.md)."""
    stats = {"mean": event.mean, "std": event.std, "min": event.min, "max": event.max}
    data = summary_scalars(event.key, event.counts, event.edges, event.count, stats,
                           event.nonfinite)
    return MetricsEvent(data, event.step, event.time, event.seq)


#: the config key a backend without native provenance finds it under
PROVENANCE_CONFIG_KEY = "_provenance"
#: the most diff text the markdown fallback shows (the spool keeps the capped diff)
MAX_MARKDOWN_DIFF = 20_000


def provenance_config(event: ProvenanceEvent) -> dict[str, object]:
    """The config keys a backend without native provenance gets: the data, not the diff."""
    return {PROVENANCE_CONFIG_KEY: event.data}


def provenance_markdown(event: ProvenanceEvent) -> str:
    """Provenance as markdown: its JSON, then the uncommitted diff (cut to 20 kB)."""
    import orjson

    text = "```json\n" + orjson.dumps(event.data, option=orjson.OPT_INDENT_2
                                       | orjson.OPT_SORT_KEYS).decode() + "\n```"
    if event.diff:
        diff = event.diff
        if len(diff) > MAX_MARKDOWN_DIFF:
            diff = diff[:MAX_MARKDOWN_DIFF] + "\n... (cut; see the spool or the file backend)"
        text += "\n\nUncommitted diff:\n\n```diff\n" + diff + "\n```"
    return text


def cap_rows(event: TableEvent, backend_cap: int | None) -> TableEvent:
    """``event`` with at most min(its ``max_rows``, ``backend_cap``) rows, picked evenly
    (deterministic: a redelivery or a later sync shows the same rows)."""
    caps = [c for c in (event.max_rows, backend_cap) if c is not None]
    total = len(event.rows)
    if not caps or total <= min(caps):
        return event
    keep = min(caps)
    stride = (total - 1) / max(keep - 1, 1)  # >= 1 since keep < total: picks are distinct
    rows = tuple(event.rows[round(i * stride)] for i in range(keep))
    return TableEvent(event.key, event.columns, rows, event.step, event.time, event.seq,
                      event.max_rows)


def _chosen_rows(event: SamplesEvent, backend: Backend) -> list[int]:
    from trackmux.core.delivery import sample_rows

    caps = [c for c in (event.max_rows, getattr(backend, "sample_cap", 64)) if c is not None]
    policy, seed = sample_rows.check_policy(
        {"sample_policy": getattr(backend, "sample_policy", "spread"),
         "sample_seed": getattr(backend, "sample_seed", 0)}, backend.name)
    return sample_rows.select(event, min(caps) if caps else None, policy, seed)


def samples_table(event: SamplesEvent, backend: Backend) -> TableEvent:
    """The samples ``backend`` shows of ``event``, as a table (issue 23)."""
    from trackmux.core.delivery import sample_rows

    return sample_rows.to_table(event, _chosen_rows(event, backend))


def conversations_text(event: SamplesEvent, backend: Backend) -> TextEvent:
    """The conversations ``backend`` shows of ``event``, as markdown text (a backend with
    text but no tables: tensorboard), one transcript per chosen sample."""
    from trackmux.core.delivery import sample_rows

    text = sample_rows.conversations_text(event, _chosen_rows(event, backend))
    return TextEvent(event.key, text, event.step, event.time, event.seq)


def adapt(events: Sequence[Event], backend: Backend,
          report: Callable[[str, str], None], run_dir: Path | None = None) -> list[Event]:
    """The events as ``backend`` can take them: native kinds pass, others fall back.
    ``run_dir`` (the spool's folder) is where artifact copies are found."""
    caps = backend.capabilities
    out: list[Event] = []
    for event in events:
        if (isinstance(event, SamplesEvent) and event.trajectories
                and not caps & {"samples", "table"} and "text" in caps):
            out.append(conversations_text(event, backend))
            continue
        if isinstance(event, SamplesEvent) and "samples" not in caps:
            event = samples_table(event, backend)
        kind = event.kind
        if isinstance(event, TableEvent):
            event = cap_rows(event, backend.table_cap)
        if isinstance(event, ArtifactEvent) and "artifact" in caps:
            found = artifacts.resolve(event, run_dir or Path("."))
            for problem in found.problems:
                report(f"artifact {event.name}: {problem}", problem)
            if found.files:
                out.append(dataclasses.replace(
                    event, files=tuple(f for f, _ in found.files),
                    local=tuple(str(p) for _, p in found.files)))
            continue
        if isinstance(event, ArtifactEvent) and "text" in caps:
            out.append(TextEvent(f"artifacts/{event.name}", artifacts.listing(event),
                                 event.step, event.time, event.seq))
            continue
        if kind in caps:
            out.append(event)
        elif isinstance(event, TableEvent) and "text" in caps:
            out.append(TextEvent(event.key, table_to_markdown(event), event.step, event.time,
                                 event.seq))
        elif isinstance(event, ProvenanceEvent):  # with config: merged into it by the worker
            if "text" in caps and "config" not in caps:
                out.append(TextEvent("provenance", provenance_markdown(event), event.step,
                                     event.time, event.seq))
            elif "config" not in caps:  # with config: merged into it by the worker
                report("no-provenance", "this backend shows neither provenance, config nor "
                       "text; provenance is skipped (it stays in the spool)")
        elif isinstance(event, FindingEvent) and "text" in caps:
            out.append(TextEvent(event.key, event.line(), event.step, event.time, event.seq))
        elif isinstance(event, FindingEvent) and "metrics" in caps:
            out.append(MetricsEvent({event.key: SEVERITY_LEVEL.get(event.severity, 0)},
                                    event.step, event.time, event.seq))
        elif isinstance(event, HistogramEvent) and "metrics" in caps:
            out.append(histogram_metrics(event))
        elif isinstance(event, ImageEvent) and backend.media_dir() is not None:
            media = backend.media_dir()
            assert media is not None
            path = image_to_file(event, media)
            if "text" in caps:
                label = event.caption or event.key
                out.append(TextEvent(event.key, f"![{label}]({path})", event.step, event.time,
                                     event.seq))
        else:
            report(f"no-{kind}", f"this backend cannot show {kind} events; they are skipped "
                   "(they stay in the spool)")
    return out
