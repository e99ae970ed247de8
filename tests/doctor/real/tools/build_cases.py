"""Turn the raw excerpts beside each case (cases/<id>.txt) into cases/<id>.json.

Run from the repository root: ``python tests/doctor/real/tools/build_cases.py``. The text
files hold the log lines as the public thread or file shows them (comment lines start
with ``#``); this script only parses them, it never edits a number. Metadata that a
reader supplies (source, what the thread said, label, onset) lives in ``MANIFEST`` here.

Formats:
- ``dschat``: DeepSpeed-Chat step 3 console, ``epoch: E|step: S|ppo_ep: P|act_loss: X|...``
  followed by ``average reward score: R``; keys as printed.
- ``trl_dict``: one Python dict per line (HF Trainer console). The dict carries no step,
  so a line's step is its position in the log (1, 2, ...) unless ``steps`` says more.
- ``swift_json``: ms-swift's jsonl lines; the step is the left of ``global_step/max_steps``.
- ``verl``: verl's console ``step:N - key:value - key:value ...``.
A line cut off by the excerpt (no closing brace) loses its last pair, which may be cut.
Only numeric values are kept; strings (times, percentages) are dropped.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES = HERE.parent / "cases"

Series = dict[str, list[list[Any]]]

_NUMBER = r"-?(?:\d+\.?\d*(?:e[-+]?\d+)?|nan|inf)"
_PAIR = re.compile(r"""['"]([^'"]+)['"]\s*:\s*(""" + _NUMBER + r"""|"[^"]*"|'[^']*')""",
                   re.IGNORECASE)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def encode(value: float) -> float | str:
    """JSON has no NaN/inf: they are kept as the strings "nan", "inf", "-inf"."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _pairs(line: str) -> list[tuple[str, str]]:
    pairs = [(m.group(1), m.group(2)) for m in _PAIR.finditer(line)]
    if "}" not in line and pairs:  # cut by the excerpt: its last value may be cut too
        pairs = pairs[:-1]
    return pairs


def _add(series: Series, step: int, key: str, raw: str) -> None:
    value = _number(raw.strip("'\""))
    if value is None or raw[:1] in "'\"":
        return
    series.setdefault(key, []).append([step, encode(value)])


def parse_dschat(text: str) -> Series:
    series: Series = {}
    step: int | None = None
    for line in text.splitlines():
        line = line.strip().lstrip("`")
        if line.startswith("epoch:") and "|step:" in line:
            fields = dict(part.split(":", 1) for part in line.split("|") if ":" in part)
            step = int(fields["step"])
            for key in ("act_loss", "cri_loss", "unsuper_loss"):
                if key in fields:
                    _add(series, step, key, fields[key].strip())
        elif line.startswith("average reward score:") and step is not None:
            _add(series, step, "average reward score", line.split(":", 1)[1].strip())
    return series


def parse_trl_dict(text: str, steps: list[int] | None = None) -> Series:
    series: Series = {}
    lines = [ln for ln in text.splitlines() if ln.strip().startswith("{")]
    for index, line in enumerate(lines):
        step = steps[index] if steps else index + 1
        for key, raw in _pairs(line):
            _add(series, step, key, raw)
    return series


def parse_swift_json(text: str) -> Series:
    series: Series = {}
    for line in text.splitlines():
        if not line.strip().startswith("{"):
            continue
        found = re.search(r'"global_step/max_steps"\s*:\s*"(\d+)/\d+"', line)
        if not found:
            continue
        step = int(found.group(1))
        for key, raw in _pairs(line):
            if key != "global_step/max_steps":
                _add(series, step, key, raw)
    return series


def parse_verl(text: str) -> Series:
    series: Series = {}
    for line in text.splitlines():
        found = re.search(r"\bstep:(\d+) - (.*)$", line)
        if not found:
            continue
        step = int(found.group(1))
        for part in found.group(2).split(" - "):
            if ":" not in part:
                continue
            key, raw = part.rsplit(":", 1)
            _add(series, step, key.strip(), raw.strip())
    return series


PARSERS = {"dschat": parse_dschat, "swift_json": parse_swift_json, "verl": parse_verl}


def parse(fmt: str, text: str, steps: list[int] | None = None) -> Series:
    if fmt == "trl_dict":
        return parse_trl_dict(text, steps)
    return PARSERS[fmt](text)


MANIFEST: dict[str, dict[str, Any]] = {
    "dschat-586-reward-stuck": dict(
        framework="deepspeed-chat", format="dschat",
        source="https://github.com/deepspeedai/DeepSpeedExamples/issues/586",
        source_title="During the training of Step 3, the reward score of my language model "
                     "collapsed to a stable point",
        thread_label="the reporter: the step-3 reward score 'collapsed to a stable point' "
                     "(about 0.205 for every step shown) and no longer moves",
        label="failure", fault="reward_collapse", onset_step=259,
        notes="console lines of the description and of one later chunk of the same post "
              "(steps 259-264 and 280-285); the log starts after the collapse, so the onset "
              "is the first step shown"),
    "dschat-444-inf-loss": dict(
        framework="deepspeed-chat", format="dschat",
        source="https://github.com/deepspeedai/DeepSpeedExamples/issues/444",
        source_title="Inf Actor Loss and Critic Loss during step 3 training.",
        thread_label="the reporter: step 3 'produces the following error': act_loss and "
                     "cri_loss become inf at step 3184",
        label="failure", fault="nan", onset_step=3184,
        notes="the three console steps of the description's training log (3183-3185)"),
    "openr1-255-format-up-accuracy-down": dict(
        framework="trl", format="trl_dict",
        source="https://github.com/huggingface/open-r1/issues/255",
        source_title="'rewards/accuracy_reward': 0.0",
        thread_label="the reporter: 'rewards/format_reward is not 0, but "
                     "rewards/accuracy_reward becomes 0'; others: 'the format reward "
                     "increases to about 1, meanwhile the accuracy reward drop to 0'",
        label="failure", fault="reward_hacking", onset_step=3,
        notes="TRL GRPOTrainer console dicts of the description; the dicts carry no step, "
              "so the step is the line's position; the third line is cut by the excerpt "
              "(completion_length and later keys are not read)"),
}


def build(case_id: str) -> dict[str, Any]:
    meta = dict(MANIFEST[case_id])
    text = (CASES / f"{case_id}.txt").read_text(encoding="utf-8")
    body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("#"))
    series = parse(meta.pop("format"), body, meta.pop("steps", None))
    case = {"id": case_id, **meta, "raw": f"{case_id}.txt", "series": series}
    return case


def main(argv: list[str]) -> int:
    wanted = argv or sorted(MANIFEST)
    for case_id in wanted:
        case = build(case_id)
        out = CASES / f"{case_id}.json"
        out.write_text(json.dumps(case, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        points = sorted({s for pts in case["series"].values() for s, _ in pts})
        print(f"{case_id}: {len(case['series'])} keys, {len(points)} steps -> {out.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
