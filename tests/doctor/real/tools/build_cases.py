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
- ``csv``: a metrics table with a header row whose first column is the step (a wandb export,
  or verl console lines parsed to CSV); empty cells are skipped, the keys are the header's.
- ``console_kv``: a hand-written loop's console, ``[Step N/M] key=value key=value ...``; the
  keys are the line's own, those in ``_CONSOLE_SKIP`` are not training signals.
- ``handwritten_grpo_dual``: the console diagnostics of a hand-written GRPO loop that logs
  no key names (BoBaCai/grpo-dual); each number is named after the words its line prints
  (``_GRPO_DUAL``), the step is the line's ``@stepN`` / ``[Step N]`` / ``[步骤N]``.
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


Record = tuple[int | None, list[tuple[str, str]]]

_VERL_LINE = re.compile(r"\bstep:(\d+) - (.*)$")


def _records_trl(text: str) -> list[Record]:
    """One record per console dict; the dict carries no step."""
    return [(None, _pairs(ln)) for ln in text.splitlines() if "{'" in ln]


def _records_swift(text: str) -> list[Record]:
    """One record per jsonl line; the step is the left of ``global_step/max_steps``."""
    out: list[Record] = []
    for line in text.splitlines():
        if not line.strip().startswith("{"):
            continue
        found = re.search(r'"global_step/max_steps"\s*:\s*"(\d+)/\d+"', line)
        pairs = [(k, v) for k, v in _pairs(line) if k != "global_step/max_steps"]
        out.append((int(found.group(1)) if found else None, pairs))
    return out


def _records_dschat(text: str) -> list[Record]:
    out: list[Record] = []
    for line in text.splitlines():
        line = line.strip().lstrip("`")
        if line.startswith("epoch:") and "|step:" in line:
            fields = dict(part.split(":", 1) for part in line.split("|") if ":" in part)
            out.append((int(fields["step"]), [(k, fields[k].strip()) for k in
                                              ("act_loss", "cri_loss", "unsuper_loss")
                                              if k in fields]))
        elif line.startswith("average reward score:") and out:
            out[-1][1].append(("average reward score", line.split(":", 1)[1].strip()))
    return out


def _records_step_lines(text: str, line: re.Pattern[str], pair_sep: str | None,
                        kv_sep: str, skip: frozenset[str] = frozenset()) -> list[Record]:
    """One record per console line that carries its step and ``key<kv_sep>value`` pairs:
    ``line`` captures the step (group 1) and the pairs (group 2), which ``pair_sep`` parts
    (None: whitespace). The shared reader of verl's and a hand-written loop's console;
    keys in ``skip`` are not training signals."""
    out: list[Record] = []
    for raw in text.splitlines():
        found = line.search(raw.strip())
        if not found:
            continue
        parts = [p.rpartition(kv_sep) for p in found.group(2).split(pair_sep) if kv_sep in p]
        out.append((int(found.group(1)), [(k.strip(), v.strip()) for k, _, v in parts
                                          if k.strip() not in skip]))
    return out


def _records_verl(text: str) -> list[Record]:
    """verl's console ``step:N - key:value - key:value ...``."""
    return _records_step_lines(text, _VERL_LINE, " - ", ":")


def _records_notebook_table(text: str) -> list[Record]:
    """The HF notebook progress table (``Step | Training Loss | reward | ...``). The table
    shows the logged ``loss`` as "Training Loss" and a key ``a/b`` as "a / b"; the logged
    keys are restored. A row cut by the excerpt loses its last cell."""
    out: list[Record] = []
    header: list[str] = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if cells and cells[0] == "Step":
            header = ["loss" if c == "Training Loss" else c.replace(" / ", "/") for c in cells]
            continue
        if not header or not cells or not cells[0].isdigit():
            continue
        values = cells[1:]
        if len(values) < len(header) - 1:
            values = values[:-1]
        out.append((int(cells[0]), list(zip(header[1:], values, strict=False))))
    return out


