"""``trackmux import`` of console logs, trainer_state.json, verl's JSONL and CSV: every
point, exactly once, only what is new on a second import, damage named, the doctor."""

from __future__ import annotations

import json
import math
from pathlib import Path

import orjson
from click.testing import CliRunner
from importhelp import events, meta, series

from trackmux.cli.main import cli
from trackmux.core.events import ConfigEvent
from trackmux.testing.signals import default_sigint

RAY = "\x1b[36m(TaskRunner pid=4242)\x1b[0m "


def verl_line(step: int, reward: float) -> str:
    return (f"{RAY}step:{step} - actor/entropy:np.float64({0.9 - step * 0.001!r}) - "
            f"critic/score/mean:{reward!r} - critic/rewards/mean:{reward!r} - "
            f"actor/pg_loss:{'nan' if step == 7 else 0.01} - perf/throughput:inf")


def write_verl_log(path: Path, steps: range, collapse_at: int | None = None) -> None:
    lines = []
    for step in steps:
        reward = 0.8 + 0.02 * math.sin(step) if collapse_at is None or step < collapse_at \
            else 0.02 + 0.01 * math.sin(step)
        lines.append(f"Training Progress: {step}%|##  | {step}/100 [00:01<00:02]\r"
                     + verl_line(step, reward))
        lines.append("\x1b[33mWARNING\x1b[0m some unrelated message with step: words")
    with open(path, "a") as handle:
        handle.write("\n".join(lines) + "\n")


def test_verl_console_log_every_point_once_then_only_new(tmp_path: Path, import_into) -> None:
    log = tmp_path / "train.log"
    write_verl_log(log, range(1, 41))
    first = import_into(str(log))
    assert first.code == 0, first.output + first.stderr
    run = first.run
    assert run["format"] == "console" and run["steps"] == 40 and run["damage"] == []
    assert run["points"] == run["new_points"] == 40 * 5
    got = series(run["dir"])
    assert [s for s, _ in got["critic/score/mean"]] == list(range(1, 41))
    assert got["actor/entropy"][0] == (1, 0.9 - 0.001)  # np.float64(x) read as x
    assert math.isnan(dict(got["actor/pg_loss"])[7])
    assert all(v == math.inf for _, v in got["perf/throughput"])
    before = len(events(run["dir"]))

    again = import_into(str(log))
    assert again.code == 0
    assert again.run["run"] == run["run"] and again.run["new_points"] == 0
    assert again.run["points"] == 200 and len(events(run["dir"])) == before

    write_verl_log(log, range(41, 51))
    grown = import_into(str(log))
    assert grown.run["run"] == run["run"] and grown.run["new_points"] == 50
    assert [s for s, _ in series(run["dir"])["critic/score/mean"]] == list(range(1, 51))


def test_imported_run_records_its_source_and_is_finished(tmp_path: Path, import_into) -> None:
    log = tmp_path / "train.log"
    write_verl_log(log, range(1, 5))
    run = import_into(str(log), "--project", "legacy", "--name", "ppo-7b").run
    info = meta(run["dir"])
    assert info["project"] == "legacy" and info["name"] == "ppo-7b"
    assert info["state"] == "finished" and info["imported"]["format"] == "console"
    (config,) = [e for e in events(run["dir"]) if isinstance(e, ConfigEvent)]
    assert config.config["_import"] == {"format": "console", "source": str(log),
                                        "importer_version": 1}
    listed = CliRunner().invoke(cli, ["runs", str(import_into.root)])
    assert "legacy/" + run["run"] in listed.output and "finished" in listed.output
    again = import_into(str(log)).run  # no --project: the run is found where it is
    assert again["dir"] == run["dir"] and again["new_points"] == 0


