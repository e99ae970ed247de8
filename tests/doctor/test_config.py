"""init(doctor=...), TRACKMUX_DOCTOR and rules files: checked at init, naming what is bad."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import trackmux
from trackmux.doctor.config import resolve


def test_forms() -> None:
    assert resolve(False) == {} and resolve("off") == {}
    every = resolve(True)
    assert set(every) == {"nonfinite", "reward_collapse", "reward_frozen", "kl_blowup",
                          "entropy_collapse", "entropy_explosion", "grad_explosion",
                          "length_blowup", "length_collapse", "loss_blowup",
                          "degenerate_text", "stall",
                          "val_regression", "flat_groups", "component_divergence",
                          "mismatch", "frozen_start", "idle_steps", "clip_fraction",
                          "zero_std_groups",
                          "staleness", "reward_hacking", "overoptimization",
                          "tool_failures", "turn_count_shift", "turn_limit_truncation",
                          "tool_dominance"}
    tuned = resolve({"kl_blowup": {"ratio": 5, "keys": ["my/kl"]}, "stall": False})
    assert "stall" not in tuned and tuned["kl_blowup"]["ratio"] == 5.0
    assert tuned["kl_blowup"]["keys"] == ["my/kl"]
    assert "stall" not in resolve({"stall": {"enabled": False}})


@pytest.mark.parametrize("setting,named", [
    ({"kl_blowp": {}}, "unknown doctor rule(s) ['kl_blowp']"),
    ({"kl_blowup": {"ratoi": 3}}, "doctor rule 'kl_blowup' has no parameter(s) ['ratoi']"),
    ({"kl_blowup": {"ratio": -1}}, "'ratio' must be > 0"),
    ({"kl_blowup": {"ratio": "high"}}, "'ratio' must be a finite number"),
    ({"reward_collapse": {"drop": 1.5}}, "'drop' must be in (0, 1]"),
    ({"reward_collapse": {"keys": ["re:(unclosed"]}}, "bad regular expression 're:(unclosed'"),
    ({"reward_collapse": {"keys": [""]}}, "an empty pattern"),
    ({"stall": {"severity": "fatal"}}, "'severity' must be one of"),
    ({"stall": 3}, "must be true, false or a mapping"),
    (42, "doctor must be True, False"),
])
def test_bad_settings_fail_at_init_naming_them(tmp_path: Path, setting: Any, named: str) -> None:
    with pytest.raises(ValueError) as err:
        trackmux.init(project="p", backends=["file"], dir=tmp_path, doctor=setting)
    assert named in str(err.value)
    assert not (tmp_path / "p").exists()  # before any I/O


def test_rules_files_toml_and_yaml(tmp_path: Path) -> None:
    toml = tmp_path / "rules.toml"
    toml.write_text('[kl_blowup]\nratio = 6.0\nkeys = ["actor/ppo_kl"]\n\n'
                    '[stall]\nenabled = false\n')
    assert resolve(str(toml))["kl_blowup"]["ratio"] == 6.0 and "stall" not in resolve(str(toml))
    yaml = tmp_path / "rules.yaml"
    yaml.write_text("entropy_collapse:\n  fraction: 0.05\nval_regression: false\n")
    got = resolve(str(yaml))
    assert got["entropy_collapse"]["fraction"] == 0.05 and "val_regression" not in got
    bad = tmp_path / "bad.toml"
    bad.write_text("[kl_blowup]\nratio = 0\n")
    with pytest.raises(ValueError, match="'ratio' must be > 0"):
        trackmux.init(project="p", backends=["file"], dir=tmp_path, doctor=str(bad))
    broken = tmp_path / "broken.yaml"
    broken.write_text("kl_blowup: [\n")
    with pytest.raises(ValueError, match=r"broken\.yaml"):
        resolve(str(broken))
    with pytest.raises(ValueError, match="does not exist"):
        resolve(str(tmp_path / "missing.toml"))
    with pytest.raises(ValueError, match=r"use \.toml, \.yaml or \.yml"):
        resolve(str(toml.with_suffix(".ini").write_text("x") and toml.with_suffix(".ini")))


def test_environment_variable(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("TRACKMUX_DOCTOR", str(tmp_path / "nope.yaml"))
    with pytest.raises(ValueError, match=r"nope\.yaml"):
        trackmux.init(project="p", backends=["file"], dir=tmp_path)
    monkeypatch.setenv("TRACKMUX_DOCTOR", "off")
    run = trackmux.init(project="p", backends=["file"], dir=tmp_path,
                        backend_options={"file": {"root": str(tmp_path / "o")}})
    run.finish(timeout=30)
    from trackmux.core.spool.reader import SpoolReader

    reader = SpoolReader(run.dir)
    assert "watchers" not in reader.meta()  # the doctor did not watch this run
    reader.close()


def test_a_plugin_ships_a_detector_users_tune_it_and_it_runs() -> None:
    """``trackmux_register_detectors``: a third party's rule, checked and run like ours."""
    from trackmux.core.backends.registry import get_registry
    from trackmux.core.events import MetricsEvent
    from trackmux.doctor import registry
    from trackmux.doctor.detector import Detector, Param
    from trackmux.doctor.engine import Doctor
    from trackmux.hookspecs import hookimpl

    class ZeroSignal(Detector):
        rule = "zero_signal"

        def update(self, event: Any) -> list[Any]:
            share = event.data.get("grpo/zero_share", 0.0) if isinstance(
                event, MetricsEvent) else 0.0
            if share > self.params["max_share"]:
                return [self.finding(event.step, ["grpo/zero_share"], f"{share:.0%} no signal")]
            return []

    class Plugin:
        @hookimpl
        def trackmux_register_detectors(self, register: Any) -> None:
            register("zero_signal", ZeroSignal,
                     params={"max_share": Param(0.5, "fraction"), "persist": 5})

    manager = get_registry().manager
    plugin = Plugin()
    manager.register(plugin)
    try:
        registry.rules(reload=True)
        with pytest.raises(ValueError, match="'max_share' must be in"):
            resolve({"zero_signal": {"max_share": 2}})
        rules = resolve({"zero_signal": {"max_share": 0.8}})
        assert rules["zero_signal"]["max_share"] == 0.8 and rules["zero_signal"]["persist"] == 5
        doctor = Doctor(rules)
        assert doctor.feed(MetricsEvent({"grpo/zero_share": 0.7}, 1, 1.0)) == []
        [found] = doctor.feed(MetricsEvent({"grpo/zero_share": 0.9}, 2, 2.0))
        assert (found.rule, found.step, found.message) == ("zero_signal", 2, "90% no signal")
    finally:
        manager.unregister(plugin)
        registry.rules(reload=True)
