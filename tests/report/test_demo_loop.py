"""The demo is real RL: GRPO gradients are right, rewards are verifiable, and training
raises the reward; the CLI logs what RL trainers watch and writes the report."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from click.testing import CliRunner
from PIL import Image
from report_support import DEMO_STEPS, DemoRun

from trackmux.cli.main import cli
from trackmux.core.events import ImageEvent, MetricsEvent, TableEvent
from trackmux.core.spool.reader import SpoolReader
from trackmux.demo import DemoConfig, train
from trackmux.demo.policy import (
    Adam,
    LinearPolicy,
    group_advantages,
    grpo_update,
    log_softmax,
    one_hot,
)
from trackmux.demo.task import ReverseTask

REQUIRED_KEYS = {"reward/mean", "reward/std", "kl/divergence", "policy/loss", "policy/entropy",
                 "generation/length", "throughput/samples_per_second"}


def metric_series(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    reader = SpoolReader(run_dir)
    try:
        out: dict[str, list[tuple[int, float]]] = {}
        for event in reader.iter_events():
            if isinstance(event, MetricsEvent):
                for key, value in event.data.items():
                    out.setdefault(key, []).append((event.step, float(value)))
        return out
    finally:
        reader.close()


class Recorder:
    """Keeps what the loop logs, in memory."""

    def __init__(self) -> None:
        self.metrics: list[dict[str, Any]] = []
        self.tables: list[tuple[str, list[str], list[list[Any]], int | None]] = []
        self.images: list[tuple[str, Any, int | None, str | None]] = []
        self.samples: list[tuple[str, dict[str, Any], int | None]] = []

    def log(self, data: dict[str, Any], step: int | None = None) -> None:
        self.metrics.append(dict(data))

    def log_table(self, key: str, columns: Any, rows: Any, step: int | None = None) -> None:
        self.tables.append((key, list(columns), [list(r) for r in rows], step))

    def log_samples(self, key: str, samples: Any, step: int | None = None) -> None:
        self.samples.append((key, dict(samples), step))

    def log_image(self, key: str, image: Any, step: int | None = None,
                  caption: str | None = None) -> None:
        self.images.append((key, image, step, caption))


# -- the task ---------------------------------------------------------------------------
def test_task_targets_and_rewards_by_hand() -> None:
    task = ReverseTask(digits=10, max_len=4, min_len=2)
    pad = task.pad
    buffer = np.array([[pad, pad, 3, 7], [1, 2, 3, 4]])
    lengths = np.array([2, 4])
    eos = task.eos
    assert task.targets(buffer, lengths).tolist() == [[7, 3, eos, eos, eos],
                                                      [4, 3, 2, 1, eos]]
    actions = np.array([
        [7, 3, eos, 5, 5],   # perfect (tokens after EOS do not count)
        [4, 3, 9, 9, 9],     # 2 of 5 right, never stops
    ])
    reward, exact = task.rewards(actions, buffer, lengths)
    assert reward.tolist() == pytest.approx([1.0, 2 / 5])
    assert exact.tolist() == [True, False]
    assert task.response_lengths(actions).tolist() == [2, 5]
    assert task.format_response(actions[0]) == "7 3 <eos>"
    early = np.array([[7, eos, 3, eos, eos]])  # stops after one digit: 1 of 3
    assert task.rewards(early, buffer[:1], lengths[:1])[0].tolist() == pytest.approx([1 / 3])


def test_prompts_are_right_aligned_with_the_requested_lengths() -> None:
    task = ReverseTask()
    buffer, lengths = task.sample(np.random.default_rng(3), 200)
    assert set(lengths.tolist()) <= set(range(task.min_len, task.max_len + 1))
    for row, n in zip(buffer, lengths, strict=True):
        assert (row[: task.max_len - n] == task.pad).all()
        assert (row[task.max_len - n:] < task.digits).all()


# -- GRPO ---------------------------------------------------------------------------------
def test_group_advantages_are_normalised_within_each_group() -> None:
    rewards = np.array([0.0, 1.0, 0.5, 0.5, 0.2, 0.2, 0.2, 0.2])
    adv = group_advantages(rewards, 4)
    assert adv[:4].mean() == pytest.approx(0.0, abs=1e-9)
    assert adv[:4].std() == pytest.approx(1.0, rel=1e-4)
    assert adv[1] > adv[2] == adv[3] > adv[0]
    assert adv[4:].tolist() == [0.0] * 4  # no signal when every response scores the same


def _logp(policy: LinearPolicy, inputs: Any, actions: Any) -> Any:
    return (log_softmax(policy.logits(inputs)) * one_hot(actions, policy.vocab_out)).sum(-1)


def _objective(policy: LinearPolicy, reference: LinearPolicy, old: Any, inputs: Any,
               actions: Any, mask: Any, adv: Any, kl_coef: float) -> float:
    """GRPO loss (ratio to the rollout policy ``old``, k3 KL), from its definition."""
    logp = _logp(policy, inputs, actions)
    ref = _logp(reference, inputs, actions)
    ratio = np.exp(logp - old)
    k3 = np.exp(ref - logp) - (ref - logp) - 1
    per_token = -ratio * adv[:, None] + kl_coef * k3
    return float((per_token * mask).sum() / mask.sum())


def test_grpo_gradient_matches_finite_differences() -> None:
    """The hand-written gradient is the gradient of the GRPO objective (checked by
    perturbing weights one at a time), so the demo's numbers come from real optimisation."""
    task = ReverseTask(digits=3, max_len=2, min_len=1)
    rng = np.random.default_rng(7)
    policy = LinearPolicy.initial(rng, task.positions, task.max_len, task.vocab, task.vocab, 0.7)
    reference = LinearPolicy.initial(rng, task.positions, task.max_len, task.vocab,
                                     task.vocab, 0.7)
    buffer, _ = task.sample(rng, 6)
    inputs = one_hot(buffer, task.vocab)
    actions = policy.sample(rng, inputs)
    mask = task.token_mask(actions)
    adv = rng.normal(size=6)
    kl_coef = 0.3

    captured: dict[str, Any] = {}

    class Capture(Adam):
        def step(self, params: dict[str, Any], grads: dict[str, Any]) -> None:
            captured.update({k: v.copy() for k, v in grads.items()})

    grpo_update(policy.copy(), reference, Capture(lr=0.0), inputs, actions, mask, adv,
                kl_coef=kl_coef, clip=0.2, epochs=1)
    old = _logp(policy, inputs, actions)
    eps = 1e-6
    for name in ("W", "b"):
        param = getattr(policy, name)
        for index in list(np.ndindex(param.shape))[::7]:
            original = param[index]
            param[index] = original + eps
            up = _objective(policy, reference, old, inputs, actions, mask, adv, kl_coef)
            param[index] = original - eps
            down = _objective(policy, reference, old, inputs, actions, mask, adv, kl_coef)
            param[index] = original
            numeric = (up - down) / (2 * eps)
            assert captured[name][index] == pytest.approx(numeric, abs=1e-6), (name, index)


