"""TensorBoard folders: every point of every run (checked against tensorboard's own
EventAccumulator), histograms, images, text, exactly once, grown files, damage, --follow."""

from __future__ import annotations

import io
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import orjson
import pytest

pytest.importorskip("tensorboard")
pytest.importorskip("crc32c")

from importhelp import events, meta, series
from tensorboard.backend.event_processing.event_accumulator import (
    EventAccumulator,
)
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary
from tensorboard.plugins.hparams.summary_v2 import hparams_pb
from tensorboard.plugins.scalar.summary_v2 import scalar_pb
from tensorboard.plugins.text.summary_v2 import text_pb
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from trackmux.core.events import FindingEvent, HistogramEvent, ImageEvent, TextEvent
from trackmux.testing.signals import default_sigint

T0 = 1_700_000_000.0


def scalar(writer: EventFileWriter, tag: str, value: float, step: int) -> None:
    writer.add_event(Event(wall_time=T0 + step, step=step, summary=Summary(
        value=[Summary.Value(tag=tag, simple_value=value)])))


def write_scalars(writer: EventFileWriter, steps: range, tags: tuple[str, ...] = ("a", "b")
                  ) -> None:
    for step in steps:
        for i, tag in enumerate(tags):
            scalar(writer, tag, step * 0.5 + i, step)
    writer.flush()


def one_event_file(folder: Path, steps: range) -> tuple[Path, bytearray]:
    """An event file in ``folder`` of the scalar ``a`` at ``steps``: its path and its
    bytes, to damage."""
    writer = EventFileWriter(str(folder))
    write_scalars(writer, steps, ("a",))
    writer.close()
    (path,) = folder.glob("events.out.tfevents*")
    return path, bytearray(path.read_bytes())


def accumulated(folder: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_every_run_below_the_folder_with_every_point(tmp_path: Path, import_into) -> None:
    logs = tmp_path / "logs"
    for name, tags in (("ppo/train", ("loss", "reward")), ("ppo/eval", ("acc",))):
        writer = EventFileWriter(str(logs / name))
        write_scalars(writer, range(300), tags)
        writer.close()
    result = import_into(str(logs))
    assert result.code == 0, result.stderr
    by_name = {meta(r["dir"])["name"]: r for r in result.runs}
    assert set(by_name) == {"ppo/train", "ppo/eval"}
    assert by_name["ppo/train"]["points"] == 600 and by_name["ppo/train"]["steps"] == 300
    for name, run in by_name.items():
        assert series(run["dir"]) == accumulated(logs / name)  # float32 as TensorBoard has it
        times = [e.time for e in events(run["dir"]) if e.kind == "metrics"]
        assert times[:2] == [T0, T0 + 1]  # the source's wall times


def test_histograms_images_text_and_tf2_scalars(tmp_path: Path, import_into) -> None:
    from PIL import Image

    folder = tmp_path / "run"
    writer = EventFileWriter(str(folder))
    png = io.BytesIO()
    Image.new("RGB", (4, 3), (255, 0, 0)).save(png, format="PNG")
    histo = HistogramProto(min=-1.0, max=2.0, num=6, sum=3.0, sum_squares=7.0,
                           bucket_limit=[-2.0, 0.0, 1.0, 2.0, 1e30], bucket=[0, 2, 3, 1, 0])
    writer.add_event(Event(wall_time=T0, step=3, summary=Summary(value=[
        Summary.Value(tag="weights", histo=histo),
        Summary.Value(tag="sample", image=Summary.Image(height=3, width=4, colorspace=3,
                                                        encoded_image_string=png.getvalue())),
    ])))
    for step in range(3):  # TF2: the scalars plugin's tensor, its metadata with the first only
        summary = scalar_pb("tf2/loss", 1.0 / (step + 1))
        if step:
            summary.value[0].ClearField("metadata")
        writer.add_event(Event(wall_time=T0 + step, step=step, summary=summary))
    writer.add_event(Event(wall_time=T0, step=4, summary=text_pb("notes", "hello **tb**")))
    writer.add_event(Event(wall_time=T0, step=0, summary=hparams_pb({"lr": 0.1})))  # skipped
    writer.close()
    result = import_into(str(folder))
    assert result.code == 0, result.stderr
    got = events(result.run["dir"])
    (hist,) = [e for e in got if isinstance(e, HistogramEvent)]
    assert hist.counts == (2, 3, 1) and hist.edges == (-1.0, 0.0, 1.0, 2.0)
    assert hist.count == 6 and hist.mean == 0.5 and hist.step == 3
    (image,) = [e for e in got if isinstance(e, ImageEvent)]
    assert (image.width, image.height, image.png) == (4, 3, png.getvalue())
    (text,) = [e for e in got if isinstance(e, TextEvent)]
    assert text.key == "notes" and text.text == "hello **tb**" and text.step == 4
    third = float(np.float32(1 / 3))  # TF2 scalars are float32 tensors
    assert series(result.run["dir"])["tf2/loss"] == [(0, 1.0), (1, 0.5), (2, third)]


def test_second_import_adds_nothing_and_a_grown_folder_only_its_new_points(
        tmp_path: Path, import_into) -> None:
    folder = tmp_path / "run"
    writer = EventFileWriter(str(folder))
    write_scalars(writer, range(100))
    first = import_into(str(folder)).run
    assert first["points"] == 200
    count = len(events(first["dir"]))
    again = import_into(str(folder)).run
    assert again["run"] == first["run"] and again["new_points"] == 0
    assert len(events(first["dir"])) == count

    write_scalars(writer, range(100, 150))  # the same file grows
    writer.close()
    grown = import_into(str(folder)).run
    assert grown["new_points"] == 100 and grown["points"] == 300
    second = EventFileWriter(str(folder), filename_suffix=".restart")  # a restart: new file
    write_scalars(second, range(150, 160))
    second.close()
    last = import_into(str(folder)).run
    assert last["new_points"] == 20
    got = series(first["dir"])
    assert [s for s, _ in got["a"]] == list(range(160)) == [s for s, _ in got["b"]]


def test_corrupt_record_and_truncated_tail_are_named(tmp_path: Path, import_into) -> None:
    folder = tmp_path / "run"
    path, data = one_event_file(folder, range(50))
    # records: the file_version record, then one per scalar; find step 20's by its offset
    offsets, pos = [], 0
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 8], "little")
        offsets.append(pos)
        pos += 16 + length
    data[offsets[21] + 14] ^= 0xFF  # a flipped bit in step 20's data
    data += data[offsets[5]:offsets[5] + 9]  # a record cut after 9 bytes
    path.write_bytes(bytes(data))
    result = import_into(str(folder))
    assert result.code == 1
    damage = {d["offset"]: d for d in result.run["damage"]}
    assert damage[offsets[21]]["count"] == 1 and "CRC" in damage[offsets[21]]["what"]
    cut = len(data) - 9
    assert "truncated" in damage[cut]["what"] and damage[cut]["file"] == str(path)
    assert [s for s, _ in series(result.run["dir"])["a"]] == [s for s in range(50) if s != 20]
    again = import_into(str(folder))  # named again, nothing doubled
    assert again.code == 1 and again.run["new_points"] == 0 and len(again.run["damage"]) == 2


