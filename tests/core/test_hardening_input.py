"""Issue 18, classes 1, 7, 8 and 11: a call either lands whole or raises a TypeError /
ValueError naming the argument; what the writer thread must encode is checked at the door,
and rank != 0 (DisabledRun) checks exactly what rank 0 checks."""

from __future__ import annotations

import enum
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trackmux
from spool_support import spool_meta
from trackmux.core.lifecycle.run import DisabledRun
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.values import normalize


class Phase(str, enum.Enum):
    TRAIN = "train/loss"


def _events(run: Any) -> list[Any]:
    reader = SpoolReader(run.dir)
    try:
        return list(reader.iter_events())
    finally:
        reader.close()


def test_str_subclass_keys_land_as_plain_str(tmp_path: Path) -> None:
    """An enum member with a str mixin and numpy.str_ are stored as the str they hold, on
    the slow path (first sight) and on the fast path (a key already known)."""
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    run.log({"train/loss": 1.0}, step=0)          # makes the key known: fast path next
    run.log({Phase.TRAIN: 2.0}, step=1)
    run.log({np.str_("train/loss"): 3.0}, step=2)
    run.log({np.str_("fresh"): np.float32(4.0), "nested": {Phase.TRAIN: 5}}, step=3)
    run.log_table(np.str_("t"), [np.str_("c")], [[np.str_("cell")]])
    summary = run.finish()
    assert summary.dropped == 0
    metrics = [e for e in _events(run) if e.kind == "metrics"]
    assert [e.data for e in metrics] == [
        {"train/loss": 1.0}, {"train/loss": 2.0}, {"train/loss": 3.0},
        {"fresh": 4.0, "nested/train/loss": 5}]
    assert all(type(k) is str for e in metrics for k in e.data)


@pytest.mark.parametrize("data", [
    {"a/b": 1.0, "a": {"b": 2.0}},
    {"a": {"b": 2.0}, "a/b": 1.0},
    {"a": {"b": {"c": 1}}, "a/b": {"c": 2}},
])
def test_nested_and_flat_keys_that_collide_are_refused(tmp_path: Path, data: Any) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path, strict=True)
    with pytest.raises(ValueError, match=r"two values for key 'a/b"):
        run.log(data)
    run.finish()
    run = trackmux.init(project="p", backends=[], dir=tmp_path)  # default: the first is kept
    run.log(data, step=0)
    summary = run.finish()
    [problem] = summary.problems
    assert problem.kind.startswith("metric 'a/b") and "two values" in problem.message
    [event] = [e for e in _events(run) if e.kind == "metrics"]
    assert len(event.data) == 1 and next(iter(event.data)).startswith("a/b")


def test_an_int_beyond_float_range_names_the_key(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path, strict=True)
    run.log({"big": 1.0})
    with pytest.raises(ValueError, match=r"'big'.*beyond float range"):
        run.log({"big": 10**400})          # a known key: the fast path
    with pytest.raises(ValueError, match=r"'other'.*beyond float range"):
        run.log({"other": -(10**400)})
    assert run.finish().dropped == 0


@pytest.mark.parametrize("argument,kwargs", [
    ("name", {"name": "bad\udc80name"}),
    ("project", {"project": "bad\ud800"}),
    ("tags[1]", {"tags": ["ok", "bad\udfff"]}),
    ("tags[0]", {"tags": [Path("/tmp")]}),
    ("tags", {"tags": "one-string"}),
    ("name", {"name": "x" * 1001}),
    ("config", {"config": {"k": "v\ud800"}}),
])
def test_unencodable_names_tags_config_are_refused_at_init(
        tmp_path: Path, argument: str, kwargs: dict[str, Any]) -> None:
    with pytest.raises((TypeError, ValueError), match=argument.replace("[", r"\[")):
        trackmux.init(backends=[], dir=tmp_path, **kwargs)
    assert not list(tmp_path.rglob("spool.db")), "a refused init must not leave a run"


