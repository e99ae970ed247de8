"""Bad input at the door, in strict mode (``strict=True``): a corpus and hypothesis
properties over log, log_table, log_image and init(config=...). Every call either works as
docs/values.md says or raises TypeError / ValueError naming the argument or key; none
corrupts the spool or stops delivery (good calls made after the bad ones still arrive in
the memory backend). The default mode (dropped, named once, counted) over the same corpus:
test_bad_input_default.py."""

from __future__ import annotations

import math
from collections.abc import Iterator
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trackmux
from trackmux.core.backends.registry import get_registry
from trackmux.core.spool.reader import SpoolReader
from trackmux.core.values.normalize import MAX_KEY_LENGTH
from trackmux.testing import memory

HYPO = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


class FloatRaises:
    def __float__(self) -> float:
        raise RuntimeError("no float for you")


class ItemRaises:
    ndim = 0

    def item(self) -> float:
        raise RuntimeError("no item for you")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[trackmux.Run]:
    """One run takes every bad call of this module; at the end good calls must arrive."""
    registry = get_registry()
    if "memory" not in registry.backends:
        registry.register_plugin(memory, "trackmux.testing.memory", "trackmux", "")
    root = tmp_path_factory.mktemp("bad")
    store = memory.MemoryStore()  # its own store: the memory_backend fixture clears the shared one
    run = trackmux.init(project="bad", backends=["memory"], dir=root, strict=True,
                        backend_options={"memory": {"store": store}})
    assert isinstance(run, trackmux.Run)
    yield run
    for step in range(10):
        run.log({"good/after": float(step)}, step=step)
    summary = run.finish(timeout=30)
    assert summary.complete and not summary.problems, summary
    got = store[run.id].metrics()["good/after"]
    assert [v for _, v in got] == [float(s) for s in range(10)]
    reader = SpoolReader(run.dir)
    events = list(reader.iter_events())
    assert not reader.damage and len(events) == summary.events
    reader.close()


def _names(exc: BaseException, *names: str) -> bool:
    text = str(exc)
    return any(name in text for name in names)


# -- keys ----------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["loss", "reward/mean", "val-core/acc/mean@5", "with space",
                                 "ünïcødé/损失", "emoji🙂", "a" * MAX_KEY_LENGTH, "@", "/"])
def test_accepted_keys(run: trackmux.Run, key: str) -> None:
    run.log({key: 1.0})


@pytest.mark.parametrize(("key", "error"), [
    ("", ValueError), ("a" * (MAX_KEY_LENGTH + 1), ValueError), ("tab\there", ValueError),
    ("new\nline", ValueError), ("nul\x00", ValueError), ("del\x7f", ValueError),
    (5, TypeError), (None, TypeError), (("a",), TypeError), (b"bytes", TypeError),
])
def test_rejected_keys_name_the_key(run: trackmux.Run, key: Any, error: type) -> None:
    with pytest.raises(error) as info:
        run.log({key: 1.0})
    assert _names(info.value, "key")


# -- values --------------------------------------------------------------------------
NUMPY_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                "uint64", "float16", "float32", "float64", "longdouble"]
TORCH_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_numpy_scalars_and_0d_arrays_of_every_dtype(run: trackmux.Run, dtype: str) -> None:
    for value in (np.array(1, dtype=dtype)[()], np.array(1, dtype=dtype)):
        run.log({f"np/{dtype}": value})
    with pytest.raises(TypeError, match=f"np/{dtype}"):
        run.log({f"np/{dtype}": np.ones(3, dtype=dtype)})


@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=str)
def test_torch_scalars_of_every_dtype(run: trackmux.Run, dtype: torch.dtype) -> None:
    run.log({f"torch/{dtype}": torch.tensor(1, dtype=dtype)})
    with pytest.raises(TypeError, match=f"torch/{dtype}"):
        run.log({f"torch/{dtype}": torch.ones(2, 2, dtype=dtype)})