def test_same_seed_same_run_and_other_seed_differs() -> None:
    def rewards(seed: int) -> list[float]:
        recorder = Recorder()
        train(DemoConfig(steps=6, seed=seed, sample_every=3), recorder)
        return [m["reward/mean"] for m in recorder.metrics]

    assert rewards(5) == rewards(5)
    assert rewards(5) != rewards(6)


def test_ledger_holds_every_rollout_with_groups_and_reward_components() -> None:
    """Each step logs all prompts x group_size rollouts; the components add up to the total
    the policy was trained on (with the flawed reward model's term in the failure setup),
    and the verifiable components match the task's reward."""
    for config in (DemoConfig(steps=4, seed=3),
                   DemoConfig(steps=4, seed=3, repeat_bonus=0.01, repeat_power=3.0)):
        recorder = Recorder()
        train(config, recorder)
        assert [(k, s) for k, _, s in recorder.samples] == [("rollout/groups", s)
                                                             for s in range(4)]
        for _, columns, _ in recorder.samples:
            n = config.prompts_per_step * config.group_size
            assert all(len(v) == n for v in columns.values())
            assert len(set(columns["uid"])) == config.prompts_per_step
            parts = ["reward/digits", "reward/stop"] + (
                ["reward/repeats"] if config.repeat_bonus else [])
            assert "reward/repeats" in columns or not config.repeat_bonus
            for i in range(n):
                total = sum(columns[p][i] for p in parts)
                assert columns["reward"][i] == pytest.approx(total, abs=1e-3)
                prompt, response = columns["prompt"][i], columns["response"][i]
                target = [*reversed(prompt.split()), "<eos>"]
                hits = sum(1 for a, b in zip(response.split(), target, strict=False) if a == b)
                verifiable = columns["reward/digits"][i] + columns["reward/stop"][i]
                assert verifiable == pytest.approx(hits / len(target), abs=1e-3)
                assert columns["acc"][i] == (hits == len(target))


def test_bad_config_names_the_option() -> None:
    with pytest.raises(ValueError, match="group_size"):
        DemoConfig(group_size=1)
    with pytest.raises(ValueError, match="steps"):
        DemoConfig(steps=0)
    with pytest.raises(ValueError, match="ledger_every"):
        DemoConfig(ledger_every=-1)


# -- the CLI run ----------------------------------------------------------------------------
def test_reward_rises_over_the_demo(demo_run: DemoRun) -> None:
    series = metric_series(demo_run.run_dir)
    rewards = [v for _, v in series["reward/mean"]]
    assert len(rewards) == DEMO_STEPS
    first, last = float(np.mean(rewards[:10])), float(np.mean(rewards[-10:]))
    assert last > first + 0.4, (first, last)
    # The policy moves away from the frozen reference and gets more certain as it learns.
    kl = [v for _, v in series["kl/divergence"]]
    entropy = [v for _, v in series["policy/entropy"]]
    assert kl[0] == pytest.approx(0.0, abs=1e-12)  # step 0: policy == reference
    assert np.mean(kl[-10:]) > 0.1
    assert np.mean(entropy[-10:]) < np.mean(entropy[:10]) - 0.3


