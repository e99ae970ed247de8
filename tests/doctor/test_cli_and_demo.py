"""``trackmux doctor``: text, --json, exit codes 0/1/2; the demo's real runs: the healthy
default gives no warning, ``--failure reward-hacking`` is found in the console and report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import trackmux
from trackmux.cli.main import cli
from trackmux.core.events import MetricsEvent
from trackmux.core.spool.reader import SpoolReader


def _run(root: Path, broken: bool) -> Path:
    run = trackmux.init(project="p", backends=["file"], dir=root, doctor=False,
                        backend_options={"file": {"root": str(root / "out")}})
    for step in range(60):
        kl = 0.02 * (2 ** (step - 39) if broken and step >= 40 else 1)
        run.log({"kl/divergence": kl, "reward/mean": 0.4 + 0.002 * step}, step=step)
    run.finish(timeout=30)
    return run.dir


def _series(run_dir: Path, key: str) -> list[tuple[int, float]]:
    reader = SpoolReader(run_dir)
    try:
        return [(e.step, e.data[key]) for e in reader.events_of_kind("metrics")
                if isinstance(e, MetricsEvent) and key in e.data]
    finally:
        reader.close()


def test_exit_codes_text_and_json(tmp_path: Path) -> None:
    good, bad = _run(tmp_path, False), _run(tmp_path, True)
    result = CliRunner().invoke(cli, ["doctor", str(good)])
    assert result.exit_code == 0, result.output
    assert f"{good.name}: no findings" in result.output
    result = CliRunner().invoke(cli, ["doctor", str(good), str(bad)])
    assert result.exit_code == 1
    # a KL that went on to 20 is critical past its critical line (a finding that grows)
    assert "CRITICAL kl_blowup @ step 40 [kl/divergence]" in result.output
    result = CliRunner().invoke(cli, ["doctor", "--json", str(good), str(bad)])
    assert result.exit_code == 1
    objects = [json.loads(line) for line in result.output.splitlines()]
    assert {k: v for k, v in objects[0].items() if k != "coverage"} == {
        "run": good.name, "findings": []}
    assert objects[0]["coverage"]["judged"] is True  # issue 42: coverage always said
    [finding] = objects[1]["findings"]
    assert objects[1]["run"] == bad.name
    assert set(finding) == {"rule", "severity", "step", "keys", "message", "evidence", "id",
                            "revision", "worst", "latest", "moved"}
    assert (finding["rule"], finding["step"], finding["keys"]) == ("kl_blowup", 40,
                                                                  ["kl/divergence"])
    rules = tmp_path / "rules.toml"
    rules.write_text("[kl_blowup]\nenabled = false\n")
    result = CliRunner().invoke(cli, ["doctor", "--rules", str(rules), str(bad)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("args,named", [
    (["doctor", "no-such-run"], "no run 'no-such-run'"),
    (["doctor", "--rules", "{bad}.toml", "x"], "does not exist"),
    (["doctor"], "Missing argument"),
])
def test_bad_usage_exits_2(tmp_path: Path, args: list[str], named: str) -> None:
    result = CliRunner().invoke(cli, [*args[:1], "--dir", str(tmp_path), *args[1:]]
                                if len(args) > 1 else args)
    assert result.exit_code == 2
    assert named in result.output


def test_demo_healthy_has_no_warning_and_failure_is_found(tmp_path: Path, capsys: Any) -> None:
    """Both demo runs are real (the GRPO loop on CPU, 200 steps, about 2 s each)."""
    from trackmux.cli.demo import demo

    result = CliRunner().invoke(demo, ["--dir", str(tmp_path), "--no-report", "--name", "ok"])
    assert result.exit_code == 0, result.output
    assert "doctor: no warning or critical finding" in result.output
    [ok] = (tmp_path / "trackmux-demo").glob("*/spool.db")
    ok = ok.parent
    from trackmux.doctor.read import load_findings

    assert [f for f in load_findings(ok) if f["severity"] != "info"] == []
    assert "kl_blowup" not in result.output
    reader = SpoolReader(ok)  # the ledger is there for the rules to read, every step
    try:
        assert [e.step for e in reader.events_of_kind("samples")] == list(range(200))
    finally:
        reader.close()
    result = CliRunner().invoke(demo, ["--dir", str(tmp_path / "f"), "--failure",
                                       "reward-hacking"])
    assert result.exit_code == 0, result.output
    [failed] = (tmp_path / "f" / "trackmux-demo").glob("*/spool.db")
    failed = failed.parent
    found = load_findings(failed)
    first: dict[str, dict[str, Any]] = {}
    for f in found:
        first.setdefault(f["rule"], f)
    # the story of issue 22's point 5: the reward climbs, then the KL runs away, the
    # rollouts repeat, a reward component turns against the total, the verifiable reward
    # falls from the level it had climbed to, and the GRPO groups end up flat
    assert {"kl_blowup", "degenerate_text", "component_divergence", "reward_collapse",
            "entropy_collapse", "flat_groups"} <= set(first)
    rewards = [v for _, v in _series(failed, "reward/mean")]
    peak = max(range(len(rewards)), key=lambda i: sum(rewards[i:i + 10]))
    assert sum(rewards[peak:peak + 10]) / 10 > sum(rewards[:10]) / 10 + 0.15  # it climbed
    kl, collapse = first["kl_blowup"], first["reward_collapse"]
    assert kl["keys"] == ["kl/divergence"] and collapse["keys"] == ["reward/mean"]
    assert collapse["severity"] == "critical"
    assert peak < kl["step"] < collapse["step"] <= kl["step"] + 50  # related onsets
    assert f"after kl_blowup at step {kl['step']}" in collapse["message"]  # told together
    # the KL is dated where its climb began; the text degenerates as it climbs
    assert 0 <= first["degenerate_text"]["step"] - kl["step"] <= 15
    assert first["flat_groups"]["keys"] == ["rollout/groups"]
    # the flawed reward model's score pulls away from the verifiable reward before it falls
    over = first["overoptimization"]
    assert over["keys"] == ["reward/model_score", "reward/mean"]
    assert peak < over["step"] < collapse["step"]
    digits = [f for f in found if f["rule"] == "component_divergence"
              and "component reward/digits" in f["message"]]
    # its mean falls while the total rises, and later its correlation with the total flips
    # too: one finding for the one component, not one per way of seeing it
    assert len(digits) == 1 and "fell" in digits[0]["message"]
    assert f"WARNING kl_blowup @ step {kl['step']}" in result.output
    assert f"CRITICAL reward_collapse @ step {collapse['step']}" in result.output
    assert "[trackmux doctor] WARNING kl_blowup" in capsys.readouterr().out + result.output
    html = (failed / "report.html").read_text()
    assert "degenerate_text" in html and "Doctor" in html


def test_the_failure_demo_prints_under_300_lines_and_names_its_runs(tmp_path: Path) -> None:
    """Issue 33.17: 1,313 lines for 200 steps (a step line and a samples batch every step),
    and runs named by timestamp. A real process, its whole terminal output counted."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(trackmux.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-m", "trackmux", "demo", "--failure",
                           "reward-hacking", "--dir", str(tmp_path), "--no-report"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = (done.stdout + done.stderr).splitlines()
    assert len(lines) < 300, len(lines)
    live = [line for line in lines if line.startswith("[trackmux doctor]")]
    assert len(live) >= 6  # findings are never summarised away
    steps = [int(line.split(" ")[0][5:]) for line in lines if line.startswith("step:")]
    assert steps[0] == 0 and steps[-1] == 199 and len(steps) <= 21
    assert any("not printed:" in line for line in lines)  # says what it left out
    [spool] = tmp_path.glob("trackmux-demo/*/spool.db")
    reader = SpoolReader(spool.parent)
    try:
        assert reader.meta()["name"] == "reward-hacking"
        assert len(reader.events_of_kind("samples")) == 200  # the spool keeps every step
    finally:
        reader.close()
    assert "run reward-hacking (id " in done.stdout
    healthy = CliRunner().invoke(cli, ["demo", "--steps", "3", "--seed", "2", "--dir",
                                       str(tmp_path / "h"), "--no-report"])
    assert "run healthy-seed2 (id " in healthy.output, healthy.output