@pytest.mark.parametrize("value", [None, "0.5", b"x", [1.0], (1,), {1.0}, FloatRaises(),
                                   ItemRaises(), np.str_("x"), np.datetime64("2024-01-01"),
                                   torch.tensor(1 + 2j), np.complex64(1j), object(),
                                   np.array([]), torch.tensor([])],
                         ids=lambda v: type(v).__name__)
def test_rejected_values_name_the_key(run: trackmux.Run, value: Any) -> None:
    with pytest.raises(TypeError, match="'bad/value'"):
        run.log({"bad/value": value})


@pytest.mark.parametrize(("value", "expected"), [
    (True, 1), (2**70, float(2**70)), (-(2**70), -float(2**70)), (Decimal("0.25"), 0.25),
    (Fraction(1, 4), 0.25), (float("inf"), math.inf), (float("-inf"), -math.inf),
])
def test_converted_values(run: trackmux.Run, memory_backend: Any, value: Any,
                          expected: float) -> None:
    from trackmux.core.values.normalize import normalize_metrics

    assert normalize_metrics({"k": value}) == {"k": expected}
    run.log({"converted": value})


def test_nan_and_nested_dicts(run: trackmux.Run) -> None:
    from trackmux.core.values.normalize import normalize_metrics

    out = normalize_metrics({"a": {"b": {"c": float("nan")}, "d": 1}})
    assert set(out) == {"a/b/c", "a/d"} and math.isnan(out["a/b/c"])
    run.log({"a": {"b": {"c": float("nan")}, "d": 1}})
    with pytest.raises(TypeError, match="key"):
        run.log({"a": {3: 1.0}})


def test_data_that_is_not_a_mapping(run: trackmux.Run) -> None:
    for data in ([("a", 1)], 1.0, "loss", None):
        with pytest.raises(TypeError, match="data"):
            run.log(data)  # type: ignore[arg-type]


# -- steps ---------------------------------------------------------------------------
def test_steps_negative_float_bool_are_rejected_naming_step(run: trackmux.Run) -> None:
    for step, error in ((-1, ValueError), (1.5, ValueError), (float("nan"), ValueError),
                        (True, TypeError), ("3", TypeError), ([1], TypeError),
                        (2**64, ValueError), (1e30, ValueError), (float("inf"), ValueError),
                        (np.int64(-2), ValueError), (torch.tensor(-1), ValueError)):
        with pytest.raises(error, match="step"):
            run.log({"x": 1.0}, step=step)
        with pytest.raises(error, match="step"):
            run.log_table("t", ["a"], [[1]], step=step)


def test_steps_repeated_backwards_float_none_numpy(run: trackmux.Run) -> None:
    for step in (5, 5, 2, 3.0, None, np.int32(7), torch.tensor(8), 0):
        run.log({"steps": 1.0}, step=step)
    assert run.step == 0


# -- tables --------------------------------------------------------------------------
def test_tables(run: trackmux.Run, memory_backend: Any) -> None:
    from trackmux.core.values.normalize import normalize_table

    cols, rows = normalize_table(["a", "b"], [[1, "x"], ["y", 2.5], [None, np.int64(3)],
                                              [object(), b"\xffbytes"]])
    assert cols == ("a", "b") and all(type(c) in (str, type(None)) for r in rows for c in r)
    run.log_table("ok/huge", ["text"], [["x" * 1_000_000]])
    run.log_table("ok/dicts", ["a", "b"], [{"a": 1, "b": 2}, {"a": 3}])
    for columns, rows_, error, name in (
        (["a", "b"], [[1]], ValueError, "rows[0]"),
        (["a"], [[1], [1, 2]], ValueError, "rows[1]"),
        ([], [], ValueError, "columns"),
        (["a", "a"], [[1, 2]], ValueError, "columns"),
        ("ab", [[1, 2]], TypeError, "columns"),
        ([1], [[1]], TypeError, "columns[0]"),
        ([""], [[1]], ValueError, "columns[0]"),
        (["a"], "rows", TypeError, "rows"),
        (["a"], [1, 2], TypeError, "rows[0]"),
        (["a"], None, TypeError, "rows"),
    ):
        with pytest.raises(error, match=name.replace("[", r"\[").replace("]", r"\]")):
            run.log_table("bad/table", columns, rows_)
    with pytest.raises(ValueError, match="key"):
        run.log_table("", ["a"], [[1]])


