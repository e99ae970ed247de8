"""``trackmux show RUN``: config (merged, nested), metric keys (last value, step range),
tables, images, quarantined events and delivery state of one run, read from its spool.
``--key K`` prints one metric's series instead (step, value, time; ``--json``)."""

from __future__ import annotations

from dataclasses import dataclass

import click
import orjson

from trackmux.cli.delivery_reason import last_problems
from trackmux.cli.output import echo
from trackmux.core.configmerge import merge_config
from trackmux.core.errors import SpoolUnreadableError, SpoolUnsafeError
from trackmux.core.events import (
    ArtifactEvent,
    ConfigEvent,
    HistogramEvent,
    ImageEvent,
    MetricsEvent,
    ProvenanceEvent,
    TableEvent,
    TextEvent,
)
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.spool.runs import (
    describe_attempt,
    pruned_words,
    resolve_run,
    stop_words,
    summarize,
)
from trackmux.core.values.intake import input_dropped


@dataclass
class KeyStats:
    first_step: int
    last_step: int
    last_value: float
    count: int


@click.command()
@click.argument("run_arg", metavar="RUN")
@click.option("--dir", "root", type=click.Path(file_okay=False),
              help="Spool root for run ids (default $TRACKMUX_DIR or ./trackmux).")
@click.option("--key", "-k", "key", help="Print this metric's series: step, value, time.")
@click.option("--json", "as_json", is_flag=True, help="With --key: the series as JSON.")
def show(run_arg: str, root: str | None, key: str | None, as_json: bool) -> None:
    """Show what a run's spool holds, or one metric's series (--key)."""
    if as_json and key is None:
        raise click.UsageError("--json prints one metric's series: give --key K")
    try:
        run_dir = resolve_run(run_arg, root)
        summary = summarize(run_dir)
    except (FileNotFoundError, SpoolUnsafeError, SpoolUnreadableError) as exc:
        raise click.UsageError(str(exc)) from None
    if key is not None:
        from trackmux.cli.series import print_series

        print_series(run_dir, key, as_json)
        return
    meta = summary.meta
    echo(f"run {meta.get('project')}/{run_dir.name} ({meta.get('name')}): "
         f"{summary.state}, {summary.events} events")
    if pruned_words(meta):
        echo(f"  {pruned_words(meta)}")
    for line in stop_words(meta):
        echo(f"  {line}")
    metrics: dict[str, KeyStats] = {}
    tables: dict[str, list[int]] = {}
    images: dict[str, list[int]] = {}
    texts: dict[str, list[int]] = {}
    histograms: dict[str, list[int]] = {}
    artifacts: dict[str, list[int]] = {}
    config = None
    provenance: ProvenanceEvent | None = None
    reader = SpoolReader(run_dir)
    try:
        for event in reader.iter_events(skip=frozenset({"samples"})):
            if isinstance(event, MetricsEvent):
                for key, value in event.data.items():
                    stats = metrics.get(key)
                    if stats is None:
                        metrics[key] = KeyStats(event.step, event.step, value, 1)
                    else:
                        stats.first_step = min(stats.first_step, event.step)
                        stats.last_step = max(stats.last_step, event.step)
                        stats.last_value = value
                        stats.count += 1
            elif isinstance(event, TableEvent):
                tables.setdefault(event.key, []).append(event.step)
            elif isinstance(event, ImageEvent):
                images.setdefault(event.key, []).append(event.step)
            elif isinstance(event, TextEvent):
                texts.setdefault(event.key, []).append(event.step)
            elif isinstance(event, HistogramEvent):
                histograms.setdefault(event.key, []).append(event.step)
            elif isinstance(event, ArtifactEvent):
                artifacts.setdefault(event.name, []).append(event.step)
            elif isinstance(event, ConfigEvent):  # each log_config merges, nested
                config = merge_config(config or {}, event.config)
            elif isinstance(event, ProvenanceEvent):  # one per attempt: the latest is shown
                provenance = event
        quarantined = reader.quarantined()
        damage = list(reader.damage.errors)
    finally:
        reader.close()
    echo(f"attempts ({len(summary.attempts)}):")
    for attempt in summary.attempts:
        echo(f"  {describe_attempt(attempt)}")
    if summary.superseded:
        echo(f"  {summary.superseded} events superseded by a rewind (not shown, "
             "not delivered)")
    echo("config:")
    echo("  " + (orjson.dumps(config, option=orjson.OPT_INDENT_2).decode()
                 .replace("\n", "\n  ") if config is not None else "(none)"))
    if provenance is not None:
        from trackmux.provenance.text import lines

        echo(f"provenance (attempt {provenance.data.get('attempt', 1)}):")
        for line in lines(provenance.data, provenance.diff):
            echo(line)
    echo(f"metrics ({_keys(len(metrics))}):")
    for key, stats in sorted(metrics.items()):
        echo(f"  {key}: last {stats.last_value:.6g} at step {stats.last_step}; "
             f"steps {stats.first_step}..{stats.last_step}, {stats.count} points")
    for title, found in (("tables", tables), ("images", images), ("text", texts),
                          ("histograms", histograms), ("artifacts", artifacts)):
        echo(f"{title} ({_keys(len(found))}):")
        for key, steps in sorted(found.items()):
            echo(f"  {key}: {len(steps)} at steps {min(steps)}..{max(steps)}")
    from trackmux.samples.read import Ledger

    try:
        with Ledger(run_dir) as ledger:  # from the small rows: no payload is decoded
            samples = ledger.keys()
    except OSError as exc:  # damage inside the spool is recorded by the Ledger, not raised
        samples = {}
        echo(f"samples: not readable ({exc})")
    if samples:
        echo(f"samples ({_keys(len(samples))}; trackmux samples RUN --key K --step N):")
        for key, steps in samples.items():
            echo(f"  {key}: {len(steps)} at steps {min(steps)}..{max(steps)}")
    echo("delivery:")
    for name in summary.backends:
        acked = summary.delivered.get(name, 0)
        pending = max(0, summary.last_seq - acked)
        remote = summary.remote_ids.get(name)
        count = summary.quarantined.get(name, 0)
        echo(f"  {name}: {'delivered' if not pending else f'{pending} pending'}"
             + (f", {count} quarantined" if count else "")
             + (f", remote run {remote}" if remote else ""))
        if pending and name in (problems := last_problems(run_dir)):
            echo(f"    why: {problems[name]}")
    if quarantined:
        echo(f"quarantined ({len(quarantined)}; refused for good, kept in the spool):")
        for entry in quarantined[:20]:
            what = f"keys {list(entry.keys)} of " if entry.keys else ""
            echo(f"  {entry.backend}: {what}event {entry.seq} ({entry.kind}): "
                 f"{entry.reason}")
    bad_input = input_dropped(meta)
    if bad_input:
        echo(f"bad input dropped at the door ({len(bad_input)} kinds; named once in the "
             "trainer's log, counted):")
        for line in bad_input[:20]:
            echo(f"  {line}")
    if damage:
        echo(f"damage ({len(damage)}):")
        for line in damage[:20]:
            echo(f"  {line}")


def _keys(count: int) -> str:
    return "1 key" if count == 1 else f"{count} keys"
