"""Score the doctor on both corpora and print the README's scoreboard as markdown.

Run from the repository root: ``python tests/doctor/real/tools/scoreboard.py``. Each case is
replayed into a spool in a temporary folder and diagnosed offline (``corpus.judge``, the path
of ``trackmux doctor RUN --json``); the verdict is the test's: a failure is *found* when a
warning or critical finding starts near its labelled onset, a healthy run is *clean* when no
warning or critical finding is raised.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corpus import CASES_DIR, DIALECT_DIR, Verdict, is_long, judge, load_cases, score, span


def _status(v: Verdict) -> str:
    if v.case["label"] == "failure":
        return "found" if v.ok else "**missed**"
    return "clean" if v.ok else "**false alarm**"


def board(verdicts: list[Verdict]) -> list[str]:
    out = ["| case | label | fault | onset | steps (span) | long | verdict | the doctor said |",
           "|---|---|---|---|---|---|---|---|"]
    for v in verdicts:
        c = v.case
        said = ", ".join(f"`{f['rule']}`@{f['step']} ({f['severity']})"
                         for f in v.findings) or "nothing"
        onset = c.get("onset_step")
        points = len({s for pts in c["series"].values() for s, _ in pts})
        out.append(f"| `{c['id']}` | {c['label']} | {c.get('fault') or '-'} "
                   f"| {'-' if onset is None else onset} | {points} ({span(c)}) "
                   f"| {'yes' if is_long(c) else 'no'} | {_status(v)} | {said} |")
    return out


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        real = list(judge(load_cases(CASES_DIR), Path(tmp) / "real"))
        dialect = list(judge(load_cases(DIALECT_DIR), Path(tmp) / "dialect"))
    lines = ["### Real runs", "", f"Score: {score(real).line()}.", "", *board(real), "",
             "### Dialect runs (synthetic)", "", f"Score: {score(dialect).line()}.", "",
             *board(dialect)]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