# -- images --------------------------------------------------------------------------
@pytest.mark.parametrize("image", [
    np.zeros((4, 5)), np.ones((4, 5, 3)) * 0.5, np.full((3, 4, 5), 300, dtype=np.int32),
    np.zeros((1, 4, 5), dtype=np.uint8), np.zeros((4, 5, 4), dtype=np.float32),
    np.array([[True, False]]), np.full((2, 2), np.nan), np.full((2, 2), -7, dtype=np.int8),
    np.full((2, 2), np.inf), torch.rand(3, 8, 8), torch.zeros(8, 8, dtype=torch.bfloat16),
    np.zeros((1, 1), dtype=np.uint16),
], ids=lambda a: f"{type(a).__name__}{tuple(a.shape)}{a.dtype}")
def test_accepted_images(run: trackmux.Run, image: Any) -> None:
    run.log_image("ok/image", image)


@pytest.mark.parametrize(("image", "error"), [
    (np.zeros((0, 5)), ValueError), (np.zeros((4,)), ValueError),
    (np.zeros((2, 3, 4, 5)), ValueError), (np.zeros((5, 6, 2)), ValueError),
    (np.zeros((4, 5), dtype=complex), TypeError), (np.array([["a"]]), TypeError),
    (np.broadcast_to(np.uint8(0), (9000, 9000)), ValueError), ("no/such/file.png", ValueError),
    (42, TypeError), (None, TypeError), ([[0, 1]], TypeError), (np.zeros((4, 5), dtype=object),
                                                                TypeError),
], ids=lambda v: repr(v)[:30] if not hasattr(v, "shape") else f"{v.shape}{v.dtype}")
def test_rejected_images_name_image(run: trackmux.Run, image: Any, error: type) -> None:
    with pytest.raises(error, match="image"):
        run.log_image("bad/image", image)


def test_image_key_and_caption_are_checked(run: trackmux.Run) -> None:
    with pytest.raises(ValueError, match="key"):
        run.log_image("", np.zeros((2, 2)))
    with pytest.raises(TypeError, match="caption"):
        run.log_image("img", np.zeros((2, 2)), caption=3)  # type: ignore[arg-type]


# -- config --------------------------------------------------------------------------
def test_init_config_of_any_shape(tmp_path: Path, memory_backend: Any) -> None:
    config = {1: "int key", "nested": {"a": [1, (2, 3), {4}], "t": torch.tensor([1.5, 2.0])},
              "nan": float("nan"), "np": np.float32(0.5), "obj": object(), "none": None,
              "path": tmp_path, "huge": 2**100, "bytes": b"\xff"}
    run = trackmux.init(project="cfg", backends=["memory"], dir=tmp_path, config=config)
    assert run.finish(timeout=60).complete  # returns once delivered; 60 s for a loaded CI
    stored = memory_backend[run.id].of_kind("config")[0].config
    assert stored["1"] == "int key" and stored["nested"]["t"] == [1.5, 2.0]
    assert stored["nan"] == "nan" and stored["np"] == 0.5 and stored["huge"] == str(2**100)
    for bad in ([("a", 1)], "config", 3):
        with pytest.raises(TypeError, match="config"):
            trackmux.init(project="cfg", backends=["memory"], dir=tmp_path, config=bad)


# -- properties ----------------------------------------------------------------------
keys = st.one_of(st.text(max_size=40), st.text(min_size=990, max_size=1010), st.integers(),
                 st.none(), st.sampled_from(["a/b", "x@5", "sp ace", "ctl\x01"]))
scalars = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(),
                    st.integers(min_value=2**63, max_value=2**200), st.booleans(), st.none(),
                    st.text(max_size=5), st.builds(np.float32, st.floats(width=32)),
                    st.builds(np.int64, st.integers(-2**63, 2**63 - 1)))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(min_size=1, max_size=5), inner,
                                                 max_size=3)), max_leaves=6)


