"""A spool file truncated at random offsets or with random bytes flipped: never a crash,
everything intact is recovered unchanged, and the damage is reported.

Every trial opens the damaged copy with SpoolReader, then delivers it to the file backend
with the real delivery worker. Recovered and delivered events must be a subset of what was
logged, byte for byte (the row CRC covers seq, kind, step, time and body; image blobs are
checked against their hash), and any loss must show up in ``SpoolReader.damage``.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from _reliability import file_lines, trackmux_cli

import trackmux
from trackmux.core.delivery.sync import deliver
from trackmux.core.events import Event, MetricsEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.plugins.file import FileBackend

TRIALS = 160
STEPS = 400


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, Event]]:
    """A finished run of metrics, tables, images and a config, and its events by seq."""
    root = tmp_path_factory.mktemp("damage")
    run = trackmux.init(project="dmg", name="dmg", backends=[], dir=root,
                        config={"lr": 1e-3, "model": {"name": "qwen"}})
    for step in range(STEPS):
        run.log({"loss": 1.0 / (step + 1), "x": step}, step=step)
        if step % 40 == 0:
            run.log_table("samples", ["prompt", "reward"], [["p" * 50, step]], step=step)
        if step % 100 == 0:
            run.log_image("img", np.full((16, 16, 3), step % 255, dtype=np.uint8), step=step)
    assert run.finish(timeout=30).complete
    assert isinstance(run, trackmux.Run)
    reader = SpoolReader(run.dir)
    events = {e.seq: e for e in reader.iter_events()}
    assert not reader.damage
    reader.close()
    return run.dir, events


def _damage(path: Path, rng: random.Random, trial: int) -> str:
    data = bytearray(path.read_bytes())
    if trial % 2:
        cut = rng.randrange(0, len(data))
        path.write_bytes(bytes(data[:cut]))
        return f"truncated at {cut} of {len(data)}"
    flips = [rng.randrange(len(data)) for _ in range(rng.randint(1, 20))]
    for offset in flips:
        data[offset] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))
    return f"bits flipped at {flips}"


def _recover(run_dir: Path) -> tuple[list[Event], SpoolReader]:
    reader = SpoolReader(run_dir)
    try:
        events = list(reader.iter_events())
        reader.meta()
        reader.cursors()
        reader.count()
    finally:
        reader.close()
    return events, reader


def test_random_truncation_and_bit_flips_never_crash_and_lose_only_what_is_reported(
        original: tuple[Path, dict[int, Event]], tmp_path: Path) -> None:
    source, events = original
    metrics_by_step = {e.step: e.data for e in events.values() if isinstance(e, MetricsEvent)}
    rng = random.Random(1234)
    lossy = 0
    for trial in range(TRIALS):
        run_dir = tmp_path / f"c{trial}"
        shutil.copytree(source, run_dir)
        how = _damage(run_dir / "spool.db", rng, trial)
        recovered, reader = _recover(run_dir)
        changed = [e for e in recovered if events.get(e.seq) != e]
        assert not changed, f"trial {trial} ({how}): damaged events passed as intact"
        if len(recovered) < len(events):
            lossy += 1
            assert reader.damage, f"trial {trial} ({how}): events lost silently"
            # No count bound against bad_rows: a flipped seq bit makes a phantom bad row,
            # and a row that failed in a page read can be salvaged row by row afterwards
            # (then it is both "bad" and recovered, intact). What must hold: nothing twice.
            seqs = [e.seq for e in recovered]
            assert len(seqs) == len(set(seqs)), f"trial {trial} ({how}): an event twice"
        out = run_dir / "out.jsonl"
        result = deliver(run_dir, {"file": lambda out=out: FileBackend({"path": str(out)})},
                         timeout=30)
        crashed = [p.message for p in result.problems if p.kind == "worker"]
        assert not crashed, f"trial {trial} ({how}): the reader raised into the worker"
        delivered = file_lines(out)
        for line in delivered:
            assert metrics_by_step.get(line["step"]) == line["data"], f"trial {trial} ({how})"
        assert len({line["step"] for line in delivered}) == len(delivered), "a duplicate"
        if len(delivered) < len(metrics_by_step):
            assert result.damage or result.problems, f"trial {trial} ({how}): silent loss"
    assert lossy > TRIALS // 2  # the damage was real in most trials


def test_flipped_step_or_time_is_caught_by_the_row_crc(
        original: tuple[Path, dict[int, Event]], tmp_path: Path) -> None:
    """Damage outside the JSON body (step, time, seq) is detected, not delivered."""
    source, events = original
    run_dir = tmp_path / "run"
    shutil.copytree(source, run_dir)
    conn = sqlite3.connect(run_dir / "spool.db")
    conn.execute("UPDATE events SET step = step + 1 WHERE seq = 10")
    conn.execute("UPDATE events SET time = time + 1 WHERE seq = 20")
    conn.execute("UPDATE events SET seq = 100000 WHERE seq = 30")
    conn.commit()
    conn.close()
    recovered, reader = _recover(run_dir)
    assert sorted(reader.damage.bad_rows) == [10, 20, 100000]
    assert {e.seq for e in recovered} == set(events) - {10, 20, 30}


def test_leaf_page_linked_twice_yields_each_event_once(
        original: tuple[Path, dict[int, Event]], tmp_path: Path) -> None:
    """An interior page whose two child pointers name the same leaf: SQLite walks that
    leaf twice and returns its rows again, CRC-intact. Each event must come once, and
    the leaf no pointer reaches any more must count as damage."""
    source, events = original
    run_dir = tmp_path / "run"
    shutil.copytree(source, run_dir)
    spool = run_dir / "spool.db"
    with sqlite3.connect(spool) as conn:
        (interior,), = conn.execute("SELECT pageno FROM dbstat WHERE name = 'events' AND "
                                    "pagetype = 'internal' ORDER BY pageno LIMIT 1")
    data = bytearray(spool.read_bytes())
    page = (interior - 1) * 4096 + (100 if interior == 1 else 0)
    assert data[page] == 0x05  # an interior table b-tree page
    assert int.from_bytes(data[page + 3:page + 5], "big") >= 2, "too few leaves to relink"
    first, second = (int.from_bytes(data[page + 12 + 2 * i:page + 14 + 2 * i], "big")
                     for i in (0, 1))
    base = (interior - 1) * 4096
    data[base + second:base + second + 4] = data[base + first:base + first + 4]
    spool.write_bytes(bytes(data))

    recovered, reader = _recover(run_dir)
    seqs = [e.seq for e in recovered]
    assert len(seqs) == len(set(seqs)), "an event twice"
    assert all(events[e.seq] == e for e in recovered)
    assert len(recovered) < len(events)  # the unlinked leaf's rows are gone
    assert reader.damage, "the lost leaf went unreported"
    out = tmp_path / "out.jsonl"
    deliver(run_dir, {"file": lambda: FileBackend({"path": str(out)})}, timeout=30)
    steps = [line["step"] for line in file_lines(out)]
    assert len(steps) == len(set(steps)), "a step delivered twice"


def test_damaged_image_blob_is_detected(original: tuple[Path, dict[int, Event]],
                                        tmp_path: Path) -> None:
    source, events = original
    run_dir = tmp_path / "run"
    shutil.copytree(source, run_dir)
    conn = sqlite3.connect(run_dir / "spool.db")
    (digest, data), = conn.execute("SELECT hash, data FROM blobs LIMIT 1").fetchall()
    conn.execute("UPDATE blobs SET data = ? WHERE hash = ?", (data[:-1] + b"\0", digest))
    conn.commit()
    conn.close()
    recovered, reader = _recover(run_dir)
    assert reader.damage.bad_rows
    assert all(e.kind != "image" or e.png != data[:-1] + b"\0" for e in recovered)
    assert len(recovered) + len(reader.damage.bad_rows) == len(events)


@pytest.mark.parametrize("how", ["zeroed page", "truncated"])
def test_cli_reports_damage_in_sync_show_and_runs(
        original: tuple[Path, dict[int, Event]], tmp_path: Path, how: str) -> None:
    source, _ = original
    run_dir = tmp_path / "runs" / "dmg" / source.name
    shutil.copytree(source, run_dir)
    spool = run_dir / "spool.db"
    data = bytearray(spool.read_bytes())
    if how == "truncated":
        data = data[: len(data) * 2 // 3]
    else:  # a leaf page in the middle of the events table (found, not guessed: the
        # spool's other tables shift the layout)
        with sqlite3.connect(spool) as conn:
            leaves = [n for (n,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'events' AND pagetype = 'leaf' "
                "ORDER BY pageno")]
        data = bytearray(spool.read_bytes())
        page = (leaves[len(leaves) // 2] - 1) * 4096
        data[page:page + 4096] = bytes(4096)
    spool.write_bytes(bytes(data))
    out = tmp_path / "out.jsonl"
    synced = trackmux_cli("sync", str(run_dir), "--to", "file", "-o", f"file.path={out}",
                          "--timeout", "20", "--no-progress")
    assert "Traceback" not in synced.stderr, synced.stderr
    if how == "truncated":  # SQLite reads nothing of a cut file: said, exit 2 (issue 34.10)
        for result in (synced, trackmux_cli("show", str(run_dir))):
            assert result.returncode == 2 and "cannot be read" in result.stderr, result.stderr
        listed = trackmux_cli("runs", str(tmp_path / "runs"))
        assert listed.returncode == 0 and "damage:" in listed.stdout, listed.stderr
        return
    assert "spool damage" in synced.stderr, synced.stderr
    delivered = file_lines(out)
    assert len(delivered) < STEPS
    if how == "zeroed page":
        assert len(delivered) > STEPS // 2, "intact events were not recovered"
    shown = trackmux_cli("show", str(run_dir))
    assert shown.returncode == 0, shown.stderr
    assert "damage (" in shown.stdout
    listed = trackmux_cli("runs", str(tmp_path / "runs"))
    assert listed.returncode == 0, listed.stderr
    assert "damage:" in listed.stdout


@pytest.mark.parametrize("content", ["empty", "foreign sqlite"])
def test_reading_a_file_that_is_not_a_spool_writes_nothing_into_it(
        tmp_path: Path, content: str) -> None:
    """An empty ``spool.db`` (a writer that died before its schema) or another program's
    SQLite file: every reader says so once and leaves the file as it was (opening it
    read-write in WAL mode would write a header, the spool's schema would add tables)."""
    run_dir = tmp_path / "runs" / "proj" / "r1"
    run_dir.mkdir(parents=True)
    spool = run_dir / "spool.db"
    spool.touch()
    if content == "foreign sqlite":
        with sqlite3.connect(spool) as conn:
            conn.execute("CREATE TABLE notes (x TEXT)")
        conn.close()
    def state() -> tuple[bytes, int, list[str]]:
        return (spool.read_bytes(), spool.stat().st_mtime_ns,
                sorted(p.name for p in run_dir.iterdir()))

    before = state()

    reader = SpoolReader(run_dir)
    assert reader.meta() == {} and reader.read(0, 10).events == []
    assert reader.damage.errors == [
        "no spool tables: empty, half-written or not a trackmux spool"]
    reader.close()
    listed = trackmux_cli("runs", str(tmp_path / "runs"))
    shown = trackmux_cli("show", str(run_dir))
    assert listed.returncode == 0 and "not a trackmux spool" in listed.stdout, listed.stderr
    assert shown.returncode == 2 and "not a trackmux spool" in shown.stderr, shown.stderr

    assert state() == before