def test_default_demo_runs_all_its_steps(demo_run: DemoRun) -> None:
    """The default demo (200 steps, console and file, report) runs to its end. The issue's
    "under a minute on 2 cores" is a speed claim: benchmarks/demo.py measures it."""
    assert f"{DEMO_STEPS} steps" in demo_run.output
    print(f"trackmux demo: {demo_run.seconds:.1f} s")


def test_demo_logs_every_metric_every_step(demo_run: DemoRun) -> None:
    series = metric_series(demo_run.run_dir)
    assert set(series) >= REQUIRED_KEYS
    for key in REQUIRED_KEYS:
        assert [s for s, _ in series[key]] == list(range(DEMO_STEPS)), key
        assert all(np.isfinite(v) for _, v in series[key]), key
    assert all(v > 0 for _, v in series["throughput/samples_per_second"])
    assert all(0 <= v <= 1 for _, v in series["reward/mean"])


def test_rollout_tables_hold_verifiable_rewards(demo_run: DemoRun) -> None:
    """Each table row's reward is what the task's rule gives for that prompt and response."""
    reader = SpoolReader(demo_run.run_dir)
    tables = [e for e in reader.iter_events() if isinstance(e, TableEvent)]
    reader.close()
    assert [t.step for t in tables] == [*range(0, DEMO_STEPS, 20), DEMO_STEPS - 1]
    for table in tables:
        assert table.key == "rollout/samples"
        assert table.columns[:3] == ("prompt", "response", "reward")
        for prompt, response, reward, *_ in table.rows:
            target = [*reversed(str(prompt).split()), "<eos>"]
            words = str(response).split()
            hits = sum(1 for a, b in zip(words, target, strict=False) if a == b)
            assert reward == pytest.approx(hits / len(target), abs=1e-3), (prompt, response)


def test_kl_heatmaps_are_pngs_with_captions(demo_run: DemoRun) -> None:
    reader = SpoolReader(demo_run.run_dir)
    images = [e for e in reader.iter_events() if isinstance(e, ImageEvent)]
    reader.close()
    assert [i.step for i in images] == [*range(0, DEMO_STEPS, 20), DEMO_STEPS - 1]
    for event in images:
        assert event.key == "kl/per_token"
        assert event.caption and "KL" in event.caption
        with Image.open(io.BytesIO(event.png)) as image:
            assert image.size == (event.width, event.height)
            assert image.width > 300 and image.height > 150
            colours = image.convert("RGB").getcolors(maxcolors=100_000) or []
            assert len(colours) > 20  # a real heatmap, not a blank canvas


def test_demo_delivers_to_console_and_file_and_prints_where(demo_run: DemoRun) -> None:
    reader = SpoolReader(demo_run.run_dir)
    last = reader.last_seq()
    cursors = reader.cursors()
    meta = reader.meta()
    reader.close()
    assert meta["state"] == "finished"
    assert {name: c.acked_seq for name, c in cursors.items()} == {"console": last, "file": last}
    assert str(demo_run.run_dir) in demo_run.output
    report = demo_run.run_dir / "report.html"
    assert report.is_file()
    assert f"report: {report}" in demo_run.output
    assert "step:0 - reward/mean:" in demo_run.output  # the console backend's lines
    assert f"trackmux ui {demo_run.root}" in demo_run.output  # how to open the dashboard
    jsonl = demo_run.run_dir / "file" / f"{meta['name']}.jsonl"
    lines = jsonl.read_bytes().splitlines()
    # the project folder holds run folders only (`trackmux report <project>/*` works)
    assert [p for p in (demo_run.root / "trackmux-demo").iterdir()] == [demo_run.run_dir]
    assert len(lines) == DEMO_STEPS
    assert orjson.loads(lines[-1])["step"] == DEMO_STEPS - 1


def test_demo_rejects_an_unknown_backend(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--steps", "2", "--dir", str(tmp_path),
                                      "--backends", "nosuchbackend"])
    assert result.exit_code == 2
    assert "--backends" in result.output and "nosuchbackend" in result.output
    assert not list(tmp_path.glob("*/*/spool.db"))


def test_demo_spool_only_without_report(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--steps", "3", "--seed", "1", "--dir",
                                      str(tmp_path), "--no-default-backends", "--no-report"])
    assert result.exit_code == 0, result.output
    (run_dir,) = [p.parent for p in tmp_path.glob("*/*/spool.db")]
    assert not (run_dir / "report.html").exists()
    assert f"trackmux report {run_dir}" in result.output
    reader = SpoolReader(run_dir)
    assert reader.cursors() == {}
    reader.close()
    assert len(metric_series(run_dir)["reward/mean"]) == 3
