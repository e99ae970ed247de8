"""One batch of samples per step for the backends' own read-back tests (issue 23): 24
samples in 6 groups of 4 with reward = the sample's index, so ``sample_policy="best"``
with ``sample_rows=8`` must show exactly the two best groups (samples 16-23) each step."""

from __future__ import annotations

from pathlib import Path

from trackmux.core.events import SamplesEvent
from trackmux.core.values.samples import to_event

STEPS = (1, 2, 3)
OPTIONS = {"sample_rows": 8, "sample_policy": "best"}
BEST = list(range(16, 24))
COLUMNS = ("step", "sample", "uid", "reward", "response", "tokens", "logprob/mean")


def sample_events(t0: float) -> list[SamplesEvent]:
    out = []
    for step in STEPS:
        event, problems = to_event(
            "rollout/samples",
            {"uid": [f"g{i // 4}" for i in range(24)], "reward": [float(i) for i in range(24)],
             "response": [f"step {step} answer {i}" for i in range(24)]},
            step, t0 + step, tokens={"logprob": [[-0.5] * (i + 1) for i in range(24)]})
        assert not problems
        out.append(event)
    return out


def check_rows(step: int, rows: list[list[object]]) -> None:
    """The rows a backend shows of step ``step`` (cells as the backend keeps them)."""
    assert [str(r[1]) for r in rows] == [str(i) for i in BEST], rows
    assert [str(r[0]) for r in rows] == [str(step)] * len(BEST)
    assert [str(r[4]) for r in rows] == [f"step {step} answer {i}" for i in BEST]
    assert [float(r[6]) for r in rows] == [-0.5] * len(BEST)  # type: ignore[arg-type]


def check_columns(columns: list[str] | tuple[str, ...]) -> None:
    """The header a backend keeps for each step's table: core's fallback columns."""
    assert tuple(str(c) for c in columns) == COLUMNS, columns


def samples_spool(tmp_path: Path, t0: float = 1.7e9) -> Path:
    """A finished run's spool holding :func:`sample_events` (the run dir)."""
    from trackmux.core.spool.writer import SpoolWriter

    run_dir = tmp_path / "spool" / "p" / "r1"
    writer = SpoolWriter(run_dir)
    writer.set_meta(run_id="r1", project="p", name="samples", state="finished",
                    started_at=t0)
    for event in sample_events(t0):
        writer.append(event)
    writer.close()
    return run_dir