def _records_csv(text: str) -> list[Record]:
    """One record per row; the step is the column named in ``_CSV_STEP`` where the header
    has one, else the first column. Columns named in ``_CSV_SKIP`` are not metrics (see the
    case's notes)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    header = lines[0].split(",")
    at = next((header.index(name) for name in _CSV_STEP if name in header), 0)
    out: list[Record] = []
    for line in lines[1:]:
        cells = line.split(",")
        if len(cells) != len(header):
            raise ValueError(f"row of {len(cells)} cells under a header of {len(header)}")
        pairs = [(k, v) for i, (k, v) in enumerate(zip(header, cells, strict=True))
                 if i != at and v != "" and k not in _CSV_SKIP]
        out.append((int(float(cells[at])), pairs))
    return out


_NUM = r"(-?\d+(?:\.\d+)?)"
# (line pattern, the names of its numbers in order). The names are the line's own words:
# "[Fairness诊断] Entropy: mean/min/max", "Before norm: mean/std" (the reward before the
# loop's normalisation), "k/6 组(x%)的reward std<0.01" (the share of groups with a flat
# reward, in percent), "Reward Scale F/H: std | Signal: F/H", "截断率 (truncation rate)
# F/H" in percent.
_GRPO_DUAL: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    (re.compile(r"Before norm: mean=" + _NUM + r", std=" + _NUM),
     ("reward_before_norm_mean", "reward_before_norm_std")),
    (re.compile(r"\[Fairness诊断@step\d+\] Entropy: mean=" + _NUM + r", min=" + _NUM
                + r", max=" + _NUM),
     ("fairness_entropy_mean", "fairness_entropy_min", "fairness_entropy_max")),
    (re.compile(r"\[Step \d+\] \d+/\d+ 组\(" + _NUM + r"%\)的reward std<0\.01"),
     ("flat_reward_groups_pct",)),
    (re.compile(r"\[Reward Scale@step\d+\] F: std=" + _NUM + r", H: std=" + _NUM
                + r" \| Signal: F=" + _NUM + r", H=" + _NUM),
     ("fairness_reward_std", "hallucination_reward_std", "fairness_signal",
      "hallucination_signal")),
    (re.compile(r"截断率过高\(F:" + _NUM + r"%, H:" + _NUM + r"%\)"),
     ("fairness_truncation_pct", "hallucination_truncation_pct")),
]
_GRPO_DUAL_STEP = re.compile(r"@step(\d+)|\[Step (\d+)\]|\[步骤(\d+)\]")


def _records_grpo_dual(text: str) -> list[Record]:
    """One record per step; a line without a step marker ("Before norm") belongs to the
    step of the line before it."""
    by_step: dict[int, list[tuple[str, str]]] = {}
    step: int | None = None
    for line in text.splitlines():
        marker = _GRPO_DUAL_STEP.search(line)
        if marker:
            step = int(next(g for g in marker.groups() if g))
        for pattern, names in _GRPO_DUAL:
            found = pattern.search(line)
            if found and step is not None:
                by_step.setdefault(step, []).extend(zip(names, found.groups(), strict=True))
    return sorted(by_step.items())


_CONSOLE_LINE = re.compile(r"^\[Step (\d+)/\d+\] (.*)$")
_CONSOLE_SKIP = frozenset({"tokens_per_sec"})  # generation throughput, not a training signal


def _records_console_kv(text: str) -> list[Record]:
    """One record per ``[Step N/M] key=value ...`` line (rasbt/reasoning-from-scratch)."""
    return _records_step_lines(text, _CONSOLE_LINE, None, "=", _CONSOLE_SKIP)


# verl-on-gke's parsed_metrics.csv: a validation key mangled to "1"; the CS336 diagnostics
# table (ShibukiZero/assignment5-alignment): two counters, 2 optimizer steps per GRPO step and
# the rollout epoch (always 2).
# and its evaluation table: the arm's two constant clip settings and the evaluation's duration.
_CSV_SKIP = {"1", "optimizer_step", "rollout_epoch", "cliprange_low", "cliprange_high",
             "eval_seconds"}
_CSV_STEP = ("grpo_step",)  # the CS336 table's first columns are the run's name and loss type


READERS = {"trl_dict": _records_trl, "swift_json": _records_swift, "dschat": _records_dschat,
           "verl": _records_verl, "notebook_table": _records_notebook_table,
           "csv": _records_csv, "console_kv": _records_console_kv,
           "handwritten_grpo_dual": _records_grpo_dual}


def parse(fmt: str, text: str, steps: list[int] | None = None) -> Series:
    """The series of ``text``. ``steps`` gives each record's step where the log has none
    (a console dict, a line cut before its step); it must agree with the log where it has one."""
    records = READERS[fmt](text)
    if steps is not None:
        if len(steps) != len(records):
            raise ValueError(f"{len(steps)} steps given for {len(records)} records")
        for (logged, _), given in zip(records, steps, strict=True):
            if logged is not None and logged != given:
                raise ValueError(f"step {given} given where the log says {logged}")
        records = [(given, pairs) for (_, pairs), given in zip(records, steps, strict=True)]
    series: Series = {}
    for step, pairs in records:
        if step is None:
            raise ValueError("a record without a step: give the case's steps")
        for key, raw in pairs:
            value = _number(raw.strip("'\""))
            if value is not None and raw[:1] not in "'\"":
                series.setdefault(key, []).append([step, encode(value)])
    return series


def lr_steps(text: str, start: int = 1) -> list[int | None]:
    """The step of each console dict from its learning rate, for a linear schedule: the
    rate falls by the same amount per logged line, so a gap between two excerpts of one log
    is measured by it. None where a line lost its rate to the excerpt."""
    rates = [dict(p).get("learning_rate") for _, p in _records_trl(text)]
    known = [float(r) for r in rates if r is not None]
    delta = known[0] - known[1]
    return [None if r is None else start + round((known[0] - float(r)) / delta)
            for r in rates]


#: the CS336 assignment 5 runs of xiaofei9289/CS336_Project: one hand-written GRPO loop,
#: four seeds a learning rate, each run's committed metrics.jsonl
_XIAOFEI_SOURCE = ("https://github.com/xiaofei9289/CS336_Project/blob/{commit}/assignment5/"
                   "results/{run}/metrics.jsonl")
#: the author's writeup on the learning rate 3e-5 seeds that collapsed
_XIAOFEI_LR_SAID = (
    "the author's writeup (assignment5/writeup.md, problem grpo_learning_rate): the final "
    "validation answer rewards at learning rate 3e-5 are '53.2%, 4.1%, 4.7%, 49.6%'; 'two "
    "runs fall to about 4%, the final responses are only about 11 tokens, and the format "
    "reward is 100%. After the learning rate is increased, the model more readily collapses "
    "to very short outputs that are format-correct and answer-wrong'; 'the failed seeds'")
#: how a collapsed run's metrics.jsonl was read (the start of its notes)
_XIAOFEI_ROWS = (
    "the committed metrics.jsonl read whole, its 201 lines of steps 0-200 each written as one "
    "CSV row of the line's numbers unedited (step, loss, grad_norm, token_entropy, "
    "train_reward, train_format_reward; every 10 steps val_answer_reward, val_format_reward, "
    "val_response_length); the step -1 line, a boolean and the duplicates train_answer_reward "
    "and val_reward left out; a hand-written loop with its own key names; ")


def _xiaofei(commit: str, run: str, setting: str, said: str, notes: str,
             onset_step: int | None = None) -> dict[str, Any]:
    """A run of the xiaofei9289 CS336 loop (``setting``: its learning rate and seed): with
    an ``onset_step``, one that collapsed to short answers, whose ``notes`` are told after
    how its rows were read and before what dates the onset; else a healthy one."""
    if onset_step is not None:
        notes = (f"{_XIAOFEI_ROWS}{notes}; onset {onset_step}: the first validation at which "
                 f"the mean response is under 25 tokens (the short-answer collapse the author "
                 f"describes)")
    return dict(framework="custom", format="csv",
                source=_XIAOFEI_SOURCE.format(commit=commit, run=run),
                source_title="CS336 assignment 5 (xiaofei9289/CS336_Project): the committed "
                             f"metrics of the hand-written GRPO loop, {setting}",
                thread_label=said,
                label="healthy" if onset_step is None else "failure",
                fault=None if onset_step is None else "reward_hacking",
                onset_step=onset_step, notes=notes)


#: what unsloth's GRPO notebooks say above their training cell (their runs are the healthy
#: references: the vendor publishes each as its example)
_UNSLOTH_SAID = ("the vendor's tutorial run, published as its example: 'The goal is to see "
                 "the `reward` column increase! You might have to wait 150 to 200 steps for "
                 "any action.")
_UNSLOTH_PATIENT = (" You'll probably get 0 reward for the first 100 steps. Please be "
                    "patient!")


def _unsloth_notebook(commit: str, notebook: str, title: str, notes: str, *,
                      patient: bool = True, said_after: str = "") -> dict[str, Any]:
    """A healthy reference: the saved training table of one of unslothai/notebooks' GRPO
    notebooks (``patient``: its text also asks to wait out 100 steps at reward 0;
    ``said_after``: what the corpus adds after the quote)."""
    said = _UNSLOTH_SAID + (_UNSLOTH_PATIENT if patient else "") + "'" + said_after
    return dict(framework="trl", format="notebook_table",
                source=f"https://github.com/unslothai/notebooks/blob/{commit}/nb/{notebook}",
                source_title=f"unslothai/notebooks: {title}", thread_label=said,
                label="healthy", fault=None, onset_step=None, notes=notes)


#: the repaired on-policy rerun of ShibukiZero/assignment5-alignment (artifacts/experiments/
#: main/ch7/): one committed table of train points per experiment, 200 GRPO steps a run
_SHIBUKI_MAIN = ("https://github.com/ShibukiZero/assignment5-alignment/blob/"
                 "40e01e28650467be81a77b65cfbc1c793b8279be/artifacts/experiments/main/ch7/"
                 "{name}/{name}_train_points.csv")


def _shibuki_main(experiment: str, run: str, said: str, notes: str) -> dict[str, Any]:
    """A healthy run of the repaired CS336 rerun (``experiment``: the table's name, ``run``:
    the run's name in its first column); the author's writeup calls every one a success."""
    return dict(framework="custom", format="csv",
                source=_SHIBUKI_MAIN.format(name=experiment),
                source_title="CS336 assignment 5 (ShibukiZero/assignment5-alignment): the "
                             f"committed train points of the hand-written GRPO loop, {run}",
                thread_label=said, label="healthy", fault=None, onset_step=None,
                notes="the committed table read whole, the header and this run's 200 rows "
                      "exactly as committed (run name and setting strings not replayed; keys "
                      "loss, grad_norm, token_entropy, train_answer_accuracy, "
                      "train_format_accuracy; step grpo_step); a hand-written loop with its "
                      "own key names; " + notes)

#: the same repository's off-policy sweep diagnostics (the rerun's broad arms, 40 steps each)
_SHIBUKI_SWEEP = ("https://github.com/ShibukiZero/assignment5-alignment/blob/"
                  "36119d2a17a1776fabc03b492b8086c35bdb03ae/artifacts/experiments/ch7/"
                  "grpo_off_policy_sweep/grpo_off_policy_diagnostics.csv")


#: sherrywan717/ppo-vs-grpo-math-rlvr: TRL 0.24.0 PPO and GRPO runs of 32 updates, each
#: committed as one per-update table under the project's own metric names
_SHERRYWAN = ("https://github.com/sherrywan717/ppo-vs-grpo-math-rlvr/blob/{commit}/reports/"
              "formal_1p5b/metrics/{name}_training_metrics.csv")


MANIFEST: dict[str, dict[str, Any]] = {
    # ---- failures -----------------------------------------------------------------------
    "dschat-586-reward-stuck": dict(
        framework="deepspeed-chat", format="dschat",
        source="https://github.com/deepspeedai/DeepSpeedExamples/issues/586",
        source_title="During the training of Step 3, the reward score of my language model "
                     "collapsed to a stable point",
        thread_label="the reporter: the step-3 reward score 'collapsed to a stable point' "
                     "(about 0.205 at every step shown) and no longer moves",
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
        framework="trl", format="trl_dict", steps="lr",
        source="https://github.com/huggingface/open-r1/issues/255",
        source_title="'rewards/accuracy_reward': 0.0",
        thread_label="the reporter: 'rewards/format_reward is not 0, but "
                     "rewards/accuracy_reward becomes 0'; another user: 'the format reward "
                     "increases to about 1, meanwhile the accuracy reward drop to 0'",
        label="failure", fault="reward_hacking", onset_step=3,
        notes="TRL GRPOTrainer console dicts of the description; a dict has no step, so "
              "the step is the line's position (the learning rate rises by the same amount "
              "per line: warm-up); the third line is cut by the excerpt (completion_length "
              "and later keys are not read)"),
    "swift-4800-kl-jump": dict(
        framework="ms-swift", format="swift_json", steps=[1, 2],
        source="https://github.com/modelscope/ms-swift/issues/4800",
        source_title="GRPO训练结果异常",
        thread_label="the reporter: the loss keeps rising and the reward shows no sign of "
                     "rising, even falls; the log shows kl jumping from 0.0 to 0.536 at the "
                     "second step while the reward falls",
        label="failure", fault="kl_blowup", onset_step=2,
        notes="ms-swift jsonl lines of the description; the second line is cut before its "
              "global_step, which is 2 (logging every step: the first line is 1/3820); only "
              "2 steps could be retrieved from the stored thread"),
    "swift-9261-flat-groups-truncated": dict(
        framework="ms-swift", format="swift_json", steps=[1, 2, 3],
        source="https://github.com/modelscope/ms-swift/issues/9261",
        source_title="[bug] GRPO training step frequency mismatch with generation_batch_size",
        thread_label="the posted log: every completion hits the 4096 limit (clipped_ratio "
                     "1.0), reward 0 with frac_reward_zero_std 1.0 and grad_norm 0.0 from the "
                     "first step",
        label="failure", fault="flat_groups", onset_step=1,
        notes="ms-swift jsonl lines of the description (steps 1-3; the third is cut before "
              "its global_step); the thread is about the step count, the label is what its "
              "log shows"),
    "swift-5890-grad-norm-zero": dict(
        framework="ms-swift", format="swift_json", steps=[9, 10],
        source="https://github.com/modelscope/ms-swift/issues/5890",
        source_title="GRPO训练中的grad norm一直为0 , 但是reward_std和reward都正常",
        thread_label="the reporter: grad_norm is always 0 (and kl 0) while reward and "
                     "reward_std look normal; after upgrading deepspeed grad_norm is non-zero",
        label="failure", fault="other", onset_step=9,
        notes="ms-swift jsonl lines of the description (steps 9-10; the second is cut); the "
              "run logs from step 1, the excerpt starts at 9"),
    "chatglm-49-ppo-nan-loss": dict(
        framework="chatglm-efficient-tuning", format="trl_dict", steps=[1, 2, 3, 4],
        source="https://github.com/hiyouga/ChatGLM-Efficient-Tuning/issues/49",
        source_title="Occurs some loss = nan steps, is it rational?",
        thread_label="the reporter: 'the logging show some loss = nan'",
        label="failure", fault="nan", onset_step=2,
        notes="console dicts of the PPO example (TRL PPOTrainer underneath); a dict has no "
              "step, the step is its position in the posted excerpt"),
    "grpodual-handwritten-entropy-collapse": dict(
        framework="custom", format="handwritten_grpo_dual",
        source="https://github.com/BoBaCai/grpo-dual/blob/"
               "6075bf1f2d7d4b30863963a6a3048b042ca5733c/grpo-dual/src/grpo/Logging",
        source_title="grpo-dual: a hand-written multi-objective GRPO loop (Llama-3-8B, LoRA)",
        thread_label="the loop's own line at every step: 'Entropy: mean=0.032 ... ⚠️ 熵塌陷!' "
                     "(entropy collapse); the repository's HANDOFF.md: '问题1：熵塌陷（Entropy "  # noqa: RUF001
                     "Collapse）... 熵值极低（0.2-0.7，正常应 >1.5）' (entropy extremely low, "  # noqa: RUF001
                     "normally > 1.5) ... 'advantage=0 → 无梯度信号' (no gradient signal)",
        label="failure", fault="entropy_collapse", onset_step=1,
        notes="the committed console diagnostics, steps 1-4 (the whole file), only the lines "
              "that carry numbers; the loop logs no key names, so each number is named after "
              "its line's words (fairness_entropy_mean, reward_before_norm_mean, "
              "flat_reward_groups_pct, ...); the log starts collapsed (fairness entropy "
              "0.03-0.06 from step 1), so the onset is the first step"),
    "rfs-ch06-grpo-no-kl-2048-length-runaway": dict(
        framework="custom", format="csv",
        source="https://github.com/rasbt/reasoning-from-scratch/blob/"
               "1bb6f1ea6489d853c15f44b777590ac83a85024f/ch06/02_rlvr_grpo_scripts_intro/"
               "logs/rlvr_grpo_original_no_kl_metrics.csv",
        source_title="reasoning-from-scratch, chapter 6: the committed metrics of the "
                     "hand-written GRPO script without KL (rlvr_grpo_original_no_kl.py)",
        thread_label="the author, in the README beside the log: 'the original (\"vanilla\") "
                     "GRPO method with these settings is not very stable for more than 50 "
                     "steps, and you may want to consider the improved versions in chapter 7 "
                     "if you want to train for more than 50 steps'; the log itself shows the "
                     "responses running to the 2,048-token cap, the reward at 0 on half the "
                     "steps and the loss growing to -8,310 from about step 190",
        label="failure", fault="length_runaway", onset_step=191,
        notes="the committed metrics file, all 258 rows of the run (columns step, loss, "
              "reward_avg, avg_response_len; total_steps and tokens_per_sec left out, and the "
              "file's last ten rows, two 5-step restarts); a hand-written loop with its own "
              "key names; the onset is where the responses first run to 1,400+ tokens on "
              "consecutive steps with the reward at 0 (191-192) and the loss jumps to -1,210 "
              "(193)"),
    "rfs-ch07-format-reward-hacking": dict(
        framework="custom", format="csv",
        source="https://github.com/rasbt/reasoning-from-scratch/blob/"
               "f57c7e8d1499886b94de2db288fc97726483df91/ch07/02_logs/"
               "7_6_plus_format_reward_metrics.csv",
        source_title="reasoning-from-scratch, chapter 7.6: the committed metrics of the "
                     "hand-written GRPO script with a <think> format reward",
        thread_label="the author (chapter 7.6.2, quoted from the book's published Chinese "
                     "edition): the model improves at first, then gets worse in evaluation "
                     "accuracy while the average reward stays roughly constant; it 'gets too "
                     "much reward from simply following the <think> tag format' and 'does not "
                     "pay enough attention to answer correctness'",
        label="failure", fault="reward_hacking", onset_step=150,
        notes="the committed metrics file, rows 1-300 of 500 (columns step, reward_avg, "
              "format_reward_avg, avg_response_len, adv_std, entropy_avg, eval_acc; loss, "
              "kl_loss, policy_ratio, adv_avg constant, total_steps and tokens_per_sec left "
              "out); eval_acc (MATH-500, every 50 steps) 57.2 at step 100 falls to 33.0 at "
              "150, the onset; from 163 most steps score the format only (format 1.0, reward "
              "0.1); entropy_avg rises from 0.2-0.6 to 2-3 by step 150 and 4-11 later"),
    "rfs-ch07-grpo-no-kl-500-step-instability": dict(
        framework="custom", format="console_kv",
        source="https://github.com/rasbt/reasoning-from-scratch/blob/"
               "7987537d89ff5f64684fc78b93291d957b4774e5/ch07/02_logs/"
               "ch06_rlvr_grpo_original_no_kl_1024_metrics.txt",
        source_title="reasoning-from-scratch, chapter 7.2: the committed console log of the "
                     "chapter-6 hand-written GRPO script without KL, run for 500 steps",
        thread_label="the author (chapter 7.2.2, the English text of ch07.ipynb): 'some later "
                     "decline just before step 400' (response length), loss 'spikes toward the "
                     "end are a bit concerning', MATH-500 accuracy 'does [improve] initially and "
                     "then declines', 'One reason is that the algorithm is not very stable'; "
                     "chapter 7.4.2 calls the clipped-ratio run more stable, with 'no clear drop "
                     "in the average reward or evaluation accuracy around step 400'",
        label="failure", fault="other", onset_step=401,
        notes="the committed console log, all 500 lines as committed (format console_kv; "
              "fields loss, reward_avg, avg_response_len; tokens_per_sec left out); a "
              "hand-written loop with its own key names; reward_avg's 50-step mean 0.645 "
              "(351-400) -> 0.490 (401-450) -> 0.422 (451-500); the loss, within -18.4..10.0 "
              "on steps 1-400 but for -27.5 (346), reaches -23.2 (401), -52.6 (419), -77.2 "
              "(480), -342.5 (492); the onset is the first of these, the author's 'around step "
              "400'; the chapter's MATH-500 accuracies are not in this file"),
    "cs336-grpo-clip-off-policy-late-collapse": dict(
        framework="custom", format="csv",
        source="https://github.com/ShibukiZero/assignment5-alignment/blob/"
               "1a47cd66495a60b845815c90fe1dc3a25f382fea/artifacts/experiments/ch7/"
               "grpo_off_policy_clip_ablation/grpo_off_policy_clip_ablation_diagnostics.csv",
        source_title="CS336 assignment 5 (ShibukiZero/assignment5-alignment): the committed "
                     "diagnostics of the hand-written GRPO loop's off-policy clip ablation",
        thread_label="the repository's experiment log: 'GRPO-Clip (e2/tb256) peaked at 34.38% "
                     "on step 65, then entered a late collapse and finished at 0.00%'; 'Tail-"
                     "train diagnostics for the clipped run show NaN loss, NaN gradient norm, "
                     "and clip_fraction = 1.0'; the summary's status: 'late collapse'",
        label="failure", fault="nan", onset_step=195,
        notes="the committed diagnostics table, the 200 rows of the GRPO-Clip run exactly as "
              "committed (keys token_entropy, grad_norm, loss, clip_fraction, approx_kl, "
              "rollout_avg_response_token_length, rollout_answer_accuracy, "
              "rollout_format_accuracy; step grpo_step; the counters optimizer_step and "
              "rollout_epoch not replayed); a hand-written loop with its own key names; "
              "validation 0.27-0.34 on steps 30-190, 0.0 at 195 and 200; grad_norm 1e3-1e17 on "
              "many steps from 49 and inf on 113, 184, 193, 194 while the validation holds; "
              "grad_norm and loss nan from 195, every metric nan on 196-200 with the rollouts at "
              "the 1,024-token cap and accuracy 0; onset 195, the first nan and the first "
              "evaluation at 0; the same run is the off-policy sweep's focused_e2_tb256, whose "
              "log says it 'hit a numerical blow-up on the second update of the rollout batch'"),
    "cs336-main-grpo-no-clip-eval-collapse": dict(
        framework="custom", format="csv",
        source="https://github.com/ShibukiZero/assignment5-alignment/blob/"
               "4230b48872dfc3d46892fc850a84155e85844dad/artifacts/experiments/main/ch7/"
               "grpo_off_policy_clip_ablation/grpo_off_policy_clip_ablation_eval_points.csv",
        source_title="CS336 assignment 5 (ShibukiZero/assignment5-alignment): the committed "
                     "evaluation series of the hand-written GRPO loop's rerun clip ablation, "
                     "GRPO-No-Clip arm",
        thread_label="the author (writeup.md): 'GRPO-No-Clip only reaches 24.61% at step 125 and "
                     "then collapses completely, finishing at 0.00% answer reward and 0.00% "
                     "format accuracy'; 'The no-clip run's last finite gradient norm is exactly "
                     "0.000'",
        label="failure", fault="reward_collapse", onset_step=137,
        notes="the committed evaluation table, the 41 rows of the GRPO-No-Clip arm exactly as "
              "committed (validation every 5 steps, 0-200: answer_accuracy, format_accuracy, "
              "reward; the arm's constant clip settings and eval_seconds not replayed); an "
              "evaluation-only series, the training log (543,507 characters) was read around the "
              "collapse only; accuracy 0.17-0.25 on 15-135, 0.0 with format 0.0 from 140 to 200; "
              "the onset is 137, the first rollout at reward 0 (grad_norm 0.0 on 137-139), which "
              "the evaluations show first at 140"),
    "exploration-grpo-mixed-cuts-policy-collapse": dict(
        framework="verl", format="csv",
        source="https://github.com/dumbkin31/exploration-in-grpo/blob/"
               "0c1fb9b0b97d4c761db07eb914dda06b336bf5db/results/h200-2026-10-01/training/"
               "math_mixed_cuts-h200-s1/metrics.jsonl",
        source_title="exploration-in-grpo: GRPO vs Mixed-CUTS on Qwen3-1.7B, H200 results "
                     "(results/h200-2026-10-01/README.md and the runs' metrics.jsonl)",
        thread_label="the author (the results README): 'from step ~48 entropy, KL and response "
                     "length exploded and by step 56 the policy produced near-random text "
                     "(entropy 6.8, 94% of responses truncated, validation 0.3%). Standard and "
                     "CUTS rollouts degraded together, so the policy itself collapsed.'",
        label="failure", fault="kl_blowup", onset_step=48,
        notes="the committed metrics.jsonl read whole (349,128 characters, steps 1-61, verl's "
              "keys), each line written as one CSV row of nine keys with numbers unedited "
              "(actor/entropy, actor/kl_loss, actor/ppo_kl, actor/grad_norm, actor/pg_loss, "
              "critic/score/mean, response_length/mean, response_length/clip_ratio, "
              "val-core/math500/reward/mean@4 every 10 steps); actor/ppo_kl at most 0.0062 until "
              "46, 0.0096 (47), 0.045 (49), 0.40 (52), 1.5 (54); kl_loss 0.17 -> 5.6; entropy "
              "0.03 -> 6.75; truncation 0.02-0.06 -> 0.94; score 0.7 -> 0.0015; validation 0.70 "
              "(40) -> 0.635 (50) -> 0.0025 (60); 60 steps, not long by the corpus's measure"),
    "exploration-grpo-grpo-arm-length-kl-runaway": dict(
        framework="verl", format="csv",
        source="https://github.com/dumbkin31/exploration-in-grpo/blob/"
               "0c1fb9b0b97d4c761db07eb914dda06b336bf5db/results/h200-2026-10-01/training/"
               "math_grpo-h200-s1/metrics.jsonl",
        source_title="exploration-in-grpo: GRPO vs Mixed-CUTS on Qwen3-1.7B, H200 results "
                     "(results/h200-2026-10-01/README.md and the runs' metrics.jsonl)",
        thread_label="the author (the results README): 'GRPO followed the same pattern about 15 "
                     "steps later: KL rose steadily, then from step ~64 response length (1,430 "
                     "to 2,600 tokens), truncation (12% to 37%) and KL (0.15 to 1.05) blew up "
                     "and validation fell to 69.5%.'",
        label="failure", fault="length_runaway", onset_step=64,
        notes="the plain GRPO arm beside exploration-grpo-mixed-cuts-policy-collapse; its "
              "committed metrics.jsonl read whole (311,956 characters, 71 lines for steps 1-72; "
              "step 10's row is not in the file, lost per the results README), each line written "
              "as one CSV row of the same nine verl keys with numbers unedited; "
              "response_length/mean 836-1,522 until 62, 1,811 (64), 2,605 (72); truncation "
              "0.18 (64) -> 0.37 (72); kl_loss 0.16 (62) -> 1.05 (72); actor/ppo_kl at most "
              "0.0048 until 62, 0.031 (66), 0.138 (67), 0.55 (72); validation 0.7725 (40) -> "
              "0.695 (70); 71 steps, not long by the corpus's measure"),
    "cs336-xiaofei-grpo-lr3e-5-seed1-short-answer-collapse": _xiaofei(
        "48aa5ab7abcf2c398f075fd0ec90a2895b58c8f0", "lr_3e-5_seed_1",
        "learning rate 3e-5, seed 1", _XIAOFEI_LR_SAID, onset_step=30,
        notes="47,746 characters as stored; reward 0 with grad_norm 0 on steps 0-20 (flat "
              "groups), then train_format_reward 0.43 -> 0.97 (27) and 1.0 on most steps from "
              "34 while train_reward stays 0-0.12; validation: response length 126.6 (20) -> "
              "10.9 (30) and 11-33 to the end, format 0.39 -> 0.89 (30) -> 1.0, answer "
              "0.02-0.07, 0.041 at 200; token_entropy 1.0 -> 0.10-0.4"),
    "cs336-xiaofei-grpo-lr3e-5-seed2-short-answer-collapse": _xiaofei(
        "67a18581e7660a1bc53ab2ef3d143cecec294b16", "lr_3e-5_seed_2",
        "learning rate 3e-5, seed 2", _XIAOFEI_LR_SAID, onset_step=20,
        notes="48,365 characters as stored; reward 0 with grad_norm 0 on steps 0-10, then "
              "train_format_reward 0.41 -> 0.98 (18) and 0.95-1.0 on most steps from 32 while "
              "train_reward stays 0-0.15; validation: response length 98.8 (10) -> 11.4 (20), "
              "19.6 (30), 11.1-11.98 from 40, format 0.46 -> 0.99 (20) -> 1.0, answer "
              "0.03-0.076, 0.047 at 200; token_entropy 1.0-1.5 -> 0.29 (19), 0.3-1.3 after"),
    "cs336-xiaofei-grpo-standard-seed2-short-answer-collapse": _xiaofei(
        "67a18581e7660a1bc53ab2ef3d143cecec294b16", "standard_seed_2",
        "the handout's learning rate 1e-5, seed 2",
        "the author's writeup (assignment5/writeup.md, problems grpo_experiments and "
        "grpo_learning_rate): 'The final validation answer rewards are 47.9%, 45.6%, 12.3%, "
        "and 46.7% ... Seed 2 pulls the mean down'; 'seed 2 stays near 12%'; 'its format "
        "reward is 97.1% and its answer reward is only 12.3%'; 'Seed 2 falls from about 100 "
        "tokens to around 15 and ends at 30.3. It learns the short <answer> format, but often "
        "compresses the reasoning into one line and gets the arithmetic wrong'; 'the failed "
        "run shrinks to 30 tokens'", onset_step=40,
        notes="48,482 characters as stored; the author's grad_norm figures (143 of 200 steps "
              "above 1, median 1.48, maximum 2.81) hold on the rows; reward 0 on most steps to "
              "30, then train_format_reward 0.45 -> 0.92 (48) and 0.93-1.0 from 51 while "
              "train_reward stays 0.02-0.2; validation: response length 97.1 (10) -> 63.5 (20) "
              "-> 30.9 (30) -> 20.3 (40) -> 12.6-14.98 (50-150) -> 30.3 (200), format 0.46 -> "
              "0.92 (40) -> 0.86-0.99, answer 0.02-0.10, 0.123 at 200; the successful seeds of "
              "the same loop reach 0.46-0.48"),
    "cs336-sandyhu-grpo-lr3e-5-diverged": dict(
        framework="custom", format="csv",
        source="https://github.com/sandyhu533/assignment5-alignment/blob/"
               "881cf6746162b809fdf8b21ecc3710e549ef763a/grpo_runs/onpolicy/lr_sweep/lr_3e-5/"
               "2026-06-14_06-50-29/seed_0/metrics.jsonl",
        source_title="CS336 assignment 5 (sandyhu533/assignment5-alignment): the committed "
                     "metrics of the hand-written GRPO loop, learning rate 3e-5",
        thread_label="the author's results check (grpo_runs/summary/hypothesis_check.md): "
                     "'3e-5: diverges -- spikes to 0.34 early, then collapses to ~0; "
                     "format_reward crashes 0.94->0.11, response length blows up to the 512 "
                     "cap, and the run dies at step 80'",
        label="failure", fault="reward_collapse", onset_step=49,
        notes="the committed metrics.jsonl read whole (46,194 characters as stored): each "
              "step's training line and the validation line of the same step written as one "
              "CSV row of their numbers unedited (step, loss, grad_norm, token_entropy, "
              "train_reward, train_format_reward, avg_response_tokens; val_reward, "
              "val_format_reward, val_avg_response_length every 10 steps); duplicates, "
              "constants, memory, timing and batch statistics left out; a hand-written loop "
              "with its own key names; the loop logs 0.0 for loss, grad_norm and "
              "token_entropy on steps whose groups are all flat (1-21, 55, 59, 64-81); "
              "train_reward 0.21-0.48 on 27-48, 0.18 (49), 0.055 (50), 0.0-0.03 from 52; "
              "token_entropy 0.09-0.31 on 29-48, 0.79 (49) -> 2.4 (58); validation 0.34 (30) "
              "-> 0.27 (40) -> 0.042 (50) -> 0.003 (70-80), format 0.90 -> 0.11, length 123 -> "
              "459; avg_response_tokens 100-190 -> 1,226-1,290 from 64; onset 49, the first "
              "step of the fall; 82 steps, not long by the corpus's measure"),
    "cs336-sandyhu-grpo-question-only-never-learns": dict(
        framework="custom", format="csv",
        source="https://github.com/sandyhu533/assignment5-alignment/blob/"
               "881cf6746162b809fdf8b21ecc3710e549ef763a/grpo_runs/onpolicy/prompt/"
               "question_only/2026-06-14_07-07-00/seed_0/metrics.jsonl",
        source_title="CS336 assignment 5 (sandyhu533/assignment5-alignment): the committed "
                     "metrics of the hand-written GRPO loop, question_only prompt",
        thread_label="the author's results check (grpo_runs/summary/hypothesis_check.md): "
                     "'question_only: total failure, 0.000 -- with no format scaffolding the "
                     "model never emits the required answer format, so format_reward stays ~0, "
                     "reward (which is gated on format) stays 0, and length saturates at 512'",
        label="failure", fault="flat_groups", onset_step=1,
        notes="the committed metrics.jsonl read whole (50,133 characters as stored), each "
              "step's training line and the validation line of the same step written as one "
              "CSV row of their numbers unedited (the columns of "
              "cs336-sandyhu-grpo-lr3e-5-diverged); a hand-written loop with its own key "
              "names; train_reward 0.0 and loss, grad_norm and token_entropy logged 0.0 (no "
              "update: every group flat) on 96 of steps 1-100, one correct rollout of 256 on "
              "11, 25, 51 and two on 33; train_format_reward 0.0-0.02; loss and grad_norm NaN "
              "at 51, then avg_response_tokens exactly 64.0 on every step and the validation "
              "length 512.0 (the cap) from 60; validation reward 0.0 on all 11 evaluations; "
              "onset 1: the author's failure is there from the first step"),
    "cs336-sandyhu-grpo-lr3e-6-underfits": dict(
        framework="custom", format="csv",
        source="https://github.com/sandyhu533/assignment5-alignment/blob/"
               "881cf6746162b809fdf8b21ecc3710e549ef763a/grpo_runs/onpolicy/lr_sweep/lr_3e-6/"
               "2026-06-14_06-38-25/seed_0/metrics.jsonl",
        source_title="CS336 assignment 5 (sandyhu533/assignment5-alignment): the committed "
                     "metrics of the hand-written GRPO loop, learning rate 3e-6",
        thread_label="the author's results check (grpo_runs/summary/hypothesis_check.md): "
                     "'3e-6: underfits -- only 0.020 in 100 steps (too slow)'; '1e-5: best -- "
                     "0.479'; the summary README: '3e-6 is simply too slow to learn in 100 "
                     "steps'",
        label="failure", fault="flat_groups", onset_step=1,
        notes="the committed metrics.jsonl read whole (52,917 characters as stored), each "
              "step's training line and the validation line of the same step written as one "
              "CSV row of their numbers unedited (the columns of "
              "cs336-sandyhu-grpo-lr3e-5-diverged); a hand-written loop with its own key "
              "names; every group flat (train_reward 0.0, loss and grad_norm 0.0, "
              "token_entropy NaN: no update) on 65 of the 100 steps, 1-21 among them; one or "
              "at most four correct rollouts of 256 on the others (train_reward 0.0039-0.0156, "
              "grad_norm 0.12-0.73); train_format_reward 0.45-0.64 throughout; validation "
              "0.002 (0-40) -> 0.005 (60-70) -> 0.013 (90) -> 0.020 (100), format 0.98, length "
              "64-69; onset 1: the author's failure (the run never learns in its 100 steps) is "
              "there from the first step, as in cs336-sandyhu-grpo-question-only-never-learns; "
              "the fault is named after what the log shows (flat groups, almost no update), "
              "the author's word for it is 'underfits'"),
    # ---- healthy ------------------------------------------------------------------------
    "cs336-xiaofei-grpo-lr3e-5-seed0-healthy": _xiaofei(
        "67a18581e7660a1bc53ab2ef3d143cecec294b16", "lr_3e-5_seed_0",
        "learning rate 3e-5, seed 0",
        "the author's writeup (assignment5/writeup.md, problem grpo_learning_rate): the final "
        "validation answer rewards at learning rate 3e-5 are '53.2%, 4.1%, 4.7%, 49.6%' (this "
        "run is the 53.2%); 'The best seed at 3e-5 is the highest, at 53.2%, but two runs fall "
        "to about 4%'; 'Successful seeds at all three learning rates land in 36%-53%'",
        "the committed metrics.jsonl read whole (48,997 characters as stored), its 201 lines "
        "of steps 0-200 each written as one CSV row of the line's numbers unedited, the same "
        "columns as its collapsed siblings cs336-xiaofei-grpo-lr3e-5-seed1-/seed2-...; reward 0 "
        "with grad_norm 0 on steps 0-16 and 18, then train_reward 0.03 (20) -> 0.2 (22) -> "
        "0.45-0.53 (26-30) and 0.32-0.73 to the end; validation answer 0.039 (20) -> 0.40 (30) "
        "-> 0.46-0.53 (100-200), format 0.25 (20) -> 0.95 (30), dips to 0.76-0.78 (90, 140), "
        "0.98 at 200; response length 109 -> 179 (20) -> 150 (30-60) -> 248 (90) -> 323 (140) "
        "-> 195 (200); token_entropy 1.0 -> 0.14 (30) and 0.10-0.21 after"),
    "cs336-xiaofei-grpo-lr3e-5-seed3-healthy": _xiaofei(
        "67a18581e7660a1bc53ab2ef3d143cecec294b16", "lr_3e-5_seed_3",
        "learning rate 3e-5, seed 3",
        "the author's writeup (assignment5/writeup.md, problem grpo_learning_rate): the final "
        "validation answer rewards at learning rate 3e-5 are '53.2%, 4.1%, 4.7%, 49.6%' (this "
        "run is the 49.6%); 'two runs fall to about 4%'; 'Successful seeds at all three "
        "learning rates land in 36%-53%'",
        "the committed metrics.jsonl read whole (48,707 characters as stored), its 201 lines "
        "of steps 0-200 each written as one CSV row of the line's numbers unedited, the same "
        "columns as its collapsed siblings cs336-xiaofei-grpo-lr3e-5-seed1-/seed2-...; reward 0 "
        "with grad_norm 0 on steps 0-23 and 25, then train_reward 0.07 (27) -> 0.42 (30) and "
        "0.39-0.72 to the end; validation answer 0.0 (0-20) -> 0.34 (30) -> 0.45 (50) -> "
        "0.48-0.53 (90-200), format 0.29 (20) -> 0.92 (30) -> 0.94-0.99; response length "
        "126 -> 160 (30) -> 233-261 (40-130) -> 161 (170) -> 182 (200); token_entropy 1.0 -> "
        "0.37 (30) -> 0.08-0.17 from 36"),
    # ---- issue 42, session 7: more of xiaofei9289/CS336_Project's labelled runs -----------
    "cs336-xiaofei-grpo-question-only-seed0-healthy": _xiaofei(
        "48aa5ab7abcf2c398f075fd0ec90a2895b58c8f0", "prompt_question_only_seed_0",
        "the question_only prompt, seed 0",
        "the author's writeup (assignment5/writeup.md, problem grpo_prompt_ablation): the final "
        "validation answer rewards of the four question_only seeds are '45.2%, 40.1%, 44.5%, "
        "45.5%' (this run is the 45.2%); '`question_only` also succeeds on all four runs'; 'The "
        "other two prompts have to learn the format from near 0, and they rise clearly only "
        "after step 40'; '`question_only` does not have this short-answer collapse, but the "
        "answers are longer'",
        "the committed metrics.jsonl read whole (49,243 characters as stored), its 201 lines "
        "of steps 0-200 each written as one CSV row of the line's numbers unedited, the same "
        "columns as cs336-xiaofei-grpo-standard-seed0-healthy; no flat start (one correct "
        "rollout in most early batches: train_reward 0-0.04 on 0-53, grad_norm 0.07-1.0); "
        "grad_norm 3.97, 6.38, 4.06 on steps 54-56 (loss -0.19 to -0.30) as train_reward rises "
        "from 0.04 to 0.07, then 0.38-1.28; train_reward 0.09 (60) -> 0.33 (72) -> 0.3-0.7 from "
        "100; validation answer 0.002 (0) -> 0.04 (50) -> 0.24 (70) -> 0.35 (100) -> 0.45 "
        "(200), format 0.25 -> 0.98; response length 234-266 to 70, 205-245 to 170, 294 (180), "
        "273 (190), 226 (200); token_entropy 2.07-2.33 (0-5) -> 1.0 (60) -> 0.29 (100) -> "
        "0.12-0.17"),
    "cs336-xiaofei-grpo-dr-grpo-seed0-healthy": _xiaofei(
        "67a18581e7660a1bc53ab2ef3d143cecec294b16", "dr_grpo_seed_0",
        "Dr. GRPO (no std normalization, constant loss normalization), seed 0",
        "the author's writeup (assignment5/writeup.md, problem "
        "grpo_experiments_variants_on_policy): the final validation answer rewards of the four "
        "Dr. GRPO seeds are '48.4%, 49.3%, 49.6%, 49.4%' (this run is the 48.4%); 'its sample "
        "standard deviation is only 0.5 percentage points, the smallest spread'; 'All 16 "
        "constant-normalization runs fall in 44.8%-51.5%'; 'when a whole step has no such "
        "sequence, the log writes 0 and marks `token_entropy_skipped`'",
        "the committed metrics.jsonl read whole (49,042 characters as stored), its 201 lines "
        "of steps 0-200 each written as one CSV row of the line's numbers unedited, the same "
        "columns as cs336-xiaofei-grpo-standard-seed0-healthy; token_entropy, loss and "
        "grad_norm logged 0.0 on the 23 skipped steps among 0-27 (every group flat), the "
        "entropy 0.63-0.99 on the five steps between them that update; grad_norm 0.008-0.11 "
        "(no std division: a tenth of the standard run's); train_reward 0.004 (17) -> 0.07 (40) "
        "-> 0.29 (50) -> 0.33-0.73 from 53; validation answer 0.001 (0-20) -> 0.09 (40) -> 0.32 "
        "(50) -> 0.46 (100) -> 0.48 (200), format 0.54 -> 0.94; response length 110 -> 79 (40) "
        "-> 131-175; token_entropy 0.8-1.4 (30-40) -> 0.10-0.19 from 100"),
    "cs336-xiaofei-grpo-offpolicy-gspo-seed0-healthy": _xiaofei(
        "48aa5ab7abcf2c398f075fd0ec90a2895b58c8f0", "offpolicy_gspo_seed_0",
        "off-policy GSPO (32 updates a rollout batch, sequence ratio clipped at 3e-4), seed 0",
        "the author's writeup (assignment5/writeup.md, problem grpo_experiments_off_policy): "
        "the final validation answer rewards of the four GSPO seeds are '51.9%, 47.9%, 52.9%, "
        "48.6%' (this run is the 51.9%); 'None of the four off-policy methods repeats the "
        "standard-GRPO seed that falls to 12.3%'; 'GSPO uses `cliprange` 3x10^-4. Over the same "
        "period about 55% of tokens fall outside, and the four seeds are in 52%-56%'",
        "the committed metrics.jsonl read whole (56,490 characters as stored), its 201 lines "
        "of steps 0-200 each written as one CSV row of the line's numbers unedited, the "
        "columns of cs336-xiaofei-grpo-standard-seed0-healthy and clip_fraction; every value "
        "but the rewards 0.0 on the 21 skipped steps among 0-21 (every group flat); "
        "clip_fraction 0.03 (23) -> 0.30 (26) -> 0.33-0.78 from 27 (by design, the author's "
        "'about 55%'); grad_norm 0.16-0.41 (17-25) -> 1.2 (27) -> 0.67-2.09; train_reward 0.004 "
        "(17) -> 0.14 (27) -> 0.22-0.48 (31-59) -> 0.30-0.79; validation answer 0.002 (0-20) -> "
        "0.23 (30) -> 0.35 (50) -> 0.42 (100) -> 0.52 (200), format 0.53 -> 0.96; response "
        "length 110 -> 151 (30) -> 155-223; token_entropy 0.02-0.05 (17-24), 0.19-0.35 (26-45), "
        "0.08-0.27 after"),
    "cs336-xiaofei-grpo-rft-seed0-healthy": _xiaofei(
        "67a18581e7660a1bc53ab2ef3d143cecec294b16", "rft_seed_0",
        "RFT (the 0/1 reward as the advantage, constant loss normalization), seed 0",
        "the author's writeup (assignment5/writeup.md, problem "
        "grpo_experiments_variants_on_policy): the final validation answer rewards of the four "
        "RFT seeds are '47.5%, 44.8%, 48.6%, 46.5%' (this run is the 47.5%); 'RFT has the lowest "
        "mean, but all four runs are in 44.8%-48.6%, still above the standard-GRPO mean'; 'RFT "
        "is the longest and the most spread out, from 145 to 238'",
        "the committed metrics.jsonl read whole (47,895 characters as stored), its 201 lines "
        "of steps 0-200 each written as one CSV row of the line's numbers unedited, the same "
        "columns as cs336-xiaofei-grpo-standard-seed0-healthy; token_entropy, loss and "
        "grad_norm logged 0.0 on the 38 steps among 0-39 without a correct rollout, the "
        "entropy 1.0 and 1.59 on the two between them (22, 36); loss positive (0.0002-0.025) "
        "and grad_norm 0.007-0.24 on every updating step; train_reward 0.008 (40) -> 0.12 (50) "
        "-> 0.51 (60) -> 0.31-0.70; validation answer 0.002 (40) -> 0.17 (50) -> 0.32 (60) -> "
        "0.44 (100) -> 0.47 (200), format 0.54 -> 0.96; response length 110 -> 97 (40) -> "
        "121-139 (60-120) -> 169 (140) -> 202-209 (160-200); token_entropy 0.38-1.47 (40-43) -> "
        "0.19 (60) -> 0.09-0.13 from 100"),
    "cs336-xiaofei-grpo-maxrl-seed0-healthy": _xiaofei(
        "67a18581e7660a1bc53ab2ef3d143cecec294b16", "maxrl_seed_0",
        "MaxRL (the advantage divided by the group's mean reward), seed 0",
        "the author's writeup (assignment5/writeup.md, problem "
        "grpo_experiments_variants_on_policy): the final validation answer rewards of the four "
        "MaxRL seeds are '50.6%, 49.2%, 44.8%, 45.9%' (this run is the 50.6%); 'MaxRL varies "
        "more than the other three variants'; 'All 16 constant-normalization runs fall in "
        "44.8%-51.5%'",
        "the committed metrics.jsonl read whole (48,228 characters as stored), its 201 lines "
        "of steps 0-200 each written as one CSV row of the line's numbers unedited, the same "
        "columns as cs336-xiaofei-grpo-standard-seed0-healthy; token_entropy, loss and "
        "grad_norm logged 0.0 on the 32 skipped steps among 0-34 (every group flat), the "
        "entropy 0.64-1.08 on the three between them (22, 29, 32); grad_norm 0.07-0.38; "
        "train_reward 0.004 (22) -> 0.09 (40) -> 0.32 (50) -> 0.29-0.71; validation answer "
        "0.001 (0-20) -> 0.07 (40) -> 0.29 (50) -> 0.47 (100) -> 0.51 (200), format 0.53 -> "
        "0.93-0.97; response length 108-123 (0-40) -> 150-189; token_entropy 0.6-1.2 (35-43) "
        "-> 0.38 (50) -> 0.11-0.25"),
    "cs336-xiaofei-grpo-three-shot-seed0-healthy": _xiaofei(
        "48aa5ab7abcf2c398f075fd0ec90a2895b58c8f0", "prompt_r1_zero_three_shot_seed_0",
        "the r1_zero_three_shot prompt, seed 0",
        "the author's writeup (assignment5/writeup.md, problem grpo_prompt_ablation): the final "
        "validation answer rewards of the four r1_zero_three_shot seeds are '51.0%, 54.0%, "
        "50.9%, 51.2%' (this run is the 51.0%); 'All four seeds are in 50.9%-54.0%, with no "
        "failed run'; 'At step 0, `r1_zero_three_shot` already has a validation answer reward "
        "of about 20% ... and then continues up to 51%'",
        "the committed metrics.jsonl read whole (49,472 characters as stored), its 201 lines "
        "of steps 0-200 each written as one CSV row of the line's numbers unedited, the same "
        "columns as cs336-xiaofei-grpo-standard-seed0-healthy; no flat start (the prompt "
        "answers 23% at step 0): train_reward 0.23 (0) -> 0.34-0.57 (25-49) -> 0.38-0.75; "
        "validation answer 0.23 (0) -> 0.40 (30) -> 0.49 (90) -> 0.51 (200), format 0.89-0.96 "
        "throughout; response length 111 -> 163 rising steadily; token_entropy 0.68 (0) -> "
        "0.18-0.31 (25-49) -> 0.09-0.18 from 100; grad_norm 0.43-0.89 to 167, 1.0-1.38 on "
        "thirteen of steps 168-199 (the reward unchanged)"),
    "cs336-xiaofei-grpo-lr5e-6-seed0-healthy": _xiaofei(
        "67a18581e7660a1bc53ab2ef3d143cecec294b16", "lr_5e-6_seed_0",
        "learning rate 5e-6, seed 0",
        "the author's writeup (assignment5/writeup.md, problem grpo_learning_rate): at learning "
        "rate 5e-6 the final validation answer rewards are '39.4%, 39.5%, 36.5%, 38.8%' (this "
        "run is the 39.4%); 'all four runs at 5x10^-6 succeed'; 'If the goal is stability, "
        "5x10^-6 is the better choice'",
        "the committed metrics.jsonl read whole (48,058 characters as stored), its 201 lines "
        "of steps 0-200 each written as one CSV row of the line's numbers unedited, the same "
        "columns as cs336-xiaofei-grpo-standard-seed0-healthy; a long flat start: train_reward "
        "0 on most steps to 42 and 0.004-0.008 to 56 (grad_norm 0 on the flat steps, 0.09-0.33 "
        "on the others), token_entropy 0.77-1.12 measured on every step; then train_reward "
        "0.04 (64) -> 0.14 (72) -> 0.26-0.5 (100-124) -> 0.32-0.66; validation answer 0.001 "
        "(0-40) -> 0.018 (60) -> 0.21 (80) -> 0.29 (100) -> 0.39 (180-200), format 0.54 -> "
        "0.93; response length 97-114 to 70 -> 120-146; token_entropy 0.79-1.04 (50-74) -> "
        "0.42-0.77 (75-99) -> 0.17-0.31 from 125; grad_norm 0.5-1.2 from 64"),
    "cs336-xiaofei-grpo-offpolicy-naive-seed0-healthy": _xiaofei(
        "48aa5ab7abcf2c398f075fd0ec90a2895b58c8f0", "offpolicy_naive_seed_0",
        "off-policy naive (32 updates a rollout batch, no importance weighting), seed 0",
        "the author's writeup (assignment5/writeup.md, problem grpo_experiments_off_policy): "
        "the final validation answer rewards of the four naive seeds are '53.9%, 53.7%, 49.0%, "
        "38.9%' (this run is the 53.9%); 'Splitting one large update into 32 small updates, "
        "with no importance weighting, already raises the mean from 38.1% to 48.9%'; 'one of "
        "the four runs falls clearly behind' (the 38.9% seed, not this one)",
        "the committed metrics.jsonl read whole (49,117 characters as stored), its 201 lines "
        "of steps 0-200 each written as one CSV row of the line's numbers unedited, the same "
        "columns as cs336-xiaofei-grpo-standard-seed0-healthy; token_entropy, loss and "
        "grad_norm logged 0.0 on the 21 skipped steps among 0-21 (every group flat); "
        "token_entropy 0.02-0.07 (17-24), 0.1-0.24 (25-39), 0.04-0.15 after (a mean of 32 "
        "updates that counts skipped ones as 0); grad_norm 0.12-0.27 (17-24) -> 1.3-4.4; "
        "train_reward 0.0-0.016 to 24 -> 0.29 (28) -> 0.4-0.75 from 40, with single-step "
        "drops to 0.14 (82), 0.11 (163) and 0.078 (197), the first two with the format reward "
        "at 0.21 and 0.15, the last with it at 0.98; validation answer 0.002 (0-20) -> 0.26 "
        "(30) -> 0.40 (40) -> 0.46-0.54, format 0.54 -> 0.89-0.98; response length 108-114 "
        "(0-20) -> 311 (30) -> 152 (40) -> 180-264"),
    "cs336-xiaofei-grpo-constant-norm-seed0-healthy": _xiaofei(
        "67a18581e7660a1bc53ab2ef3d143cecec294b16", "grpo_constant_seed_0",
        "GRPO_constant (constant loss normalization), seed 0",
        "the author's writeup (assignment5/writeup.md, problem "
        "grpo_experiments_variants_on_policy): the final validation answer rewards of the four "
        "GRPO constant seeds are '49.9%, 51.5%, 49.4%, 47.7%' (this run is the 49.9%); 'The "
        "highest mean is GRPO constant, at 49.6%'; 'All 16 constant-normalization runs fall in "
        "44.8%-51.5%, and none repeats the standard-GRPO seed that falls to 12.3%'",
        "the committed metrics.jsonl read whole (48,292 characters as stored), its 201 lines "
        "of steps 0-200 each written as one CSV row of the line's numbers unedited, the same "
        "columns as cs336-xiaofei-grpo-standard-seed0-healthy; token_entropy, loss and "
        "grad_norm logged 0.0 on the 33 skipped steps among 0-37 (every group flat), the "
        "entropy 0.6-1.08 on the five between them (22, 29, 30, 35, 36); grad_norm 0.018-0.24; "
        "train_reward 0.004 (22) -> 0.035 (40) -> 0.26 (50) -> 0.62 (60) -> 0.38-0.71; "
        "validation answer 0.001 (0-20) -> 0.02 (40) -> 0.23 (50) -> 0.45 (100) -> 0.50 (200), "
        "format 0.53 -> 0.89-0.95; response length 106-122 (0-40) -> 184 (50) -> 146-154; "
        "token_entropy 0.56-0.89 (38-49) -> 0.10-0.2 from 75"),
    "cs336-xiaofei-grpo-no-std-seed0-healthy": _xiaofei(
        "48aa5ab7abcf2c398f075fd0ec90a2895b58c8f0", "try_your_own_seed_0",
        "the author's own estimator (standard GRPO without the std division), seed 0",
        "the author's writeup (assignment5/writeup.md, problem try_your_own): the final "
        "validation answer rewards of the four seeds are '51.3%, 49.0%, 48.0%, 45.9%' (this "
        "run is the 51.3%); 'All four runs fall in 45.9%-51.3%, and none repeats the "
        "standard-GRPO seed that falls to 12.3%'; 'Response length is 141-163 tokens, and it "
        "does not shrink to the 30 tokens of the failed standard-GRPO seed'",
        "the committed metrics.jsonl read whole (48,189 characters as stored), its 201 lines "
        "of steps 0-200 each written as one CSV row of the line's numbers unedited, the same "
        "columns as cs336-xiaofei-grpo-standard-seed0-healthy; token_entropy, loss and "
        "grad_norm logged 0.0 on the 32 skipped steps among 0-34 (every group flat), the "
        "entropy 0.65-1.35 on the three between them (22, 29, 32); grad_norm 0.05-0.39; "
        "train_reward 0.004 (22) -> 0.10 (40) -> 0.33 (50) -> 0.28-0.69 from 50; validation "
        "answer 0.001 (0-20) -> 0.10 (40) -> 0.31 (50) -> 0.44 (100) -> 0.51 (200), format "
        "0.53 -> 0.94; response length 110-140 (0-40) -> 192 (50) -> 153-161; token_entropy "
        "0.59-1.08 (35-42) -> 0.10-0.25 from 75"),
    "cs336-xiaofei-grpo-offpolicy-clip-seed0-healthy": _xiaofei(
        "67a18581e7660a1bc53ab2ef3d143cecec294b16", "offpolicy_clip_seed_0",
        "off-policy GRPO clip (32 updates a rollout batch, token ratio clipped at 0.2), seed 0",
        "the author's writeup (assignment5/writeup.md, problem grpo_experiments_off_policy): "
        "the final validation answer rewards of the four GRPO clip seeds are '53.8%, 54.7%, "
        "54.6%, 50.1%' (this run is the 53.8%); 'GRPO clip uses `cliprange` 0.2. After step 100 "
        "the clip fraction is about 0.9%'; 'None of the four off-policy methods repeats the "
        "standard-GRPO seed that falls to 12.3%'",
        "the committed metrics.jsonl read whole (56,340 characters as stored), its 201 lines "
        "of steps 0-200 each written as one CSV row of the line's numbers unedited, the "
        "columns of cs336-xiaofei-grpo-standard-seed0-healthy and clip_fraction; every value "
        "but the rewards 0.0 on the 23 skipped steps among 0-23 (every group flat); "
        "clip_fraction 0.003-0.02 from 25; grad_norm 0.1-0.16 (22-24) -> 0.8 (25) -> "
        "1.07-4.28; train_reward 0.004 (22) -> 0.30 (30) -> 0.35-0.80 from 50; validation "
        "answer 0.001 (0-20) -> 0.26 (30) -> 0.42 (50) -> 0.51 (100) -> 0.54 (200), format "
        "0.53 -> 0.87 (30) -> 0.92-0.97; response length 108-114 (0-20) -> 134-165; "
        "token_entropy 0.01-0.03 (22-24), 0.1-0.4 (25-49), 0.02-0.1 from 100"),
    "cs336-xiaofei-grpo-offpolicy-noclip-seed0-healthy": _xiaofei(
        "67a18581e7660a1bc53ab2ef3d143cecec294b16", "offpolicy_noclip_seed_0",
        "off-policy noclip (32 updates a rollout batch, unclipped token ratio), seed 0",
        "the author's writeup (assignment5/writeup.md, problem grpo_experiments_off_policy): "
        "the final validation answer rewards of the four noclip seeds are '50.2%, 54.2%, 55.0%, "
        "52.6%' (this run is the 50.2%); 'After adding the unclipped ratio, all four runs are in "
        "50.2%-55.0%, with mean 53.0%'; 'None of the four off-policy methods repeats the "
        "standard-GRPO seed that falls to 12.3%'",
        "the committed metrics.jsonl read whole (49,054 characters as stored), its 201 lines "
        "of steps 0-200 each written as one CSV row of the line's numbers unedited, the same "
        "columns as cs336-xiaofei-grpo-standard-seed0-healthy (this arm logs no clip "
        "fraction); token_entropy, loss and grad_norm logged 0.0 on the 23 skipped steps among "
        "0-23 (every group flat); grad_norm 0.1-0.16 (22-24) -> 2.5-5.9 (26-32) -> 1.45-9.42, "
        "single-step peaks of 7.0 (121) and 9.4 (158) with the reward unchanged; train_reward "
        "0.004 (22) -> 0.23 (26) -> 0.37-0.73 from 50; validation answer 0.001 (0-20) -> 0.33 "
        "(30) -> 0.48 (50) -> 0.51 (150) -> 0.41 (170) -> 0.50 (200), format 0.53 -> "
        "0.85-0.97; response length 109-110 (0-20) -> 134-189, 222 at 100; token_entropy "
        "0.01-0.03 (22-24), 0.06-0.3 (25-49), 0.03-0.09 from 125"),
    "cs336-sandyhu-grpo-standard-seed0-healthy": dict(
        framework="custom", format="csv",
        source="https://github.com/sandyhu533/assignment5-alignment/blob/"
               "881cf6746162b809fdf8b21ecc3710e549ef763a/grpo_runs/onpolicy/standard/"
               "2026-06-14_05-58-54/seed_0/metrics.jsonl",
        source_title="CS336 assignment 5 (sandyhu533/assignment5-alignment): the committed "
                     "metrics of the hand-written GRPO loop, standard run, seed 0",
        thread_label="the author's results check (grpo_runs/summary/hypothesis_check.md): "
                     "'Standard on-policy GRPO -- meets bar ... val_reward rises monotonically "
                     "to 0.479 (avg of 2 seeds) ... Seeds 0/1 agree (0.478 / 0.481)'",
        label="healthy", fault=None, onset_step=None,
        notes="the committed metrics.jsonl read whole (59,021 characters as stored), each "
              "step's training line and the validation line of the same step written as one "
              "CSV row of their numbers unedited (the columns of "
              "cs336-sandyhu-grpo-lr3e-5-diverged); a hand-written loop with its own key "
              "names; token_entropy NaN as committed on steps 1-21 (every group flat, nothing "
              "computed), numbers from 22; reward 0 with loss and grad_norm 0 on 1-21, then "
              "train_reward 0.004 (22) -> 0.14 (36) -> 0.26-0.58 from 45; validation 0.002 "
              "(0-20) -> 0.08 (30) -> 0.36 (40) -> 0.46-0.48 (60-100); response length 68 -> "
              "51 (30) -> 139-151 (50-100); token_entropy 1.0-1.5 (22-37) -> 0.13-0.21 (80-100)"),
    "cs336-sandyhu-grpo-standard-seed1-healthy": dict(
        framework="custom", format="csv",
        source="https://github.com/sandyhu533/assignment5-alignment/blob/"
               "881cf6746162b809fdf8b21ecc3710e549ef763a/grpo_runs/onpolicy/standard/"
               "2026-06-14_05-58-54/seed_1/metrics.jsonl",
        source_title="CS336 assignment 5 (sandyhu533/assignment5-alignment): the committed "
                     "metrics of the hand-written GRPO loop, standard run, seed 1",
        thread_label="the author's results check (grpo_runs/summary/hypothesis_check.md): "
                     "'Standard on-policy GRPO -- meets bar ... val_reward rises monotonically "
                     "to 0.479 (avg of 2 seeds) ... Seeds 0/1 agree (0.478 / 0.481)'",
        label="healthy", fault=None, onset_step=None,
        notes="the committed metrics.jsonl read whole (60,585 characters as stored), each "
              "step's training line and the validation line of the same step written as one "
              "CSV row of their numbers unedited (the columns of "
              "cs336-sandyhu-grpo-lr3e-5-diverged); a hand-written loop with its own key "
              "names; token_entropy NaN as committed on steps 1-9 (every group flat, nothing "
              "computed), numbers from 10; reward 0 with loss and grad_norm 0 on 1-9, then "
              "train_reward 0.004 (10) -> 0.26 (19) -> 0.28-0.63 from 29; validation 0.002 "
              "(0) -> 0.40 (20) -> 0.43-0.45 (30-90) -> 0.48 (100); response length 69 -> "
              "103 (20) -> 122-135 (50-100); token_entropy 0.91 (10) -> 0.35 (30) -> "
              "0.09-0.16 (47-100); grad_norm 0.2-0.9 (10-34), 0.86-1.64 after"),
    "cs336-sandyhu-grpo-dr-grpo-healthy": dict(
        framework="custom", format="csv",
        source="https://github.com/sandyhu533/assignment5-alignment/blob/"
               "e7dd55ad7352bba72030929b9451b25c4d0d6c36/grpo_runs/onpolicy/variants/Dr_GRPO/"
               "2026-06-14_22-07-48/seed_0/metrics.jsonl",
        source_title="CS336 assignment 5 (sandyhu533/assignment5-alignment): the committed "
                     "metrics of the hand-written GRPO loop, Dr. GRPO variant",
        thread_label="the author's results check (grpo_runs/summary/hypothesis_check.md): "
                     "'Dr_GRPO 0.482 ~ GRPO 0.479 > MaxRL 0.467 > GRPO_constant 0.437 > RFT "
                     "0.432. Dr_GRPO matches/edges the baseline -- consistent with the paper's "
                     "claim'",
        label="healthy", fault=None, onset_step=None,
        notes="the committed metrics.jsonl read whole (58,146 characters as stored), each "
              "step's training line and the validation line of the same step written as one "
              "CSV row of their numbers unedited (the columns of "
              "cs336-sandyhu-grpo-lr3e-5-diverged); a hand-written loop with its own key "
              "names; loss, grad_norm and token_entropy logged 0.0 on the flat steps 1-21; no "
              "std or length normalization, so grad_norm is 0.005-0.14 (a tenth of the "
              "standard run's); train_reward 0.004 (22) -> 0.04 (30) -> 0.26 (39) -> "
              "0.24-0.59 from 43; response length 114 -> 49 (29-30) -> 97-141 from 40; "
              "validation 0.002 (0-20) -> 0.097 (30) -> 0.39 (40) -> 0.44-0.48 (50-100); "
              "token_entropy 1.2 (22) -> 0.47 (40) -> 0.09-0.16 (70-100)"),
    "cs336-sandyhu-grpo-rft-healthy": dict(
        framework="custom", format="csv",
        source="https://github.com/sandyhu533/assignment5-alignment/blob/"
               "e7dd55ad7352bba72030929b9451b25c4d0d6c36/grpo_runs/onpolicy/variants/RFT/"
               "2026-06-14_22-26-16/seed_0/metrics.jsonl",
        source_title="CS336 assignment 5 (sandyhu533/assignment5-alignment): the committed "
                     "metrics of the hand-written GRPO loop, RFT variant",
        thread_label="the author's results check (grpo_runs/summary/hypothesis_check.md): "
                     "'RFT 0.432 ... RFT lowest, as expected: it discards all negative-signal "
                     "(incorrect) samples and has the lowest train_reward (0.25)'; 'Verdict: "
                     "matches expectations within single-seed noise'",
        label="healthy", fault=None, onset_step=None,
        notes="the committed metrics.jsonl read whole (58,207 characters as stored), each "
              "step's training line and the validation line of the same step written as one "
              "CSV row of their numbers unedited (the columns of "
              "cs336-sandyhu-grpo-lr3e-5-diverged); a hand-written loop with its own key "
              "names; loss, grad_norm and token_entropy logged 0.0 on the flat steps 1-21; "
              "rejection-sampling fine-tuning (advantage = the 0/1 reward): loss positive "
              "0.0001-0.03 and grad_norm 0.005-0.15 on every updating step; train_reward "
              "0.004 (22) -> 0.04 (30) -> 0.12-0.46 from 48, 0.25 at 100; response length 110 "
              "-> 60-66 (25-32) -> 105-138 from 50; validation 0.002 (0-20) -> 0.10 (30) -> "
              "0.20 (40) -> 0.39-0.43 (50-100), format 0.80-0.87 (30-40) -> 0.97-0.99; "
              "token_entropy 1.5-1.7 (22-26) -> 0.33-0.63 from 52"),
    "cs336-sandyhu-grpo-offpolicy-clip-healthy": dict(
        framework="custom", format="csv",
        source="https://github.com/sandyhu533/assignment5-alignment/blob/"
               "e7dd55ad7352bba72030929b9451b25c4d0d6c36/grpo_runs/offpolicy/clip/"
               "2026-06-14_23-51-35/seed_0/metrics.jsonl",
        source_title="CS336 assignment 5 (sandyhu533/assignment5-alignment): the committed "
                     "metrics of the hand-written GRPO loop, off-policy token-level clip arm",
        thread_label="the author's results check (grpo_runs/summary/hypothesis_check.md): "
                     "'gspo 0.506 ~ noclip 0.501 > naive 0.487 > clip 0.465. All ~ on-policy "
                     "GRPO (~0.48) -> going 32x off-policy kept accuracy'; 'The one mild "
                     "surprise is clip being the weakest (lower format 0.83); with 1 seed and "
                     "an untuned eps this is within noise'",
        label="healthy", fault=None, onset_step=None,
        notes="the committed metrics.jsonl read whole (63,348 characters as stored), each "
              "step's training line and the validation line of the same step written as one "
              "CSV row of their numbers unedited (the columns of "
              "cs336-sandyhu-grpo-offpolicy-gspo-high-clip-healthy); a hand-written loop with "
              "its own key names; 32 updates of 8 rollouts per step; loss, grad_norm, "
              "token_entropy and clip_fraction logged 0.0 on the flat steps 1-21; "
              "train_reward 0.004 (22) -> 0.09 (30) -> 0.21-0.61 from 36; grad_norm 0.16 (22) "
              "-> 2.4 (30) -> 2.2-5.3 from 31; clip_fraction 0.0-0.022; token_entropy 0.03-0.06 "
              "(22-25), 0.2-0.46 (26-45), 0.05-0.16 from 51; validation 0.002 (0-20) -> 0.23 "
              "(30) -> 0.43-0.51 (40-100), format 0.90-0.96 then 0.83 at 100; "
              "train_format_reward 0.71-0.75 on 93, 95 and 100"),
    "cs336-sandyhu-grpo-offpolicy-noclip-healthy": dict(
        framework="custom", format="csv",
        source="https://github.com/sandyhu533/assignment5-alignment/blob/"
               "e7dd55ad7352bba72030929b9451b25c4d0d6c36/grpo_runs/offpolicy/noclip/"
               "2026-06-14_23-29-17/seed_0/metrics.jsonl",
        source_title="CS336 assignment 5 (sandyhu533/assignment5-alignment): the committed "
                     "metrics of the hand-written GRPO loop, off-policy unclipped arm",
        thread_label="the author's results check (grpo_runs/summary/hypothesis_check.md): "
                     "'gspo 0.506 ~ noclip 0.501 > naive 0.487 > clip 0.465. All ~ on-policy "
                     "GRPO (~0.48) -> going 32x off-policy kept accuracy'; the summary README: "
                     "'gspo and noclip edge out naive'",
        label="healthy", fault=None, onset_step=None,
        notes="the committed metrics.jsonl read whole (61,957 characters as stored), each "
              "step's training line and the validation line of the same step written as one "
              "CSV row of their numbers unedited (the columns of "
              "cs336-sandyhu-grpo-offpolicy-gspo-high-clip-healthy); a hand-written loop with "
              "its own key names; 32 updates of 8 rollouts per step, no clipping "
              "(clip_fraction 0.0 throughout); loss, grad_norm and token_entropy logged 0.0 "
              "on the flat steps 1-21; train_reward 0.004 (22) -> 0.21 (30) -> 0.26-0.57 from "
              "31; grad_norm 0.17 (22) -> 3.2 (30) -> 2.5-8.5 from 31, one spike of 29.8 at 53 "
              "(loss 0.024, otherwise |loss| < 0.005) with the reward unchanged; token_entropy "
              "0.03-0.04 (22-24), 0.16-0.37 (25-31), 0.04-0.14 from 32; validation 0.002 "
              "(0-20) -> 0.41 (30) -> 0.39-0.50 (40-100), format 0.91-0.99; "
              "train_format_reward dips to 0.68 (60) and 0.67 (84)"),
    "cs336-sandyhu-grpo-maxrl-healthy": dict(
        framework="custom", format="csv",
        source="https://github.com/sandyhu533/assignment5-alignment/blob/"
               "e7dd55ad7352bba72030929b9451b25c4d0d6c36/grpo_runs/onpolicy/variants/MaxRL/"
               "2026-06-14_22-43-41/seed_0/metrics.jsonl",
        source_title="CS336 assignment 5 (sandyhu533/assignment5-alignment): the committed "
                     "metrics of the hand-written GRPO loop, MaxRL variant",
        thread_label="the author's results check (grpo_runs/summary/hypothesis_check.md): "
                     "'MaxRL 0.467'; 'GRPO_constant / MaxRL sit just below baseline -> "
                     "inconclusive per the handout's lower-bound logic (untuned lr)'; 'Verdict: "
                     "matches expectations within single-seed noise'",
        label="healthy", fault=None, onset_step=None,
        notes="the committed metrics.jsonl read whole (61,005 characters as stored), each "
              "step's training line and the validation line of the same step written as one "
              "CSV row of their numbers unedited (the columns of "
              "cs336-sandyhu-grpo-lr3e-5-diverged); a hand-written loop with its own key "
              "names; loss, grad_norm and token_entropy logged 0.0 on the flat steps 1-21; "
              "MaxRL advantages (a lone correct sample of 8 gets 7.0); grad_norm 0.04-0.57; "
              "train_reward 0.004 (22) -> 0.04 (30) -> 0.30 (39) -> 0.24-0.55 from 41; "
              "response length 110 -> 60-80 (24-33) -> 98-138 from 37; validation 0.002 "
              "(0-20) -> 0.15 (30) -> 0.40 (40) -> 0.41-0.47 (50-100); token_entropy 1.2 (22) "
              "-> 0.5 (40) -> 0.11-0.24 from 52"),
    "cs336-sandyhu-grpo-constant-norm-healthy": dict(
        framework="custom", format="csv",
        source="https://github.com/sandyhu533/assignment5-alignment/blob/"
               "e7dd55ad7352bba72030929b9451b25c4d0d6c36/grpo_runs/onpolicy/variants/"
               "GRPO_constant/2026-06-14_21-49-05/seed_0/metrics.jsonl",
        source_title="CS336 assignment 5 (sandyhu533/assignment5-alignment): the committed "
                     "metrics of the hand-written GRPO loop, GRPO_constant variant",
        thread_label="the author's results check (grpo_runs/summary/hypothesis_check.md): "
                     "'GRPO_constant 0.437'; 'GRPO_constant / MaxRL sit just below baseline -> "
                     "inconclusive per the handout's lower-bound logic (untuned lr)'; 'Verdict: "
                     "matches expectations within single-seed noise'",
        label="healthy", fault=None, onset_step=None,
        notes="the committed metrics.jsonl read whole (61,362 characters as stored), each "
              "step's training line and the validation line of the same step written as one "
              "CSV row of their numbers unedited (the columns of "
              "cs336-sandyhu-grpo-lr3e-5-diverged); a hand-written loop with its own key "
              "names; loss, grad_norm and token_entropy logged 0.0 on the flat steps 1-21; "
              "grad_norm 0.01-0.48; train_reward 0.004 (22) -> 0.05 (30) -> 0.27 (39) -> "
              "0.21-0.61 from 41; response length 110 -> 42-58 (27-32) -> 94-135 from 40; "
              "validation 0.002 (0-20) -> 0.10 (30) -> 0.40 (40) -> 0.43-0.45 (50-100); "
              "token_entropy 0.97-1.18 (22-28) -> 0.59 (40) -> 0.10-0.25 from 51"),
    "cs336-sandyhu-grpo-offpolicy-naive-healthy": dict(
        framework="custom", format="csv",
        source="https://github.com/sandyhu533/assignment5-alignment/blob/"
               "e7dd55ad7352bba72030929b9451b25c4d0d6c36/grpo_runs/offpolicy/naive/"
               "2026-06-14_23-06-02/seed_0/metrics.jsonl",
        source_title="CS336 assignment 5 (sandyhu533/assignment5-alignment): the committed "
                     "metrics of the hand-written GRPO loop, off-policy naive arm",
        thread_label="the author's results check (grpo_runs/summary/hypothesis_check.md): "
                     "'naive 0.487 ... All ~ on-policy GRPO (~0.48) -> going 32x off-policy "
                     "kept accuracy'; 'naive survives because at 32x the policy gap is still "
                     "small'; the summary README: 'naive ... still trains fine'",
        label="healthy", fault=None, onset_step=None,
        notes="the committed metrics.jsonl read whole (61,991 characters as stored), each "
              "step's training line and the validation line of the same step written as one "
              "CSV row of their numbers unedited (the columns of "
              "cs336-sandyhu-grpo-lr3e-5-diverged); a hand-written loop with its own key "
              "names; 32 updates of 8 rollouts per step; loss, grad_norm and token_entropy "
              "logged 0.0 on the flat steps 1-21; train_reward 0.004 (22) -> 0.27 (30) -> "
              "0.32-0.65 from 31; grad_norm 0.16 (22) -> 3.7 (28) -> 2.2-5.9 from 30; "
              "token_entropy 0.04-0.34 (a mean that counts skipped updates as 0); validation "
              "0.002 (0-20) -> 0.40 (30) -> 0.46-0.50 (50-100); response length 68 -> 130 (30) "
              "-> 143-183"),
    "cs336-sandyhu-grpo-offpolicy-gspo-high-clip-healthy": dict(
        framework="custom", format="csv",
        source="https://github.com/sandyhu533/assignment5-alignment/blob/"
               "e7dd55ad7352bba72030929b9451b25c4d0d6c36/grpo_runs/offpolicy/gspo/"
               "2026-06-15_00-12-35/seed_0/metrics.jsonl",
        source_title="CS336 assignment 5 (sandyhu533/assignment5-alignment): the committed "
                     "metrics of the hand-written GRPO loop, off-policy GSPO arm",
        thread_label="the author's results check (grpo_runs/summary/hypothesis_check.md): "
                     "'gspo ... clips ~24% (max 48%). GSPO's tiny eps => high clip fraction, "
                     "exactly as the formulation implies, yet it remains the most stable/best'",
        label="healthy", fault=None, onset_step=None,
        notes="the committed metrics.jsonl read whole (63,302 characters as stored), each "
              "step's training line and the validation line of the same step written as one "
              "CSV row of their numbers unedited (the columns of "
              "cs336-sandyhu-grpo-lr3e-5-diverged and clip_fraction); a hand-written loop with "
              "its own key names; 32 updates of 8 rollouts per step, sequence-level ratio "
              "clipped at 3e-4; every logged value 0.0 but the rewards and lengths on the flat "
              "steps 1-21; clip_fraction 0.001 (22) -> 0.22 (30) -> 0.18-0.48 from 31 (by "
              "design); grad_norm 0.07-0.9 (22-29) -> 1.5-3.3 from 30; train_reward 0.004 (22) "
              "-> 0.27 (36) -> 0.25-0.6; validation 0.002 (0-20) -> 0.30 (30) -> 0.43-0.51 "
              "(40-100)"),
    "cs336-sandyhu-grpo-three-shot-healthy": dict(
        framework="custom", format="csv",
        source="https://github.com/sandyhu533/assignment5-alignment/blob/"
               "881cf6746162b809fdf8b21ecc3710e549ef763a/grpo_runs/onpolicy/prompt/"
               "r1_zero_three_shot/2026-06-14_07-26-04/seed_0/metrics.jsonl",
        source_title="CS336 assignment 5 (sandyhu533/assignment5-alignment): the committed "
                     "metrics of the hand-written GRPO loop, three-shot prompt",
        thread_label="the author's results check (grpo_runs/summary/hypothesis_check.md): "
                     "'r1_zero_three_shot: best, 0.514 (also shorter responses ~120 tok, format "
                     "0.974) -- few-shot format demonstrations help'",
        label="healthy", fault=None, onset_step=None,
        notes="the committed metrics.jsonl read whole (64,149 characters as stored), each "
              "step's training line and the validation line of the same step written as one "
              "CSV row of their numbers unedited (the columns of "
              "cs336-sandyhu-grpo-lr3e-5-diverged); a hand-written loop with its own key "
              "names; no flat start (the three-shot prompt answers 41% at step 0); "
              "train_reward 0.19-0.41 (1-10) -> 0.33-0.64; validation 0.41 (0) -> 0.46 (10) -> "
              "0.50-0.52 (20-100); token_entropy 0.77 (1) -> 0.10-0.20 from 36; grad_norm "
              "0.5-1.3; response length 96-148"),
    "cs336-xiaofei-grpo-standard-seed0-healthy": _xiaofei(
        "67a18581e7660a1bc53ab2ef3d143cecec294b16", "standard_seed_0",
        "the handout's learning rate 1e-5, seed 0",
        "the author's writeup (assignment5/writeup.md, problem grpo_experiments): 'The final "
        "validation answer rewards are 47.9%, 45.6%, 12.3%, and 46.7%'; 'Seed 2 pulls the "
        "mean down; the other three are above 45%, and all stay near 45% after step 100'; "
        "'seeds 0 and 3 rise first'; 'Successful seeds have a training reward of about "
        "0.45-0.55 in the second half'",
        notes="the committed metrics.jsonl read whole (48,762 characters as stored), its 201 "
              "lines of steps 0-200 each written as one CSV row of the line's numbers unedited, "
              "the same columns as cs336-xiaofei-grpo-standard-seed2-short-answer-collapse (the "
              "failed seed of the same four); reward 0 with grad_norm 0 on most steps to 27, then"
              " train_reward 0.01 (29) -> 0.21 (45) -> 0.4-0.65 from 54; validation answer 0.001 "
              "(20) -> 0.077 (40) -> 0.256 (50) -> 0.41 (90) -> 0.479 (200), format 0.53 -> "
              "0.91-0.96, response length 110 -> 79 (40) -> 126-161; token_entropy 1.0 -> "
              "0.10-0.18 from 76; grad_norm median 0.754, above 1 on 5 steps (the author's count)"),
    "cs336-grpo-no-clip-off-policy-stable": dict(
        framework="custom", format="csv",
        source="https://github.com/ShibukiZero/assignment5-alignment/blob/"
               "1a47cd66495a60b845815c90fe1dc3a25f382fea/artifacts/experiments/ch7/"
               "grpo_off_policy_clip_ablation/grpo_off_policy_clip_ablation_diagnostics.csv",
        source_title="CS336 assignment 5 (ShibukiZero/assignment5-alignment): the committed "
                     "diagnostics of the hand-written GRPO loop's off-policy clip ablation",
        thread_label="the repository's experiment log: 'GRPO-No-Clip (e2/tb256) peaked at "
                     "78.42% on step 195 and remained stable through the final evaluation at "
                     "78.22%'; 'the unclipped run keeps finite entropy and gradient norm values'",
        label="healthy", fault=None, onset_step=None,
        notes="the committed diagnostics table, the 200 rows of the GRPO-No-Clip run exactly as "
              "committed (the same keys as cs336-grpo-clip-off-policy-late-collapse; "
              "clip_fraction is empty on every row); validation 0.038 (step 0) -> 0.67 (80) -> "
              "0.78 (195-200); single-step grad_norm spikes to 2.4e8 (18), 1.3e8 (69) and 2.9e9 "
              "(172); token_entropy 0.1 -> 2.7 on steps 76-79 and back to 0.09 by 81; the "
              "repository's later rerun with std normalisation went the other way "
              "(cs336-main-grpo-no-clip-eval-collapse)"),
    "rfs-ch07-clip-ratio-stable": dict(
        framework="custom", format="csv",
        source="https://github.com/rasbt/reasoning-from-scratch/blob/"
               "0bea405674541abb2dbc9ca3823de718ed4a2e39/ch07/02_logs/"
               "7_4_plus_clip_ratio_metrics.txt",
        source_title="reasoning-from-scratch, chapter 7.4: the committed console log of the "
                     "hand-written GRPO script with clipped policy ratios",
        thread_label="the author (chapter 7.4.2, quoted from the book's published Chinese "
                     "edition): 'compared with the previous training run, the training with "
                     "clipped policy ratios is indeed more stable, as there is no clear drop "
                     "in the average reward or evaluation accuracy around step 400'",
        label="healthy", fault=None, onset_step=None,
        notes="the committed console log, all 500 lines, each line transcribed to one CSV "
              "row with its numbers unedited (fields step, loss, reward_avg, "
              "avg_response_len, adv_std, entropy_avg, policy_ratio; tokens_per_sec and "
              "adv_avg left out); reward_avg swings 0-1 per step around a steady level, "
              "entropy_avg 0.02-0.73 until step 484 and single steps up to 3.46 in the last "
              "16, policy_ratio single steps from 0.02 to 36.3"),
    "unsloth-qwen25-grpo-notebook-reference": _unsloth_notebook(
        "0114b779decfaadf0888c002eae1a19334258dc6", "Qwen2.5_(3B)-GRPO.ipynb",
        "Qwen2.5 (3B) GRPO",
        notes="the training cell's saved HTML table, all 250 rows (Step, Training Loss, "
              "reward, reward_std, completion_length, kl; logging every step), one <tr> per "
              "line; the reward stays near 0.1 for ~75 steps, then rises in bursts towards "
              "2.75 (the maximum) with many groups still at reward_std 0; kl grows from 0 to "
              "0.03-0.17; completion_length falls from the 200-token cap to ~100-190"),
    "unsloth-llama32-3b-advanced-grpo-notebook-reference": _unsloth_notebook(
        "016b8dce8bee9ec8d94efc84863d5c327aa8956c", "Advanced_Llama3_2_(3B)_GRPO_LoRA.ipynb",
        "Advanced Llama 3.2 (3B) GRPO LoRA",
        notes="the training cell's saved HTML table (500 steps), rows 1-180 and its first "
              "six columns (Step, Training Loss, reward, reward_std, completion_length, kl; "
              "the four reward-component columns left out); the reward rises from -1.25..-0.19 "
              "(steps 1-33) to 0.8-1.9 from step 73; kl 0 -> 0.01-0.06 with single-step "
              "spikes to 0.30, 0.58, 1.71 and 2.64 (steps 113, 134, 130, 111), each back at "
              "~0.02 the next step"),
    "unsloth-qwen3-4b-grpo-notebook-reference": _unsloth_notebook(
        "0114b779decfaadf0888c002eae1a19334258dc6", "Qwen3_(4B)-GRPO.ipynb",
        "Qwen3 (4B) GRPO", said_after=" (the run stops at step 100)",
        notes="the training cell's saved HTML table, all 100 rows and its first six columns "
              "(Step, Training Loss, reward, reward_std, completion_length, kl; the four "
              "reward-component columns left out); the reward is at its floor -7.5 with every "
              "completion at the 1846-token cap on 40 of the 100 steps and 2.75-13.0 on "
              "others, no trend; kl 0.08-0.27 with single steps at 3.25 (14) and 0.57 (42)"),
    "unsloth-llama31-3b-advanced-grpo-notebook-reference": _unsloth_notebook(
        "03104b338a1f0e3ca341467fc0449d122f2e2c44", "Advanced_Llama3_1_(3B)_GRPO_LoRA.ipynb",
        "Advanced Llama 3.1 (3B) GRPO LoRA",
        notes="the training cell's saved HTML table (saved at step 294 of 1000), rows 1-136 "
              "and its first six columns (Step, Training Loss, reward, reward_std, "
              "completion_length, kl; the four reward-component columns left out); the "
              "reward rises from -1.2..-0.3 (steps 1-58) to mostly 0.9-4.0 (86-136); kl 0 -> "
              "0.01-0.08 with one step at 0.196 (120)"),
    "unsloth-deepseek-r1-0528-qwen3-8b-grpo-notebook-reference": _unsloth_notebook(
        "10dc9577461fc14cc879cb742a474ceb0e684951", "DeepSeek_R1_0528_Qwen3_(8B)_GRPO.ipynb",
        "DeepSeek R1 0528 Qwen3 (8B) GRPO", said_after=" (the run stops at step 100)",
        notes="the training cell's saved HTML table, all 100 rows and its first six columns "
              "(Step, Training Loss, reward, reward_std, completion_length, kl; the five "
              "reward-component columns left out); 4 generations a prompt, so reward_std is 0 "
              "on many steps; the reward is -7.0..2.5, mean -3.0 on steps 1-34 and 0.24 on "
              "35-100; completion_length 81-207; kl 0 -> 0.0005-0.03 with one step at 0.17 "
              "(92)"),
    "unsloth-phi4-grpo-notebook-reference": _unsloth_notebook(
        "016b8dce8bee9ec8d94efc84863d5c327aa8956c", "Phi_4_(14B)-GRPO.ipynb",
        "Phi-4 (14B) GRPO",
        notes="the training cell's saved HTML table, all 100 rows (Step, Training Loss, "
              "reward, reward_std, completion_length, kl; logging every step), one <tr> per "
              "line; the reward sits at 0.125 (format only, reward_std 0) in most steps with "
              "bursts to 1.2-2.0; completion_length at the 200-token cap in most steps; kl "
              "0-0.028"),
    "unsloth-llama31-8b-grpo-notebook-reference": _unsloth_notebook(
        "0114b779decfaadf0888c002eae1a19334258dc6", "Llama3.1_(8B)-GRPO.ipynb",
        "Llama 3.1 (8B) GRPO", patient=False,
        notes="the training cell's saved HTML table, rows 1-119 of 250, all 11 columns (the "
              "total reward and its five components: xmlcount, soft/strict format, int, "
              "correctness); the correctness component reaches 2.0 (every answer right) on "
              "more and more steps after step 60, reward_std is 0 on those steps; kl 0 -> "
              "0.01-0.14; completion_length 200-290 -> 80-220"),
    "unsloth-mistral7b-grpo-notebook-reference": _unsloth_notebook(
        "0114b779decfaadf0888c002eae1a19334258dc6", "Mistral_v0.3_(7B)-GRPO.ipynb",
        "Mistral v0.3 (7B) GRPO", patient=False,
        notes="the training cell's saved HTML table, rows 1-129 of 250 and its first six "
              "columns (Step, Training Loss, reward, reward_std, completion_length, kl); the "
              "five reward-component columns are not transcribed; the reward (the XML-format "
              "component) rises from -0.5 to 0.2-0.25 and flattens, kl rises 0 -> 0.1-0.4, "
              "completion_length falls 300-490 -> 70-250"),
    "dschat-opt13b-step3-reference-log": dict(
        framework="deepspeed-chat", format="dschat",
        source="https://github.com/microsoft/DeepSpeedExamples/blob/"
               "0eaa7961753152f6ba593cace27652c9194a78bb/applications/DeepSpeed-Chat/training/"
               "step3_rlhf_finetuning/training_log_output/"
               "actor_opt-1.3b_critic_opt-350m_globalBatchSize64.log",
        source_title="DeepSpeed-Chat step 3 training log (OPT-1.3b actor, OPT-350m critic)",
        thread_label="the maintainers' reference run, committed beside the scripts: 'We are "
                     "sharing our training logs for all three steps for an OPT-1.3b actor and "
                     "OPT-350m critic' (applications/DeepSpeed-Chat/training/README.md)",
        label="healthy", fault=None, onset_step=None,
        notes="the committed step-3 log, steps 0-136 of 477 (the first 64,000 characters), "
              "its two metric lines per step (act_loss, cri_loss, unsuper_loss; average "
              "reward score); the average reward score rises from about 0 to 3-4.3 by step "
              "100-122 and eases back to 1.7-2.7 by steps 125-136; act_loss and cri_loss "
              "swing to +-1-2 from step 99 on"),
    "verl-gke-gsm8k-grpo-reference": dict(
        framework="verl", format="csv",
        source="https://github.com/esaaren/verl-on-gke/blob/"
               "70b01d69651a9464796f065b746f83a51c39775a/results/parsed_metrics.csv",
        source_title="verl-on-gke: GRPO with verl on GKE (README and results/)",
        thread_label="the README presents this run as the guide's validated example: "
                     "'This example is validated on the GSM8K dataset.' ... 'The logs will "
                     "look something like below' (its step:32 line agrees with row 32) ... 'A "
                     "sample plot looks something like' the run's dashboard",
        label="healthy", fault=None, onset_step=None,
        notes="the repository's results/parsed_metrics.csv read whole (57 steps, verl's new "
              "keys: actor/entropy, actor/pg_loss, actor/kl_loss, critic/score/mean, "
              "response_length/*, timing_s/*; validation every 10 steps); the score rises "
              "0.72 -> 0.9-0.98, entropy falls 0.25 -> 0.03-0.05, kl_loss is logged 0.0 "
              "(no KL loss in the README's command); the column named '1' is not replayed"),
    "trl-3452-loss-zero-expected": dict(
        framework="trl", format="trl_dict", steps="lr",
        source="https://github.com/huggingface/trl/issues/3452",
        source_title="GRPO reward=0 and loss=0",
        thread_label="a maintainer on this run: 'What you're seeing is expected, not a bug: "
                     "the loss=0.0 in the GRPO logs is cosmetic ... the model still trains'",
        label="healthy", fault=None, onset_step=None,
        notes="two stored chunks of one post; a console dict has no step, so each line's "
              "step is derived from its learning rate, which falls by 2.0833e-07 per logged "
              "line (linear schedule): lines 1-5 and 20-24; the last line of each chunk is "
              "cut by the excerpt"),
    "unsloth-2291-loss-zero": dict(
        framework="trl", format="notebook_table",
        source="https://github.com/unslothai/unsloth/issues/2291",
        source_title="[QST] Loss Always Zero While Training GRPO Model",
        thread_label="the poster asks why the training loss stays 0; in TRL's own threads the "
                     "maintainers answer that this is expected (trl#3452, open-r1#239); kl "
                     "grows slowly from 0 and the rewards move",
        label="healthy", fault=None, onset_step=None,
        notes="unsloth's notebook table of a TRL GRPOTrainer run (steps 1-12, the 12th row "
              "cut): 'Training Loss' is the logged loss and 'a / b' the logged key a/b"),
    "tinylora-4-clip-fix-proof": dict(
        framework="trl", format="trl_dict", steps="lr",
        source="https://github.com/Chi-Shan0707/TinyLoRA-GRPO-Coder/issues/4",
        source_title="Clip_fraction is 0 -> fix it in v4.0 + log as proof of improvement",
        thread_label="the author posts this log 'as proof of improvement' after the fix",
        label="healthy", fault=None, onset_step=None,
        notes="two stored chunks of one post; each line's step is derived from its learning "
              "rate, which falls by 1.7857e-07 per logged line: lines 1-3 and 13-15; TRL logs "
              "the generation metrics (reward, lengths) every other line; the last line of "
              "each chunk is cut"),
    "trlppo-hongbo-example": dict(
        framework="trl", format="trl_dict", steps=[96, 112, 128, 816, 832, 848],
        source="https://github.com/hongbo-miao/hongbomiao.com/pull/37684",
        source_title="feat(fine-tuning): add proximal-policy-optimization",
        thread_label="the author's example PPO run in a merged pull request",
        label="healthy", fault=None, onset_step=None,
        notes="TRL PPOTrainer console dicts from two stored chunks of the post; the step "
              "is the logged 'episode' (96, 112 and 816, 832; it grows by 16 per line, so "
              "the cut third line of each chunk is 128 and 848); objective/kl grows from 6.8 "
              "to 11.5 over the epoch, as in TRL's PPO example"),
    # ---- session-8 round: failures scored blind (labels written before the doctor ran) ------
    "cs336-shibuki-grpo-offpolicy-e8-reuse-collapse": dict(
        framework="custom", format="csv",
        source=_SHIBUKI_SWEEP,
        source_title="CS336 assignment 5 (ShibukiZero/assignment5-alignment): the committed "
                     "diagnostics of the off-policy broad sweep, arm broad_e8_tb256",
        thread_label="the author's writeup (writeup.md, problem grpo_off_policy_sweep): "
                     "'repeated full-batch reuse is unstable'; 'e8_tb256 rises early, peaking "
                     "at 48.44% on step 15, and then drops to 0%'; 'These failures coincide with "
                     "degenerate formatting/reward behavior rather than a smooth plateau'",
        label="failure", fault="reward_collapse", onset_step=18,
        notes="the table's header and this arm's 40 rows exactly as committed (run, phase, "
              "role strings and the counters optimizer_step, rollout_epoch not replayed); a "
              "hand-written loop with its own key names; rollout_answer_accuracy 0.016 (1) -> "
              "0.13-0.28 (2-10) -> 0.31-0.44 (11-17) -> 0.22 (18) -> 0.27, 0.21 (19-20) -> "
              "0.08 (21) -> 0.0-0.03 from 22; rollout_format_accuracy 0.46-0.71 on 2-17 -> "
              "0.32 (18) -> 0.09 (21) -> 0.0-0.04 from 22; approx_kl 0.02-0.08 on 2-18 -> 0.21 "
              "(19) -> 0.65 (21) -> 2.0-8.5 on 22-28 (0.09 at 26); clip_fraction 0.08-0.15 on "
              "2-18 -> 0.25 (19) -> 0.71-0.98 (22-28); response length 239-460 on 2-18 -> 234 "
              "(19) -> 60 (21) -> 5-12 tokens from 24 (45 at 27); token_entropy 0.6-1.6 (1-19) "
              "-> 0.03-0.15 from 24; "
              "grad_norm and loss 0.0 (no update: every group flat) on 26 and from 29; onset "
              "18, the first step of the fall (accuracy 0.40 -> 0.22, format 0.55 -> 0.32), "
              "which the evaluations show between 15 (0.48) and 20 (0.065); 40 steps, not long"),
    "cs336-shibuki-grpo-offpolicy-e16-reuse-collapse": dict(
        framework="custom", format="csv",
        source=_SHIBUKI_SWEEP,
        source_title="CS336 assignment 5 (ShibukiZero/assignment5-alignment): the committed "
                     "diagnostics of the off-policy broad sweep, arm broad_e16_tb256",
        thread_label="the author's writeup (writeup.md, problem grpo_off_policy_sweep): "
                     "'e2_tb32 and e16_tb256 both perform 16 optimizer updates per rollout "
                     "batch, but only e16_tb256 collapses'; 'e16_tb256 is effectively collapsed "
                     "after the initial evaluation'; 'associated with severe reward and format "
                     "failures'",
        label="failure", fault="reward_collapse", onset_step=3,
        notes="the table's header and this arm's 40 rows exactly as committed (run, phase, "
              "role strings and the counters not replayed); a hand-written loop with its own "
              "key names; rollout_answer_accuracy 0.016 (1) -> 0.074, 0.078 (2-3) -> 0.039 "
              "(4) -> 0.012 (5-6) -> 0.0 on 7, 9-15 and from 19 (0.012 at 8, 0.004-0.07 on "
              "16-18); rollout_format_accuracy 0.18 (1) -> 0.42 (2) -> 0.29 (3) -> 0.12 (4) -> "
              "0.035 (5) -> 0-0.016 after (0.10 at 17); token_entropy 0.90 (1) -> 1.21 (3) -> "
              "2.57 (4) -> 4.4-5.9 "
              "(5-10) -> 4.8-7.0 after; response length 305 (1) -> 470 (3) -> 676 (5) -> "
              "746-932 from 7 (the cap is 1,024); grad_norm and loss 0.0 (no update) on 7, 9-15 "
              "and from 19; clip_fraction 0.18-0.28 on 1-6 and 8, 0.27-0.49 on 16-18, under "
              "0.03 elsewhere; onset 3, the first step of the fall (format 0.42 -> 0.29, entropy "
              "0.93 -> 1.21), the evaluation at step 5 already at 0.8%; 40 steps, not long"),
    # ---- session-8 round: healthy runs scored blind (labels written before the doctor ran) ----
    "cs336-shibuki-grpo-masked-mean-healthy": _shibuki_main(
        "grpo_length_normalization", "masked_mean (the selected on-policy reference)",
        "the author's writeup (writeup.md, problems grpo_length_normalization and "
        "grpo_group_standard_deviation): 'masked_mean was the best length-normalization "
        "choice ... reached a best validation answer reward of 88.18% at steps 190 and 200'; "
        "'none of the runs suffered an obvious late-training randomness collapse'; 'Both "
        "variants trained successfully'",
        "train_answer_accuracy 0.016 (1) -> 0.21-0.39 (2-10) -> 0.49-0.64 (21-30) -> "
        "0.49-0.90 from 51; grad_norm 0.26 (1) -> 0.77-1.9 (2-10) -> 0.47-1.23 (11-20) -> "
        "0.08-0.49 from 51 but 0.70 at 170; token_entropy 0.92 (1) -> 0.24-0.40 (2-10) -> "
        "0.11-0.21 (11-30) -> 0.02-0.05 from 51; the same run is the group-std table's "
        "std_normalization and the prompt ablation's r1_zero_reference (their rows repeat "
        "these numbers)"),
    "cs336-shibuki-grpo-masked-normalize-slow-learner-healthy": _shibuki_main(
        "grpo_length_normalization", "masked_normalize (token sum / 1,024)",
        "the author's writeup (writeup.md, problem grpo_length_normalization): 'masked_normalize "
        "reached 87.11% at steps 165 and 200'; 'The main difference was learning speed rather "
        "than a late-training collapse. At step 25, masked_mean had already reached 72.66% "
        "validation answer reward, compared with 31.05% for masked_normalize'; 'The reason is "
        "not that masked_normalize failed outright, but that masked_mean learned much faster'",
        "a slower learner, not a frozen start: train_answer_accuracy 0.016 (1) -> 0.18-0.43 "
        "(2-30) -> 0.30-0.57 (31-50) -> 0.46-0.90 from 51; grad_norm 0.018 (1), 0.03-0.16 "
        "after (masked_mean's is 0.77-1.9 on 2-10); token_entropy 0.92 (1) -> 0.27-0.60 "
        "(2-20) -> 0.12-0.32 (21-50) -> 0.02-0.06 from 101; train_format_accuracy 0.18 (1) "
        "-> 0.60-0.98 (2-10) -> 0.93-1.0 (11-50), 0.78 at 64; the writeup: the rollout length "
        "fell to 34.9 tokens at step 5"),
    "cs336-shibuki-grpo-batch-token-mean-healthy": _shibuki_main(
        "grpo_length_normalization", "batch_token_mean",
        "the author's writeup (writeup.md, problem grpo_length_normalization): 'The "
        "batch_token_mean reference reached 86.91% at step 110 and ended at 86.43%'; 'none of "
        "the runs suffered an obvious late-training randomness collapse'",
        "train_answer_accuracy 0.016 (1) -> 0.18-0.34 (2-10) -> 0.28-0.66 (11-30) -> "
        "0.47-0.91 from 31; grad_norm 0.06 (1) -> 0.41-1.07 (2-20) -> 0.10-0.40 from 31; "
        "token_entropy 0.92 (1) -> 0.16-0.48 (2-10) -> 0.10-0.20 (11-50) -> 0.02-0.04 from "
        "101"),
    "cs336-shibuki-grpo-no-std-healthy": _shibuki_main(
        "grpo_group_standard_deviation", "no_std_normalization",
        "the author's writeup (writeup.md, problem grpo_group_standard_deviation): 'Both "
        "variants trained successfully and ended with very similar validation answer "
        "reward'; 'The use_std_normalization=False run reached its best and final validation "
        "answer reward of 87.21% at step 200'; 'The gradient norm trend is benign in this run'",
        "the table's second column is the setting use_std_normalization (False); "
        "train_answer_accuracy 0.016 (1) -> 0.21-0.36 (2-10) -> 0.34-0.65 (11-30) -> "
        "0.50-0.90 from 31; grad_norm 0.09 (1) -> 0.25-0.93 (2-10) -> 0.03-0.19 from 11, one "
        "0.46 at 97; token_entropy 0.92 (1) -> 0.26-0.53 (2-10) -> 0.13-0.41 (11-50) -> "
        "0.02-0.13 from 51"),
    "cs336-shibuki-grpo-question-only-healthy": _shibuki_main(
        "grpo_prompt_ablation", "the question_only prompt",
        "the run summary (artifacts/experiments/main/ch7/grpo_prompt_ablation/"
        "grpo_prompt_ablation_summary.csv, commit 4230b48872dfc3d46892fc850a84155e85844dad): "
        "status 'completed', best and final validation answer accuracy 0.8515625 at step 200 "
        "(the r1_zero reference: 0.8818359375), final format 0.9765625",
        "the table's second and third columns are the prompt template and reward function; "
        "loss_type grpo_clip (the summary); train_answer_accuracy 0.46 (1) -> 0.48-0.92 from 2 "
        "(the question_only prompt starts far above the r1_zero prompt's 0.016); loss between "
        "-2.5e-5 and 2.3e-5 (0.0 at 87, 139, 200); grad_norm 0.05-0.19; token_entropy 0.28 "
        "(1) -> 0.12-0.22"),
    "trl-ppo-sherrywan-formal-seed42-healthy": dict(
        framework="trl", format="csv",
        source=_SHERRYWAN.format(commit="ad5ed110097dfccbc126671c2cf16ab49f414554", name="ppo"),
        source_title="sherrywan717/ppo-vs-grpo-math-rlvr: formal PPO seed 42 (TRL 0.24.0 "
                     "PPOTrainer, 32 updates), its committed per-update training metrics",
        thread_label="the author's report (reports/formal_1p5b/03_ppo_training.md): status "
                     "'scientifically_complete_with_recovered_validation'; entropy 'did not "
                     "show sustained collapse'; 'Approximate KL and clip fraction stayed small "
                     "and ratio remained near one, consistent with restrained PPO updates; "
                     "value loss stayed finite'; 'The run had learning signal, but one seed "
                     "cannot establish capability gain'; reward 'volatile rather than "
                     "monotonically improving'",
        label="healthy", fault=None, onset_step=None,
        notes="the committed table read whole (28,018 characters as stored), its header and "
              "32 rows exactly as committed; TRL's log rows re-exported under the project's "
              "own names (reward_mean, kl, policy_entropy_mean, value_loss, clip_fraction, "
              "ratio_mean, completion_length_mean, truncation_rate, zero_advantage_fraction; "
              "step: update); strings and booleans not replayed, empty cells skipped; "
              "reward_mean 0.07-0.51 with no trend; kl 0.0002-0.0011; clip_fraction "
              "0.0005-0.013; policy_entropy_mean 0.72-1.94 (1.11 -> 1.78); value_loss 3.6-5.9; "
              "runtime_valid_answer_rate 0.0 on every row (a reporting bug the report names); "
              "the validation pass@1 falls from 4.7% to 3.1% (one problem): labelled healthy "
              "from the author's words, which name no fault; 32 steps, not long"),
    "trl-grpo-sherrywan-formal-seed42-healthy": dict(
        framework="trl", format="csv",
        source=_SHERRYWAN.format(commit="e54d84d9795ad74da855e6fdf6e8a15700d36d1d", name="grpo"),
        source_title="sherrywan717/ppo-vs-grpo-math-rlvr: formal GRPO seed 42 (TRL 0.24.0 "
                     "GRPOTrainer, 32 updates), its committed per-update training metrics",
        thread_label="the author's report (reports/formal_1p5b/04_grpo_training.md): status "
                     "'scientific_success'; entropy 'fluctuated without sustained collapse'; "
                     "'Grad norm averaged 0.568892 and stayed finite'; 'The run therefore had "
                     "learning signal'; late-window reward 0.373 against 0.200 early",
        label="healthy", fault=None, onset_step=None,
        notes="the committed table read whole (27,400 characters as stored), its header and "
              "32 rows exactly as committed; TRL's log rows re-exported under the project's "
              "own names (reward_mean, grpo_loss, grad_norm, policy_entropy_mean, "
              "clip_fraction, completion_length_mean, truncation_rate, "
              "zero_advantage_fraction, nonzero_variance_group_fraction, all_zero_group_count; "
              "step: update); kl, ratio and value loss empty on every row (beta 0); strings "
              "and booleans not replayed; reward_mean 0.07-0.52; grad_norm 0.21-1.56; "
              "policy_entropy_mean 0.20-0.36; zero_advantage_fraction 0-0.75 of 4 groups; "
              "validation pass@1 3.1% -> 7.8%; 32 steps, not long"),
    "trl-grpo-sherrywan-v2-curriculum-seed42-healthy": dict(
        framework="trl", format="csv",
        source="https://github.com/sherrywan717/ppo-vs-grpo-math-rlvr/blob/"
               "61fe2220c6784879044f880a81ee9c8032efdc1a/reports/grpo_v2/grpo_v2_training/"
               "grpo_v2_seed42_20260726T044303Z/update_metrics.csv",
        source_title="sherrywan717/ppo-vs-grpo-math-rlvr: GRPO-v2 seed 42 (TRL 0.24.0 "
                     "GRPOTrainer from an SFT warm start, 128 updates over a curriculum), its "
                     "committed per-update metrics",
        thread_label="the author's report (report.md of the run): 'completed the frozen "
                     "scientific training and matched-dev contract', its launcher's hang "
                     "'not as a training failure'; dev pass@1 17.97% -> 21.09% -> 25.78% -> "
                     "21.88% at updates 32/64/96/128, checkpoint-96 selected",
        label="healthy", fault=None, onset_step=None,
        notes="the committed table read whole (57,772 characters as stored, CR LF line ends "
              "written here as LF), its header and 128 rows exactly as committed; TRL's log "
              "rows re-exported under the project's own names (reward_mean, loss, entropy, "
              "grad_norm, clip_fraction, completion_length_mean, truncation_rate, "
              "zero_advantage_fraction; step: update; counters, strings and booleans not "
              "replayed; kl empty on every row, beta 0); reward_mean 0.06-0.70 with no trend "
              "(0.06 at 6, 0.13 at 116); entropy 0.18-0.41; grad_norm 0.15-1.94 and 0.0 at 99 "
              "(every group of that update flat: zero_advantage_fraction 1.0, loss 0.0); "
              "completion_length_mean 64-186 on 1-100, 93-191 on 101-128, truncation_rate "
              "0-0.25 to 100 and up to 0.44 (115) after, as the curriculum goes on; long: 128 "
              "updates in 128 points"),
    "openr1-239-loss-rises-normal": dict(
        framework="trl", format="trl_dict", steps="lr",
        source="https://github.com/huggingface/open-r1/issues/239",
        source_title="Why does the loss start at 0 when I train GRPO, and then possibly "
                     "increase?",
        thread_label="a maintainer in the thread: 'It is completely normal for the loss to "
                     "start at zero and then increase'",
        label="healthy", fault=None, onset_step=None,
        notes="TRL GRPOTrainer console dicts of hellen9527's 2025-02-08 comment; the step is "
              "the line's position (the learning rate rises by 2.761e-08 per line: warm-up); "
              "the third line is cut"),
}


def build(case_id: str) -> dict[str, Any]:
    meta = dict(MANIFEST[case_id])
    text = (CASES / f"{case_id}.txt").read_text(encoding="utf-8")
    body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("#"))
    fmt, steps = meta.pop("format"), meta.pop("steps", None)
    if steps == "lr":
        steps = _fill(lr_steps(body))
    series = parse(fmt, body, steps)
    return {"id": case_id, **meta, "raw": f"{case_id}.txt", "series": series}


def _fill(steps: list[int | None]) -> list[int]:
    """A line whose rate was cut comes one logged line after the line before it."""
    out: list[int] = []
    for step in steps:
        out.append(step if step is not None else out[-1] + 1)
    return out


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
