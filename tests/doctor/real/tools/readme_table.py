"""Print the README's case tables from the case files (run from the repository root)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corpus import CASES_DIR, DIALECT_DIR, load_cases, steps


def rows(directory: Path, real: bool) -> list[str]:
    out = ["| id | framework | label | fault | onset | steps | source | transcription |",
           "|---|---|---|---|---|---|---|---|"]
    for c in load_cases(directory):
        where = c["source"] if real else c["keys_from"]
        how = c["notes"].replace("|", "/")
        out.append(f"| `{c['id']}` | {c['framework']} | {c['label']} | {c.get('fault') or '-'} "
                   f"| {c.get('onset_step') if c.get('onset_step') is not None else '-'} "
                   f"| {len(steps(c))} | <{where}> | {how} |")
    return out


if __name__ == "__main__":
    lines = ["### Real runs (cases/)", "", *rows(CASES_DIR, True), "",
             "### Dialect runs (dialect/, synthetic)", "", *rows(DIALECT_DIR, False)]
    print("\n".join(lines))
