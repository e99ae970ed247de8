"""log_samples at the door and back from the spool: columns, rows, token arrays (ragged,
numpy, torch bf16), bad input dropped and named once (or raised with strict), rewind."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import pytest

import trackmux
from trackmux.core.spool.reader import SpoolReader
from trackmux.samples import read

np = pytest.importorskip("numpy")


def _batch(n: int = 8, group: int = 4) -> dict[str, Any]:
    return {"prompt": [f"question {i // group}" for i in range(n)],
            "response": [f"answer {i} " * (i + 1) for i in range(n)],
            "reward": [i / n for i in range(n)],
            "reward/format": np.arange(n) * 0.5,
            "uid": [f"g{i // group}" for i in range(n)],
            "policy_version": [3] * n}


def test_columns_and_ragged_tokens_round_trip(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    ragged = [[-0.5 * j for j in range(i + 1)] for i in range(8)]
    ids = [[j + i for j in range(i + 1)] for i in range(8)]
    words = [[f"w{j}" for j in range(i + 1)] for i in range(8)]
    run.log_samples("rollouts", _batch(), step=5,
                    tokens={"logprob": ragged, "ids": ids, "tok": words})
    run.finish(timeout=30)
    assert read.list_sample_keys(run.dir) == {"rollouts": [5]}
    payload = read.step_payload(run.dir, "rollouts", 5)
    assert payload["count"] == 8 and payload["group"] == "uid"
    assert payload["reward"] == "reward" and payload["components"] == ["reward/format"]
    assert payload["groups"] == {"g0": [0, 1, 2, 3], "g1": [4, 5, 6, 7]}
    row = dict(zip(payload["columns"], payload["rows"][6], strict=True))
    assert row["response"] == "answer 6 " * 7 and row["reward/format"] == 3.0
    assert row["length"] == 7  # tokens of the first array
    assert payload["tokens"]["logprob"]["values"][3] == [0.0, -0.5, -1.0, -1.5]
    assert payload["tokens"]["ids"]["values"][2] == [2, 3, 4]
    assert payload["tokens"]["tok"]["values"][1] == ["w0", "w1"]
    rows = list(read.iter_samples(run.dir, key="rollouts"))
    assert [r["sample"] for r in rows] == list(range(8))
    assert rows[0]["prompt"] == "question 0" and rows[0]["step"] == 5


def test_rows_as_dicts_and_prompts_stored_once(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    long_prompt = "p" * 50_000
    rows = [{"prompt": long_prompt, "response": f"r{i}", "reward": float(i)} for i in range(64)]
    rows[3]["extra"] = "only here"
    run.log_samples("gen", rows, step=0)
    run.finish(timeout=30)
    got = list(read.iter_samples(run.dir))
    assert got[3]["extra"] == "only here" and got[4]["extra"] is None
    reader = SpoolReader(run.dir)
    blob = reader._conn.execute("SELECT length(data) FROM blobs").fetchone()[0]
    reader.close()
    assert blob < 50_000  # 64 copies of the prompt, stored (and compressed) once


def test_numpy_and_torch_padded_arrays_with_lengths(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    values = torch.arange(4 * 6, dtype=torch.float32).reshape(4, 6) / 8
    run.log_samples("s", {"reward": [1, 2, 3, 4]}, step=1,
                    tokens={"bf16": values.to(torch.bfloat16), "f32": values,
                            "ids": torch.arange(24).reshape(4, 6),
                            "np64": values.double().numpy()},
                    token_lengths=torch.tensor([6, 1, 3, 0]))
    run.log_samples("s", {"reward": [1.0]}, step=2, tokens={"f32": values[:1]},
                    token_dtype="float32")
    run.finish(timeout=30)
    payload = read.step_payload(run.dir, "s", 1)
    expect = [[v / 8 for v in range(r * 6, r * 6 + n)] for r, n in enumerate([6, 1, 3, 0])]
    for name in ("bf16", "f32", "np64"):
        got = payload["tokens"][name]["values"]
        assert [len(r) for r in got] == [6, 1, 3, 0]
        for a, b in zip(got, expect, strict=True):
            assert a == pytest.approx(b, rel=1e-2)
    assert payload["tokens"]["bf16"]["dtype"] == "b2"
    assert payload["tokens"]["f32"]["dtype"] == "f2"  # float16 by default
    assert payload["tokens"]["ids"]["values"][2] == [12, 13, 14]
    assert read.step_payload(run.dir, "s", 2)["tokens"]["f32"]["dtype"] == "f4"


def test_bad_cells_drop_their_sample_named_once_and_counted(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    batch = _batch()
    batch["reward"] = [0.1, {"no": 1}, 0.3, 0.4, 0.5, [1], 0.7, 0.8]
    with caplog.at_level(logging.WARNING, logger="trackmux"):
        run.log_samples("r", batch, step=0,
                        tokens={"lp": [[0.0] * (i + 1) for i in range(8)],
                                "short": [[1.0]] * 3})
        run.log_samples("r", batch, step=1)
    run.finish(timeout=30)
    warned = [r.getMessage() for r in caplog.records if "log_samples" in r.getMessage()]
    assert len(warned) == 2  # the bad cell once (rows 1 and 5, two calls), the array once
    assert "column 'reward' row 1" in warned[0]
    assert "token array 'short' has 3 rows" in warned[1]
    assert sum(run.samples_problems.values()) == 5
    rows = list(read.iter_samples(run.dir, step=0, tokens=True))
    assert [r["reward"] for r in rows] == [0.1, 0.3, 0.4, 0.5, 0.7, 0.8]
    assert [len(r["tokens"]["lp"]) for r in rows] == [1, 3, 4, 5, 7, 8]  # rows stay aligned
    assert "short" not in rows[0]["tokens"]


def test_strict_raises_naming_column_and_row(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    batch = _batch()
    batch["reward"][2] = object.__new__(type("Weird", (), {"__str__": None}))  # not a cell
    batch["reward"][2] = {"a": 1}
    with pytest.raises(ValueError, match=r"column 'reward' row 2"):
        run.log_samples("r", batch, strict=True)
    uneven = _batch()
    uneven["reward"] = uneven["reward"][:5]
    with pytest.raises(ValueError, match=r"column 'prompt' has 8 values but column 'reward'"):
        run.log_samples("r", uneven, strict=True)
    with pytest.raises(TypeError, match="samples must be a dict"):
        run.log_samples("r", "text", strict=True)
    with pytest.raises(ValueError, match="token_dtype"):
        run.log_samples("r", _batch(), token_dtype="int8", strict=True)
    run.log_samples("r", "text")  # default: not a batch at all, the call is dropped, counted
    run.log_samples("r", _batch(), token_dtype="int8")
    run.log_samples("r", uneven, step=0)  # default: the first 5 samples are kept
    summary = run.finish(timeout=30)
    assert summary.input_dropped == 2
    assert len(list(read.iter_samples(run.dir))) == 5


def test_nonfinite_values_survive(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path)
    run.log_samples("r", {"reward": [math.nan, math.inf, 1.0]}, step=0,
                    tokens={"lp": [[math.nan], [1e9], [-1.0]]})
    run.finish(timeout=30)
    rows = list(read.iter_samples(run.dir, tokens=True))
    assert math.isnan(rows[0]["reward"]) and rows[1]["reward"] == math.inf
    assert rows[1]["tokens"]["lp"] == [math.inf]  # beyond float16: inf, as numpy does
    payload = read.step_payload(run.dir, "r", 0)
    assert payload["rows"][0][0] is None  # JSON-able: non-finite as null


def test_disabled_run_checks_the_same(tmp_path: Path) -> None:
    from trackmux.core.lifecycle.run import DisabledRun

    run = DisabledRun("p", None, "rank 1")
    run.log_samples("r", _batch(), tokens={"lp": [[0.0]] * 8})
    with pytest.raises(ValueError, match=r"column 'reward' row 0"):
        run.log_samples("r", {"reward": [{"x": 1}]}, strict=True)


def test_rewind_supersedes_redone_steps_samples(tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=[], dir=tmp_path, run_id="r1")
    for step in range(5):
        run.log_samples("roll", {"reward": [float(step)], "attempt": [1]}, step=step)
    run.finish(timeout=30)
    again = trackmux.init(project="p", backends=[], dir=tmp_path, run_id="r1",
                          resume="allow", rewind_to=2)
    again.log_samples("roll", {"reward": [30.0], "attempt": [2]}, step=3)
    again.finish(timeout=30)
    assert read.list_sample_keys(again.dir) == {"roll": [0, 1, 2, 3]}
    assert [r["attempt"] for r in read.iter_samples(again.dir, step=3)] == [2]


def test_attached_worker_logs_samples_into_the_run(memory_backend: Any,
                                                   tmp_path: Path) -> None:
    run = trackmux.init(project="p", backends=["memory"], dir=tmp_path)
    rollout = trackmux.attach(role="rollout")
    rollout.log_samples("gen", _batch(), step=2, tokens={"lp": np.zeros((8, 3))})
    rollout.flush()
    run.finish(timeout=30)
    assert read.list_sample_keys(run.dir) == {"rollout/gen": [2]}
    tables = memory_backend[run.id].of_kind("table")
    assert [(t.key, len(t.rows)) for t in tables] == [("rollout/gen", 8)]
    assert tables[0].columns[:2] == ("step", "sample")
    assert "lp/mean" in tables[0].columns


def test_samples_travel_the_attach_wire_as_plain_tuples(tmp_path: Path) -> None:
    import pickle

    from trackmux.attached import wire
    from trackmux.core.events import TokenArray
    from trackmux.core.values.samples import to_event

    event, _ = to_event("k", _batch(), 1, 2.0, tokens={"lp": np.ones((8, 4))},
                        token_lengths=[4, 3, 2, 1, 4, 3, 2, 1])
    sent = pickle.dumps(wire.encode([event]))
    assert b"trackmux.core.events" not in sent  # builtins only: no class is pickled
    (back,) = wire.decode(pickle.loads(sent))
    assert back == event and isinstance(back.tokens[0], TokenArray)