def test_str_subclass_names_are_stored_plain(tmp_path: Path) -> None:
    run = trackmux.init(project=np.str_("proj"), name=Phase.TRAIN, tags=[np.str_("t")],
                        backends=[], dir=tmp_path, config={np.str_("k"): Phase.TRAIN})
    run.finish()
    meta = spool_meta(run.dir)
    assert (meta["project"], meta["name"], meta["tags"]) == ("proj", "train/loss", ["t"])
    config = next(e for e in _events(run) if e.kind == "config").config
    assert config == {"k": "train/loss"}


def test_finish_with_a_numpy_exit_code_keeps_the_final_batch(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    for step in range(50):
        run.log({"x": float(step)})
    summary = run.finish(exit_code=np.int64(3))
    assert summary.status == "failed" and summary.events == 50 and summary.complete
    meta = spool_meta(run.dir)
    assert meta["state"] == "failed" and meta["exit_code"] == 3


def test_finish_refuses_a_non_int_exit_code_before_changing_anything(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    run.log({"x": 1.0})
    with pytest.raises(TypeError, match="exit_code"):
        run.finish(exit_code="1")  # type: ignore[arg-type]
    run.log({"x": 2.0})            # still running
    assert run.finish().events == 2


def test_a_cyclic_config_names_the_path(tmp_path: Path, strict: None) -> None:
    config: dict[str, Any] = {"a": {"b": []}}
    config["a"]["b"].append(config)
    with pytest.raises(ValueError, match=r"config\.a\.b\[0\] contains itself"):
        trackmux.init(project="p", backends=[], dir=tmp_path, config=config)
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    with pytest.raises(ValueError, match="cycle"):
        run.log_config(config)
    shared = [1, 2]
    run.log_config({"x": shared, "y": shared})   # shared, not cyclic: fine
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(500):
        node["n"] = {}
        node = node["n"]
    with pytest.raises(ValueError, match="nested more than"):
        run.log_config(deep)                     # no RecursionError
    assert run.finish().dropped == 0


def test_text_and_captions_that_utf8_cannot_encode_are_refused(tmp_path: Path,
                                                               strict: None) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    with pytest.raises(ValueError, match="text"):
        run.log_text("k", "bad \ud800")
    with pytest.raises(ValueError, match=r"rows\[0\]\[1\]"):
        run.log_table("t", ["a", "b"], [["ok", "bad \udc00"]])
    with pytest.raises(ValueError, match="caption"):
        run.log_image("img", np.zeros((4, 4), dtype=np.uint8), caption="\ud800")
    assert run.finish().dropped == 0


def test_text_utf8_cannot_encode_is_kept_repaired_by_default(tmp_path: Path) -> None:
    """Default mode: the text, the cell and the caption arrive with '?' in place of what
    UTF-8 cannot encode, and each is named once in the run's problems."""
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    run.log_text("k", "bad \ud800")
    run.log_table("t", ["a", "b"], [["ok", "bad \udc00"]])
    run.log_image("img", np.zeros((4, 4), dtype=np.uint8), caption="\ud800")
    summary = run.finish()
    assert {p.kind for p in summary.problems} == {"text 'k'", "table cell 't'",
                                                   "caption 'img'"}
    by_kind = {e.kind: e for e in _events(run)}
    assert by_kind["text"].text == "bad ?"
    assert by_kind["table"].rows == (("ok", "bad ?"),)
    assert by_kind["image"].caption == "?"


def test_a_step_whose_item_fails_names_step() -> None:
    class Broken:
        ndim = 0

        def item(self) -> int:
            raise RuntimeError("Tensor.item() cannot be called on meta tensors")

    with pytest.raises(TypeError, match="step"):
        normalize.normalize_step(Broken())


def test_a_300_character_run_name_is_delivered_to_a_shortened_file(tmp_path: Path) -> None:
    name = "grpo-" + "x" * 295
    run = trackmux.init(project="p", name=name, backends=["file"], dir=tmp_path / "spool",
                        backend_options={"file": {"root": str(tmp_path / "out")}})
    run.log({"a": 1.0})
    summary = run.finish(timeout=30)
    assert summary.complete, summary
    files = [f for f in (tmp_path / "out" / "p").glob("*.jsonl")
             if not f.name.endswith((".tables.jsonl", ".text.jsonl", ".histograms.jsonl",
                                     ".artifacts.jsonl"))]
    assert len(files) == 1 and len(files[0].name.encode()) <= 255
    assert files[0].name.startswith("grpo-xxx")
    assert orjson.loads(files[0].read_bytes().splitlines()[0]) == {"step": 0, "data": {"a": 1.0}}


def test_wandb_project_names_wandb_refuses_are_mapped() -> None:
    from trackmux.plugins.wandb import WANDB_PROJECT_MAX, wandb_project

    assert wandb_project("team/qwen2:grpo") == "team-qwen2-grpo"
    assert wandb_project("plain-name_1.0") == "plain-name_1.0"
    long = wandb_project("p" * 300)
    assert len(long) == WANDB_PROJECT_MAX and long != wandb_project("p" * 299)
    for bad in "/\\#?%:\n":
        assert bad not in wandb_project(f"a{bad}b")


# -- DisabledRun checks what Run checks ---------------------------------------------------

_keys = st.one_of(st.text(max_size=6), st.integers(), st.none(),
                  st.sampled_from(["", "a\x00b", "x" * 1001, "ok\ud800"]),
                  st.just(np.str_("np")), st.just(Phase.TRAIN))
_values = st.one_of(st.floats(allow_nan=True), st.integers(min_value=-(10**400),
                                                           max_value=10**400),
                    st.text(max_size=3), st.none(), st.booleans(),
                    st.lists(st.integers(), max_size=2))


def _outcome(call: Any) -> str:
    try:
        call()
    except (TypeError, ValueError) as exc:
        return type(exc).__name__
    return "ok"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Any:
    run = trackmux.init(project="p", backends=[], dir=tmp_path_factory.mktemp("pair"),
                        strict=True)
    yield run, DisabledRun("p", None, "test", strict=True)
    run.finish()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(data=st.dictionaries(_keys, st.one_of(_values, st.dictionaries(_keys, _values,
                                                                       max_size=2)),
                            max_size=3),
       key=_keys, text=st.one_of(st.text(max_size=5), st.integers(), st.just("\ud800")),
       caption=st.one_of(st.none(), st.text(max_size=3), st.integers(), st.just("\udc00")),
       step=st.one_of(st.none(), st.integers(min_value=-2, max_value=5), st.floats(),
                      st.booleans()))
def test_disabled_run_accepts_and_refuses_what_run_does(pair: Any, data: Any, key: Any,
                                                         text: Any, caption: Any,
                                                         step: Any) -> None:
    run, disabled = pair
    image = np.zeros((2, 2), dtype=np.uint8)
    for name, call in [
        ("log", lambda r: r.log(data, step=step)),
        ("log_text", lambda r: r.log_text(key, text, step=step)),
        ("log_table", lambda r: r.log_table(key, ["c"], [[text]], step=step)),
        ("log_image", lambda r: r.log_image(key, image, step=step, caption=caption)),
        ("log_config", lambda r: r.log_config({"k": text, "d": data})),
    ]:
        if name == "log_config" and any(not isinstance(k, str) for k in data):
            continue  # config keys are str()-ed on both: covered by the other calls
        assert _outcome(lambda c=call: c(run)) == _outcome(lambda c=call: c(disabled)), name


def test_disabled_run_refuses_bad_images_like_run(tmp_path: Path) -> None:
    disabled = DisabledRun("p", None, "test", strict=True)
    with pytest.raises(TypeError, match="image"):
        disabled.log_image("k", object())
    with pytest.raises(ValueError, match="image"):
        disabled.log_image("k", np.zeros((0, 3), dtype=np.uint8))
    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        disabled.log_image("k", fifo)
    with pytest.raises(TypeError, match="exit_code"):
        disabled.finish(exit_code=1.5)  # type: ignore[arg-type]
    assert math.isfinite(float(disabled.step))
