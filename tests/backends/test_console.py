"""Console backend: verl's line format, rate limiting, tables as text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import trackmux
from trackmux.core.spool.reader import SpoolReader
from trackmux.plugins.console import ConsoleBackend, format_step


def test_line_format_matches_verl_console() -> None:
    line = format_step(10, {"reward/mean": 0.41, "kl/divergence": 0.013, "steps": 3})
    assert line == "step:10 - reward/mean:0.41 - kl/divergence:0.013 - steps:3"


def test_fast_loop_is_rate_limited_but_last_step_printed(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    run = trackmux.init(project="c", backends=["console"], dir=tmp_path,
                        backend_options={"console": {"interval": 3600}})
    for step in range(500):
        run.log({"loss": step / 1000}, step=step)
    run.log_table("val/generations", ["input", "output", "score"],
                  [["2+2", "4", 1.0], ["a|b", "c", 0.0]], step=499)
    run.finish()
    out = capsys.readouterr().out
    step_lines = [line for line in out.splitlines() if line.startswith("step:")]
    assert 2 <= len(step_lines) <= 4, step_lines
    assert step_lines[0].startswith("step:0 - loss:0.0")
    assert any(line.startswith("step:499 - loss:0.499") for line in step_lines)
    assert "| input | output | score |" in out
    assert "| a\\|b | c | 0.0 |" in out


def test_bad_stream_option_names_the_option() -> None:
    with pytest.raises(ValueError, match="stream"):
        ConsoleBackend({"stream": "nowhere"})
    with pytest.raises(ValueError, match="interval"):
        ConsoleBackend({"interval": "often"})
    with pytest.raises(ValueError, match="intervall"):
        ConsoleBackend({"intervall": 1})


def test_unrated_console_prints_every_step(tmp_path: Path, capsys: Any) -> None:
    run = trackmux.init(project="c", backends=["console"], dir=tmp_path,
                        backend_options={"console": {"interval": 0}})
    for step in range(20):
        run.log({"x": step}, step=step)
    run.finish()
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("step:")]
    assert [int(x.split()[0][5:]) for x in lines] == list(range(20))


def test_resume_with_rewind_prints_the_redone_steps_again(tmp_path: Path,
                                                          capsys: Any) -> None:
    """Resume rule (docs/backends/console.md): what was printed stays printed; the resumed
    attempt prints the re-done steps with their new values."""
    options = {"console": {"interval": 0}}
    run = trackmux.init(project="c", backends=["console"], dir=tmp_path, run_id="r",
                        backend_options=options)
    for step in range(1, 8):
        run.log({"x": float(step)}, step=step)
    run.finish()
    first = [x for x in capsys.readouterr().out.splitlines() if x.startswith("step:")]
    assert first[-1] == "step:7 - x:7.0"
    again = trackmux.init(project="c", backends=["console"], dir=tmp_path, run_id="r",
                          resume="must", rewind_to=4, backend_options=options)
    for step in range(5, 10):
        again.log({"x": step + 0.5}, step=step)
    again.finish()
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("step:")]
    assert lines == [f"step:{s} - x:{s + 0.5}" for s in range(5, 10)]


def test_a_huge_table_and_text_print_a_few_rows_and_a_count(tmp_path: Path,
                                                             capsys: Any) -> None:
    """Issue 27: a 100k-row table (or a long text) never floods the terminal: the first rows,
    how many more there are, and where they are kept."""
    run = trackmux.init(project="c", backends=["console"], dir=tmp_path)
    rows = [[i, "answer " * 100, i / 7] for i in range(100_000)]
    run.log_table("rollouts", ["id", "text", "reward"], rows, step=1)
    run.log_text("sample", "\n".join(f"line {i}" for i in range(5000)), step=1)
    run.log_table("small", ["a"], [[1], [2]], step=1, max_rows=1)
    assert run.finish(timeout=30).complete
    out = capsys.readouterr().out
    assert len(out.splitlines()) < 50 and len(out) < 10_000
    assert "[rollouts @ step 1] table: 100000 rows x 3 columns" in out
    assert "| 4 |" in out and "| 5 |" not in out
    assert "... 99995 more rows not printed" in out
    assert "line 19" in out and "line 20\n" not in out and "4980 more lines" in out
    assert "[small @ step 1] table: 1 rows x 1 columns" in out  # max_rows: core chose
    with pytest.raises(ValueError, match="rows"):
        ConsoleBackend({"rows": -1})
    reader = SpoolReader(run.dir)
    table = next(e for e in reader.iter_events() if e.kind == "table")
    reader.close()
    assert len(table.rows) == 100_000  # the spool keeps every row


def test_every_prints_one_of_each_key_per_block_of_steps_and_counts_the_rest(
        tmp_path: Path, capsys: Any) -> None:
    """Option ``every`` (issue 33.17): deterministic, unlike ``interval``; findings always."""
    from trackmux.core.events import FindingEvent, MetricsEvent, TableEvent
    from trackmux.plugins.console import ConsoleBackend

    console = ConsoleBackend({"every": 10, "interval": 0})
    events: list[Any] = []
    for step in range(35):
        events.append(MetricsEvent({"x": float(step)}, step, 0.0))
        events.append(TableEvent("t", ("a",), ((step,),), step, 0.0))
        if step == 17:
            events.append(FindingEvent("stall", "warning", (), "m", 13, 0.0))
    console.write(events)
    console.close("finished")
    out = capsys.readouterr().out.splitlines()
    assert [int(x.split()[0][5:]) for x in out if x.startswith("step:")] == [0, 10, 20, 30, 34]
    assert [x.split(" @ step ")[1].split("]")[0] for x in out if x.startswith("[t @")] == [
        "0", "10", "20", "30"]
    assert sum("[trackmux doctor]" in x for x in out) == 1
    assert out[-1].startswith("[console] one of each key every 10 steps shown; not printed: "
                              "31 table, 30 step lines")
    with pytest.raises(ValueError, match="every"):
        ConsoleBackend({"every": 0})


def test_trajectories_print_their_summary_and_final_turns(tmp_path: Path,
                                                          capsys: Any) -> None:
    """Conversations on the console (issue 37): one line per chosen sample with its turns
    and failed tool calls, and the start of its transcript, at each step."""
    from trajectory_support import KEY, messages

    run = trackmux.init(project="c", backends=["console"], dir=tmp_path,
                        backend_options={"console": {"interval": 0, "sample_rows": 2}})
    for step in (1, 2):
        run.log_samples(KEY, {"messages": [messages(step, i) for i in range(2)],
                              "reward": [0.0, 1.0]}, step=step, strict=True)
    run.finish()
    out = capsys.readouterr().out
    for step in (1, 2):
        assert f"[{KEY} @ step {step}] 2 samples, showing 2" in out
        for i in range(2):
            line = next(x for x in out.splitlines() if x.startswith(f"  #{i} ")
                        and f"step {step} question {i}" in x)
            assert "turns=2" in line and f"tool_errors={i % 2}" in line, line


def test_a_conversation_line_shows_the_user_turn_and_the_last_answer(tmp_path: Path,
                                                                     capsys: Any) -> None:
    """Issue 43 item 13: every conversation opens with the same long system prompt; the
    line shows what tells samples apart (the first user turn, the last assistant turn)."""
    from trajectory_support import KEY, messages

    system = "You are a careful agent. " * 12
    convs = [messages(1, i) for i in range(2)]
    for conv in convs:
        conv[0]["content"] = system
    run = trackmux.init(project="c", backends=["console"], dir=tmp_path,
                        backend_options={"console": {"interval": 0, "sample_rows": 2}})
    run.log_samples(KEY, {"messages": convs, "reward": [0.0, 1.0]}, step=1, strict=True)
    run.finish()
    out = capsys.readouterr().out
    for i in range(2):
        [line] = [x for x in out.splitlines() if x.startswith(f"  #{i} ")]
        assert "careful agent" not in line, line
        assert f"user 'step 1 question {i}" in line, line
        assert f"assistant 'answer {i} at step 1'" in line, line
        assert "turns=2 tool_calls=1" in line, line
