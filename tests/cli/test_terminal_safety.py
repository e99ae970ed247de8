"""Logged text never drives the reader's terminal (issue 34.15): every printer (samples,
show, runs, diff, doctor, the console backend) shows escape sequences, control characters
and bidi overrides as visible escapes, through the one helper in core/terminal.py; JSON
output stays valid and decodes to the text as logged."""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import trackmux
from trackmux.cli.main import cli
from trackmux.core.events import FindingEvent, TableEvent, TextEvent
from trackmux.core.terminal import for_terminal
from trackmux.plugins.console import ConsoleBackend

ATTACKS = {
    "osc52 clipboard": "\x1b]52;c;cm0gLXJmIH4=\x07",
    "osc8 link": "\x1b]8;;https://evil.example\x1b\\click me\x1b]8;;\x1b\\",
    "title": "\x1b]0;you have been pwned\x07",
    "backspace": "safe\x08\x08\x08\x08evil",
    "carriage return": "shown\rhidden",
    "csi clear": "\x1b[2J\x1b[Hcleared",
    "c1 csi": "\x9b31mred",
    "c1 osc": "\x9d0;title\x9c",
    "bidi override": "invoice\u202egnp.exe",
    "bidi isolate": "\u2066a\u2069\u200f",
    "del": "x\x7fy",
}
TEXT = "|".join(ATTACKS.values())
BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028,
        0x2029}


def assert_inert(out: str) -> None:
    """No character a terminal acts on: checked by Unicode category, apart from the
    helper's own table."""
    bad = [f"U+{ord(c):04X}" for c in out
           if (unicodedata.category(c) == "Cc" and c not in "\n\t") or ord(c) in BIDI]
    assert bad == [], bad


def test_for_terminal_escapes_each_attack_visibly() -> None:
    for name, attack in ATTACKS.items():
        shown = for_terminal(attack)
        assert_inert(shown)
        assert "\\u" in shown, name
    assert for_terminal("plain text, tab\tand\nnewline é 中") == \
        "plain text, tab\tand\nnewline é 中"
    assert for_terminal("\x1b[31m") == "\\u001b[31m"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("evil")
    run = trackmux.init(project="p", name="exp" + ATTACKS["title"], backends=[], dir=root,
                        config={"prompt_template": TEXT, "lr": 0.1}, provenance=False)
    run.log({"reward\u202e/mean": 1.0}, step=0)
    run.log_samples("rollouts", {"response": [TEXT, "fine"], "reward": [0.0, 1.0],
                                 "note": [ATTACKS["c1 csi"], ATTACKS["osc8 link"]]}, step=0)
    run.log_table("gen\u202e", ["response"], [[TEXT]], step=0)
    # degenerate generations under a key with a bidi override: the doctor quotes the key
    run.log_table("val\u202e/generations", ["response"],
                  [["the same the same " * 40 + ATTACKS["osc52 clipboard"]]] * 4, step=1)
    run.finish(timeout=30)
    return run.dir


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_samples_table_and_json(run_dir: Path) -> None:
    code, out = _cli("samples", str(run_dir), "-k", "rollouts", "-s", "0", "--limit", "0")
    assert code == 0, out
    assert_inert(out)
    assert "\\u001b]52" in out or "\\u001b" in out  # shown, not obeyed
    code, out = _cli("samples", str(run_dir), "-k", "rollouts", "-s", "0", "--json")
    assert code == 0
    assert_inert(out)
    rows = orjson.loads(out)["rows"]
    assert rows[0]["response"] == TEXT and rows[1]["note"] == ATTACKS["osc8 link"]


def test_samples_where_errors_name_columns_inertly(run_dir: Path) -> None:
    code, out = _cli("samples", str(run_dir), "-k", "rollouts", "-s", "0", "--where",
                     "nope > 1")
    assert code == 2 and "unknown column" in out
    assert_inert(out)


def test_show(run_dir: Path) -> None:
    code, out = _cli("show", str(run_dir))
    assert code == 0, out
    assert_inert(out)
    assert "reward\\u202e/mean" in out and "prompt_template" in out


def test_runs_and_diff(run_dir: Path) -> None:
    code, out = _cli("runs", str(run_dir.parent.parent))
    assert code == 0, out
    assert_inert(out)
    assert "exp\\u001b]0;you have been pwned\\u0007" in out
    code, out = _cli("diff", str(run_dir), str(run_dir))
    assert code == 0, out
    assert_inert(out)


def test_doctor_text_and_json(run_dir: Path) -> None:
    code, out = _cli("doctor", str(run_dir))
    assert code == 1 and "degenerate_text" in out, out
    assert_inert(out)
    assert "val\\u202e/generations" in out
    code, out = _cli("doctor", str(run_dir), "--json")
    assert code == 1  # a warning finding
    assert_inert(out)
    found = orjson.loads(out)["findings"]
    assert "val\u202e/generations" in found[0]["keys"]  # JSON decodes to the key as logged


def test_console_backend(capsys: pytest.CaptureFixture[str]) -> None:
    backend = ConsoleBackend({"interval": 0})
    finding: Any = FindingEvent("degenerate_text", "warning", ("val\u202e/generations",),
                                f"row 0 said {TEXT}", 3, 0.0)
    backend.write([TextEvent("notes\u202e", TEXT, 1, 0.0),
                   TableEvent("gen", ("response",), ((TEXT,),), 2, 0.0), finding])
    backend.close("finished")
    out = capsys.readouterr().out
    assert_inert(out)
    assert "notes\\u202e" in out and out.count("\\u001b]52") >= 3
