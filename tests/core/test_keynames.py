"""KeyNames (core/backends/keynames.py): a backend's renaming made injective for a run,
the same names again after a resume in any order, each renamed key said once. The real
stores are in tests/backends/test_mlflow.py and test_swanlab.py (test_distinct_keys_*)."""

from __future__ import annotations

import logging
import random

import pytest

from trackmux.core.backends.keynames import KeyNames
from trackmux.plugins.mlflow import mlflow_key
from trackmux.plugins.swanlab import swanlab_key

MLFLOW_KEYS = ["a@b", "a_at_b", "loss#1", "loss_1", "x//y", "x/y", "loss/", "loss",
               "val-core/acc/mean@5"]
SWANLAB_KEYS = ["loss/", "loss", " loss", "./loss", "acc", "acc."]


@pytest.mark.parametrize("rename,keys", [(mlflow_key, MLFLOW_KEYS),
                                         (swanlab_key, SWANLAB_KEYS)])
def test_distinct_keys_get_distinct_names_in_any_order(rename: object, keys: list[str]
                                                       ) -> None:
    for seed in range(20):
        order = keys[:]
        random.Random(seed).shuffle(order)
        names = KeyNames(rename, "test", max_length=250)  # type: ignore[arg-type]
        for key in order:
            names(key)
        given = {key: names(key) for key in keys}
        assert len(set(given.values())) == len(keys), given
        assert all(rename(name) == name for name in given.values())  # type: ignore[operator]


def test_the_same_names_come_back_from_the_state_in_any_order() -> None:
    first = KeyNames(mlflow_key, "test", max_length=250)
    for key in ["a@b", "loss#1", "x//y", "loss/"]:  # renamed keys take the plain names
        first(key)
    first.prepare(["a_at_b", "loss_1", "x/y", "loss", "plain"])
    before = {key: first(key) for key in [*MLFLOW_KEYS, "plain"]}
    assert before["a@b"] == "a_at_b" and before["a_at_b"].startswith("a_at_b_")
    assert before["plain"] == "plain"
    for seed in range(10):
        order = [*MLFLOW_KEYS, "plain"]
        random.Random(seed).shuffle(order)
        again = KeyNames(mlflow_key, "test", max_length=250, state=first.state())
        assert {key: again(key) for key in order} == before


def test_valid_keys_of_one_call_keep_their_names() -> None:
    names = KeyNames(mlflow_key, "test", max_length=250)
    names.prepare(["a@b", "a_at_b", "loss#1", "loss_1"])
    assert names("a_at_b") == "a_at_b" and names("loss_1") == "loss_1"
    assert names("a@b").startswith("a_at_b_") and names("loss#1").startswith("loss_1_")


def test_verl_names_stay_when_nothing_collides() -> None:
    names = KeyNames(mlflow_key, "test", max_length=250)
    assert names("val-core/acc/mean@5") == "val-core/acc/mean_at_5"
    assert names.state()["renamed"] == {"val-core/acc/mean@5": "val-core/acc/mean_at_5"}


def test_a_long_key_suffix_fits_the_limit() -> None:
    names = KeyNames(mlflow_key, "test", max_length=250)
    a, b = "x" * 249 + "@", "x" * 249 + "#"
    assert names(a) != names(b) and max(len(names(a)), len(names(b))) <= 250


def test_each_renamed_key_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    names = KeyNames(mlflow_key, "mlflow metric", max_length=250)
    with caplog.at_level(logging.INFO, logger="trackmux"):
        for _ in range(3):
            names.prepare(["a_at_b", "a@b"])
            names("a@b")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "'a@b'" in warnings[0].getMessage()
    assert "taken" in warnings[0].getMessage()


def test_clearml_title_series_collisions_and_its_own_mark_stay_apart() -> None:
    from trackmux.plugins.clearml import MARK, clearml_key, title_series

    names = KeyNames(clearml_key, "clearml key", max_length=255, reserved=["/".join(MARK)])
    names.prepare(["loss", "loss/loss", "trackmux/seq", "reward/mean"])
    pairs = {key: title_series(names(key)) for key in
             ["loss", "loss/loss", "trackmux/seq", "reward/mean"]}
    assert pairs["loss"] == ("loss", "loss") and pairs["reward/mean"] == ("reward", "mean")
    assert len(set(pairs.values())) == 4 and MARK not in pairs.values()