@HYPO
@given(data=st.dictionaries(keys, values, max_size=4),
       step=st.one_of(st.none(), st.integers(-5, 10**12), st.floats(), st.booleans()))
def test_log_either_works_or_names_what_is_wrong(run: trackmux.Run, data: dict[Any, Any],
                                                 step: Any) -> None:
    try:
        run.log(data, step=step)
    except (TypeError, ValueError) as exc:
        assert _names(exc, "key", "step", "metric", "data"), exc
        named = [n for k in data for n in (str(k)[:20], repr(k)[:20])] + ["step", "key"]
        # a nested key is named flattened ('k/0'), as repr escapes it: compare unescaped
        said = (str(exc), str(exc).encode("ascii", "backslashreplace")
                .decode("unicode_escape", "replace"))
        assert any(n in text for n in named for text in said), exc


cells = st.one_of(st.none(), st.text(max_size=20), st.integers(), st.floats(), st.booleans(),
                  st.binary(max_size=5), st.builds(np.int16, st.integers(-100, 100)))


@HYPO
@given(columns=st.lists(st.one_of(st.text(max_size=8), st.integers()), max_size=4),
       rows=st.lists(st.lists(cells, max_size=5), max_size=5))
def test_log_table_either_works_or_names_the_argument(run: trackmux.Run, columns: list[Any],
                                                      rows: list[list[Any]]) -> None:
    try:
        run.log_table("prop/table", columns, rows)
    except (TypeError, ValueError) as exc:
        assert _names(exc, "columns", "rows"), exc


@HYPO
@given(shape=st.lists(st.integers(0, 6), max_size=4),
       dtype=st.sampled_from(["uint8", "int16", "float32", "float64", "bool", "complex64"]),
       scale=st.sampled_from([1.0, 255.0, -3.0, 1e9, float("nan")]))
def test_log_image_either_works_or_names_image(run: trackmux.Run, shape: list[int], dtype: str,
                                               scale: float) -> None:
    with np.errstate(all="ignore"):
        array = (np.random.default_rng(0).random(shape) * scale).astype(dtype)
    try:
        run.log_image("prop/image", array)
    except (TypeError, ValueError) as exc:
        assert "image" in str(exc), exc


def test_unstorable_values_never_poison_the_spool(tmp_path: Path, memory_backend: Any) -> None:
    """Values JSON cannot hold (ints beyond 64 bits, lone surrogates) are converted or
    rejected at the door; anything that still cannot be stored is dropped and counted,
    and the spool writer goes on (it used to lose every later batch)."""
    run = trackmux.init(project="poison", backends=["memory"], dir=tmp_path, strict=True,
                        config={"huge": 2**100, "nested": [2**64, -(2**70)]})
    assert isinstance(run, trackmux.Run)
    run.log_table("cells", ["n", "s"], [[2**80, "ok"], [1, "fine"]])
    with pytest.raises(ValueError, match="key"):
        run.log({"bad\ud800key": 1.0})
    with pytest.raises(ValueError, match="columns"):
        run.log_table("t", ["\udfff"], [[1]])
    # text UTF-8 cannot encode is refused at the door now (issue 18), not dropped later
    with pytest.raises(ValueError, match="text"):
        run.log_text("surrogate", "text with a lone \ud800 surrogate")
    with pytest.raises(ValueError, match=r"rows\[0\]\[0\]"):
        run.log_table("cells2", ["s"], [["cell \udc00"]])
    for step in range(20):
        run.log({"after": float(step)}, step=step)
    summary = run.finish(timeout=60)
    got = memory_backend[run.id]
    assert [v for _, v in got.metrics()["after"]] == [float(s) for s in range(20)]
    config = got.of_kind("config")[0].config
    assert config == {"huge": str(2**100), "nested": [str(2**64), str(-(2**70))]}
    # a column mixing text and numbers becomes all text (docs/values.md)
    assert got.of_kind("table")[0].rows == ((str(2**80), "ok"), ("1", "fine"))
    assert summary.dropped == 0 and not summary.pending
    reader = SpoolReader(run.dir)
    assert not reader.meta().get("dropped_events") and not reader.damage
    reader.close()