def test_cut_line_is_named_and_read_once_it_is_complete(tmp_path: Path, import_into) -> None:
    log = tmp_path / "train.log"
    write_verl_log(log, range(1, 4))
    size = log.stat().st_size
    with open(log, "a") as handle:
        handle.write("step:4 - actor/entropy:0.5 - critic/sco")
    cut = import_into(str(log))
    assert cut.code == 1
    (damage,) = cut.run["damage"]
    assert damage["file"] == str(log.resolve()) and damage["offset"] == size
    assert damage["count"] == 1 and "truncated" in damage["what"]
    assert cut.run["steps"] == 3
    with open(log, "a") as handle:
        handle.write("re/mean:0.7\n")
    done = import_into(str(log))
    assert done.code == 0 and done.run["damage"] == []
    assert series(done.run["dir"])["critic/score/mean"][-1] == (4, 0.7)
    assert done.run["new_points"] == 2


def test_garbled_line_in_the_middle_keeps_its_readable_pairs(tmp_path: Path,
                                                              import_into) -> None:
    log = tmp_path / "train.log"
    log.write_text("step:1 - a:1.0 - b:2.0\nstep:2 - a:1.5 - b:\xff\xfe - c\nstep:3 - a:2.0\n")
    result = import_into(str(log))
    assert result.code == 1
    (damage,) = result.run["damage"]
    assert damage["offset"] == len(b"step:1 - a:1.0 - b:2.0\n") and damage["count"] == 2
    assert series(result.run["dir"])["a"] == [(1, 1.0), (2, 1.5), (3, 2.0)]


def test_transformers_dict_lines(tmp_path: Path, import_into) -> None:
    log = tmp_path / "hf.log"
    rows = [f"{{'loss': {1 / i!r}, 'grad_norm': np.float64({i * 0.1!r}), "
            f"'learning_rate': 5e-06, 'epoch': {i / 10!r}, 'note': 'x'}}" for i in range(1, 6)]
    noise = " 20%|██        | 1/5 [00:01<00:04,  1.00s/it]\r"
    log.write_text("\n".join(noise + row for row in rows)
                   + "\n{'train_runtime': 12.5, 'train_loss': 0.3, 'epoch': 0.5}\n")
    result = import_into(str(log))
    assert result.code == 0, result.stderr
    got = series(result.run["dir"])
    assert got["loss"] == [(i, 1 / i) for i in range(1, 6)]
    assert got["grad_norm"][2] == (3, 3 * 0.1)
    assert got["train_runtime"] == [(6, 12.5)] and "note" not in got


def test_doctor_finds_the_collapse_planted_in_a_console_log(tmp_path: Path,
                                                            import_into) -> None:
    log = tmp_path / "collapse.log"
    write_verl_log(log, range(1, 81), collapse_at=50)
    run = import_into(str(log)).run
    result = CliRunner().invoke(cli, ["doctor", "--json", run["dir"]])
    (report,) = [orjson.loads(line) for line in result.stdout.splitlines()]
    collapse = [f for f in report["findings"] if f["rule"] == "reward_collapse"]
    assert collapse and collapse[0]["step"] >= 50 and result.exit_code == 1


def write_state(folder: Path, entries: int) -> Path:
    """A checkpoint's state as the Trainer writes it: the whole history so far, an eval
    entry after every fifth training entry."""
    folder.mkdir(parents=True, exist_ok=True)
    history: list[dict[str, float]] = []
    for i in range(1, entries + 1):
        history.append({"loss": 2.0 / i, "learning_rate": 1e-5, "epoch": i / 10, "step": i * 10})
        if i % 5 == 0:
            history.append({"eval_loss": 1.0 / i, "epoch": i / 10, "step": i * 10})
    path = folder / "trainer_state.json"
    path.write_text(json.dumps({"global_step": entries * 10, "log_history": history,
                                "train_batch_size": 8, "logging_steps": 10}))
    return path


def test_trainer_state_later_checkpoint_adds_only_its_new_entries(tmp_path: Path,
                                                                  import_into) -> None:
    out = tmp_path / "grpo-out"
    write_state(out / "checkpoint-50", 5)
    first = import_into(str(out)).run
    assert first["format"] == "trainer_state" and first["points"] == 5 * 3 + 2
    write_state(out / "checkpoint-100", 10)
    second = import_into(str(out)).run
    assert second["run"] == first["run"]
    assert second["new_points"] == 5 * 3 + 2 and second["points"] == 2 * (5 * 3 + 2)
    got = series(second["dir"])
    assert [s for s, _ in got["loss"]] == [i * 10 for i in range(1, 11)]
    assert got["eval_loss"] == [(50, 1.0 / 5), (100, 1.0 / 10)]
    configs = [e.config for e in events(second["dir"]) if isinstance(e, ConfigEvent)]
    assert configs[0]["train_batch_size"] == 8 and len(configs) == 1
    assert import_into(str(out)).run["new_points"] == 0


