"""Score the doctor on both corpora and print the README's scoreboard as markdown.

Run from the repository root: ``python tests/doctor/real/tools/scoreboard.py``. Each case is
replayed into a spool in a temporary folder and diagnosed offline (``corpus.judge``, the path
of ``trackmux doctor RUN --json``); the verdict is the test's: a failure is *found* when a
warning or critical finding starts near its labelled onset, a healthy run is *clean* when no
warning or critical finding is raised. Where the doctor says what it read
(``trackmux.doctor.offline.coverage_of``), its verdict is shown beside each case: "not judged"
tells a run it could not read apart from a run it found healthy.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corpus import (
    CASES_DIR,
    DIALECT_DIR,
    Verdict,
    is_long,
    judge,
    load_cases,
    replay,
    score,
    span,
)


def _status(v: Verdict) -> str:
    if v.case["label"] == "failure":
        return "found" if v.ok else "**missed**"
    return "clean" if v.ok else "**false alarm**"


def read_verdicts(cases: list[dict[str, Any]], root: Path) -> dict[str, str]:
    """The doctor's own word on what it read of each case, where this trackmux says it."""
    try:
        from trackmux.doctor.offline import coverage_of
    except ImportError:
        return {}
    return {c["id"]: str(coverage_of(replay(c, root / c["id"])).get("verdict", ""))
            for c in cases}


def board(verdicts: list[Verdict], read: dict[str, str]) -> list[str]:
    out = ["| case | label | fault | onset | steps (span) | long | verdict | the doctor said "
           "| what it read |",
           "|---|---|---|---|---|---|---|---|---|"]
    for v in verdicts:
        c = v.case
        said = ", ".join(f"`{f['rule']}`@{f['step']} ({f['severity']})"
                         for f in v.findings) or "nothing"
        onset = c.get("onset_step")
        points = len({s for pts in c["series"].values() for s, _ in pts})
        out.append(f"| `{c['id']}` | {c['label']} | {c.get('fault') or '-'} "
                   f"| {'-' if onset is None else onset} | {points} ({span(c)}) "
                   f"| {'yes' if is_long(c) else 'no'} | {_status(v)} | {said} "
                   f"| {read.get(c['id'], '-').replace('|', '/')} |")
    return out


def main() -> int:
    real_cases, dialect_cases = load_cases(CASES_DIR), load_cases(DIALECT_DIR)
    with tempfile.TemporaryDirectory() as tmp:
        real = list(judge(real_cases, Path(tmp) / "real"))
        dialect = list(judge(dialect_cases, Path(tmp) / "dialect"))
        read = {**read_verdicts(real_cases, Path(tmp) / "real-read"),
                **read_verdicts(dialect_cases, Path(tmp) / "dialect-read")}
    lines = ["### Real runs", "", f"Score: {score(real).line()}.", "", *board(real, read), "",
             "### Dialect runs (synthetic)", "", f"Score: {score(dialect).line()}.", "",
             *board(dialect, read)]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
