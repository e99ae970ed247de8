"""Token arrays at the door (issue 34.6-8, 33.21): counts that are not counts, arrays
that are not arrays and integers beyond int32 drop only what is bad, named once, and the
samples arrive; nothing is wrapped; ragged per-sample numpy/torch rows round-trip exactly
as lists do."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import pytest

import trackmux
from trackmux.samples import read

np = pytest.importorskip("numpy")

BATCH = {"reward": [0.5, 1.0], "response": ["a", "b"]}


def _logged(tmp_path: Path, **kwargs: Any) -> tuple[list[dict[str, Any]], Any]:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    run.log_samples("s", BATCH, step=0, **kwargs)
    run.finish(timeout=30)
    rows = list(read.iter_samples(run.dir, tokens=True))
    return rows, run


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan, -1, 1.5, "3", None,
                                 np.float64("inf")])
def test_token_lengths_that_are_not_counts_keep_the_batch(tmp_path: Path, bad: Any,
                                                          caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger="trackmux"):
        rows, run = _logged(tmp_path, tokens={"lp": [[1.0, 2.0], [3.0]]},
                            token_lengths=[bad, 1])
    assert [r["reward"] for r in rows] == [0.5, 1.0]  # the rest of the batch arrived
    assert [r["tokens"]["lp"] for r in rows] == [[1.0, 2.0], [3.0]]  # kept whole
    assert any("token_lengths row 0" in m for m in caplog.messages)
    assert sum(run.samples_problems.values()) == 1


@pytest.mark.parametrize("lengths", [[math.inf, 1], 7, "12", np.array([np.inf, 1.0])])
def test_strict_names_token_lengths(tmp_path: Path, lengths: Any) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    with pytest.raises(ValueError, match="token_lengths"):
        run.log_samples("s", BATCH, tokens={"lp": [[1.0], [2.0]]}, token_lengths=lengths,
                        strict=True)
    run.finish(timeout=30)


def test_padded_numpy_with_an_infinite_length_keeps_rows_whole(tmp_path: Path) -> None:
    rows, _ = _logged(tmp_path, tokens={"lp": np.ones((2, 3), dtype=np.float32)},
                      token_lengths=np.array([np.inf, 2.0]))
    assert [len(r["tokens"]["lp"]) for r in rows] == [3, 3]


@pytest.mark.parametrize("bad", [None, 3.0, 7, np.float32(2.0), np.array(1.0), "text"])
def test_an_array_that_is_none_or_a_scalar_drops_itself_not_the_samples(
        tmp_path: Path, bad: Any, caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger="trackmux"):
        rows, run = _logged(tmp_path, tokens={"lp": bad, "ids": [[1, 2], [3]]})
    assert [r["reward"] for r in rows] == [0.5, 1.0]
    assert [r["tokens"]["ids"] for r in rows] == [[1, 2], [3]]
    assert all("lp" not in r["tokens"] for r in rows)
    said = [m for m in caplog.messages if "token array 'lp'" in m]
    assert len(said) == 1 and "left out" in said[0]
    assert sum(run.samples_problems.values()) == 1
    run2 = trackmux.init(project="p", backends=[], dir=tmp_path / "strict")
    with pytest.raises(ValueError, match="token array 'lp'"):
        run2.log_samples("s", BATCH, tokens={"lp": bad}, strict=True)
    run2.finish(timeout=30)


def test_tokens_that_are_not_a_dict_drop_only_the_tokens(tmp_path: Path) -> None:
    rows, run = _logged(tmp_path, tokens=[[1.0], [2.0]])
    assert [r["reward"] for r in rows] == [0.5, 1.0] and rows[0]["tokens"] == {}
    assert sum(run.samples_problems.values()) == 1


def _forms(values: list[list[int]], dtype: str) -> dict[str, Any]:
    """The same int values as a list, padded numpy, ragged numpy, and the torch forms."""
    width = max(len(r) for r in values)
    padded = np.zeros((len(values), width), dtype=dtype)
    for i, r in enumerate(values):
        padded[i, :len(r)] = r
    out: dict[str, Any] = {"list": values, "numpy": padded,
                           "numpy rows": [np.array(r, dtype=dtype) for r in values]}
    try:
        import torch
    except ImportError:
        return out
    if dtype == "int64":
        out["torch"] = torch.from_numpy(padded)
        out["torch rows"] = [torch.tensor(r, dtype=torch.int64) for r in values]
    return out


@pytest.mark.parametrize("big", [2**40 + 7, 2**31, -(2**31) - 1, 2**63 - 1])
def test_int64_beyond_int32_is_refused_the_same_in_every_form(tmp_path: Path,
                                                              big: int) -> None:
    from trackmux.core.lifecycle.run import DisabledRun

    forms = _forms([[1, big], [3]], "int64")
    assert len(forms) >= 3
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    strict = DisabledRun("p", None, "rank 1", strict=True)  # checks as Run does
    for step, given in enumerate(forms.values()):
        run.log_samples("s", BATCH, step=step, tokens={"ids": given, "ok": [[1, 2], [3]]},
                        token_lengths=[2, 1])
        with pytest.raises(ValueError, match=f"token array 'ids': integer {big} "):
            strict.log_samples("s", BATCH, tokens={"ids": given}, token_lengths=[2, 1],
                               strict=True)
    run.finish(timeout=30)
    for step, form in enumerate(forms):
        rows = list(read.iter_samples(run.dir, step=step, tokens=True))
        assert [r["reward"] for r in rows] == [0.5, 1.0], form
        assert "ids" not in rows[0]["tokens"], form  # refused, never stored wrapped
        assert rows[1]["tokens"]["ok"] == [3], form
    said = [p for p in run.samples_problems if f"integer {big} is out of the int32 range" in p]
    assert said and run.samples_problems[said[0]] == len(forms)  # one message, every form


@pytest.mark.parametrize("dtype", ["uint32", "uint64"])
def test_unsigned_beyond_int32_is_refused_not_wrapped(tmp_path: Path, dtype: str) -> None:
    rows, run = _logged(tmp_path, tokens={"ids": np.array([[2**32 - 1, 1], [5, 6]],
                                                          dtype=dtype)})
    assert "ids" not in rows[0]["tokens"]
    assert any("4294967295 is out of the int32 range" in p for p in run.samples_problems)


def test_int64_within_int32_and_padding_beyond_it_are_kept_exactly(tmp_path: Path) -> None:
    """Only real values are judged: padding past token_lengths may hold anything."""
    ids = np.array([[2**31 - 1, -(2**31), 2**40], [7, 2**40, 2**40]], dtype=np.int64)
    rows, run = _logged(tmp_path, tokens={"ids": ids}, token_lengths=[2, 1])
    assert [r["tokens"]["ids"] for r in rows] == [[2**31 - 1, -(2**31)], [7]]
    assert run.samples_problems == {}


def test_ragged_numpy_rows_round_trip_like_lists(tmp_path: Path) -> None:
    gen = np.random.default_rng(0)
    lens = [5, 1, 0, 9]
    floats = [gen.normal(size=n).astype(np.float32) for n in lens]
    ids = [np.arange(n, dtype=np.int64) * 1000 for n in lens]
    masks = [np.ones(n, dtype=bool) for n in lens]
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    batch = {"reward": [0.0, 1.0, 2.0, 3.0]}
    run.log_samples("s", batch, step=0, tokens={"lp": floats, "ids": ids, "m": masks},
                    token_dtype="float32")
    run.log_samples("s", batch, step=1, tokens={"lp": [f.tolist() for f in floats],
                                                "ids": [i.tolist() for i in ids]},
                    token_dtype="float32")
    run.log_samples("s", batch, step=2, tokens={"lp": floats}, token_lengths=[2, 1, 0, 3])
    run.finish(timeout=30)
    arrays = read.step_payload(run.dir, "s", 0)["tokens"]
    listed = read.step_payload(run.dir, "s", 1)["tokens"]
    assert arrays["lp"]["values"] == listed["lp"]["values"]
    assert arrays["lp"]["values"][3] == pytest.approx(floats[3].tolist(), rel=1e-3)
    assert arrays["ids"]["values"] == listed["ids"]["values"] == [i.tolist() for i in ids]
    assert arrays["m"]["values"][0] == [1] * 5
    cut = read.step_payload(run.dir, "s", 2)["tokens"]["lp"]["values"]
    assert [len(r) for r in cut] == [2, 1, 0, 3]
    assert cut[3] == pytest.approx(floats[3][:3].tolist(), rel=1e-3)


def test_ragged_rows_of_the_wrong_shape_are_named(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    with pytest.raises(ValueError, match=r"token array 'lp': row 1 must be 1-D"):
        run.log_samples("s", BATCH, tokens={"lp": [np.zeros(2), np.zeros((2, 2))]},
                        strict=True)
    run.finish(timeout=30)


def test_ragged_torch_rows_round_trip(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    lens = [4, 0, 2]
    lp = [torch.randn(n, requires_grad=True) for n in lens]  # autograd leaves: no graph kept
    bf = [t.detach().to(torch.bfloat16) for t in lp]
    ids = [torch.arange(n) + 2**30 for n in lens]
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    run.log_samples("s", {"reward": [0.0, 1.0, 2.0]}, step=0,
                    tokens={"lp": lp, "bf": bf, "ids": ids}, token_dtype="float32")
    run.finish(timeout=30)
    got = read.step_payload(run.dir, "s", 0)["tokens"]
    assert got["lp"]["values"][0] == pytest.approx(lp[0].detach().tolist(), rel=1e-3)
    assert got["bf"]["dtype"] == "b2"
    assert got["bf"]["values"][2] == pytest.approx(bf[2].float().tolist(), rel=1e-3)
    assert got["ids"]["values"] == [t.tolist() for t in ids]