def test_verl_file_logger_jsonl_and_csv(tmp_path: Path, import_into) -> None:
    jsonl = tmp_path / "metrics.jsonl"
    jsonl.write_text("".join(json.dumps({"step": s, "data": {"critic/score/mean": s / 10,
                                                              "val/acc": {"gsm8k": 0.5}}})
                             + "\n" for s in range(1, 6)))
    result = import_into(str(jsonl))
    assert result.code == 0
    got = series(result.run["dir"])
    assert got["critic/score/mean"] == [(s, s / 10) for s in range(1, 6)]
    assert got["val/acc/gsm8k"][0] == (1, 0.5)

    table = tmp_path / "log.csv"
    table.write_text("global_step,loss,lr,tag\n1,0.9,1e-5,a\n2,0.8,1e-5,b\n3,0.7\n4,0.6,1e-5,c\n")
    csv_run = import_into(str(table))
    assert csv_run.code == 1  # the row with 2 cells
    (damage,) = csv_run.run["damage"]
    assert damage["offset"] == len("global_step,loss,lr,tag\n1,0.9,1e-5,a\n2,0.8,1e-5,b\n")
    assert [s for s, _ in series(csv_run.run["dir"])["loss"]] == [1, 2, 4]
    with open(table, "a") as handle:
        handle.write("5,0.5,1e-5,d\n")
    again = import_into(str(table))
    assert again.run["new_points"] == 2 and len(again.run["damage"]) == 1


def test_bad_sources_are_one_line_each_and_exit_non_zero(tmp_path: Path, import_into) -> None:
    log = tmp_path / "ok.log"
    write_verl_log(log, range(1, 3))
    result = import_into(str(tmp_path / "missing.log"), str(log))
    assert result.code == 1 and "Traceback" not in result.stderr
    assert "missing.log: no such file or folder" in result.stderr
    assert result.run["points"] == 10  # the readable source is still imported
    empty = tmp_path / "empty-dir"
    empty.mkdir()
    assert "no TensorBoard event files" in import_into(str(empty)).stderr
    bad = CliRunner().invoke(cli, ["import", "--format", "nope", str(log)])
    assert bad.exit_code == 2 and "--format" in bad.output
    once = CliRunner().invoke(cli, ["import", "--to", "file", str(log)])
    assert once.exit_code == 2 and "trackmux sync" in once.output


def test_follow_of_a_growing_console_log_waits_for_a_cut_line(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time


    log, root = tmp_path / "live.log", tmp_path / "spools"
    log.write_text("step:1 - critic/score/mean:0.5\n")
    proc = subprocess.Popen([sys.executable, "-m", "trackmux", "import", "--follow", "--json",
                             "--doctor", "off", "--interval", "0.1", "--dir", str(root),
                             str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ), preexec_fn=default_sigint)

    def points() -> list[tuple[int, float]]:
        found = list(root.glob("*/*/spool.db"))
        return series(found[0].parent).get("critic/score/mean", []) if found else []

    def wait_for(count: int) -> None:
        deadline = time.monotonic() + 60
        while len(points()) < count:
            assert time.monotonic() < deadline, f"timed out waiting for {count} points"
            time.sleep(0.05)

    try:
        wait_for(1)
        with open(log, "a") as handle:  # a line written in two parts, as a pipe may
            handle.write("step:2 - critic/score/mean:0.6\nstep:3 - critic/score/mean:0.")
        wait_for(2)
        with open(log, "a") as handle:
            handle.write("7\n")
        wait_for(3)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert points() == [(1, 0.5), (2, 0.6), (3, 0.7)]
    (summary,) = [orjson.loads(line) for line in out.splitlines()]
    assert summary["damage"] == [] and meta(summary["dir"])["state"] == "finished"