def test_header_damage_is_skipped_to_the_next_whole_record(tmp_path: Path,
                                                           import_into) -> None:
    folder = tmp_path / "run"
    path, data = one_event_file(folder, range(30))
    first = 16 + int.from_bytes(data[0:8], "little")
    data[first + 2] ^= 0x40  # step 0's length field: its header CRC fails
    path.write_bytes(bytes(data))
    result = import_into(str(folder))
    (damage,) = result.run["damage"]
    assert damage["offset"] == first and "header" in damage["what"]
    assert [s for s, _ in series(result.run["dir"])["a"]] == list(range(1, 30))


def wait_for(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def follow(root: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TRACKMUX_DIR": str(root)}
    return subprocess.Popen([sys.executable, "-m", "trackmux", "import", "--follow", "--json",
                             "--interval", "0.2", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=default_sigint)  # the test stops it with Ctrl-C


def followed_points(root: Path) -> dict[str, list[tuple[int, float]]]:
    runs = list(root.glob("*/*/spool.db"))
    return series(runs[0].parent) if runs else {}


def test_follow_sees_points_appended_to_a_live_run_the_doctor_judges_it_and_to_delivers(
        tmp_path: Path) -> None:
    folder, root = tmp_path / "live", tmp_path / "spools"
    writer = EventFileWriter(str(folder))
    reward = "critic/score/mean"
    for step in range(40):
        scalar(writer, reward, 0.8 + 0.01 * math.sin(step), step)
    writer.flush()
    delivered = tmp_path / "delivered.jsonl"
    proc = follow(root, str(folder), "--to", "file", "-o", f"file.path={delivered}")
    try:
        wait_for(lambda: len(followed_points(root).get(reward, [])) == 40, "the first 40")
        for step in range(40, 70):  # the reward collapses while it is followed
            scalar(writer, reward, 0.02 + 0.01 * math.sin(step), step)
        writer.flush()
        wait_for(lambda: len(followed_points(root).get(reward, [])) == 70, "the new points")
        run_dir = next(root.glob("*/*/spool.db")).parent
        assert meta(run_dir)["state"] == "running"

        def collapse_found() -> bool:
            return any(isinstance(e, FindingEvent) and e.rule == "reward_collapse"
                       for e in events(run_dir))
        wait_for(collapse_found, "the live doctor's reward_collapse")
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        writer.close()
    assert proc.returncode == 0, err.decode()
    (summary,) = [orjson.loads(line) for line in out.splitlines()]
    assert summary["points"] == 70 and summary["damage"] == []
    assert b"reward_collapse" in err and meta(run_dir)["state"] == "finished"
    # delivered live with --to: every point, and the doctor's finding as an alert
    lines = [orjson.loads(x) for x in delivered.read_text().splitlines()]
    assert sum(len(line["data"]) for line in lines) == 70
    findings = tmp_path / "delivered.findings.jsonl"
    assert "reward_collapse" in findings.read_text()
