"""Print the count of test cases per category from the JUnit files tox wrote, why each
skipped test was skipped (reasons grouped, with the tests), and a final
'N passed, N failed, N skipped' line. Exit non-zero if any case failed or none ran."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def category(classname: str, env: str) -> str:
    parts = classname.split(".")
    if len(parts) >= 3 and parts[0] == "tests":
        return f"{parts[1]}/{parts[2].removeprefix('test_')}"
    return f"{env}/{parts[0] if parts else '?'}"


def skip_reason(element: ET.Element) -> str:
    """pytest writes ``message="reason"`` (and ``file:line: reason`` as text)."""
    text = (element.get("message") or element.text or "").strip()
    return text.removeprefix("Skipped: ") or "(no reason given)"


def main(directory: str) -> int:
    passed: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    reasons: dict[str, list[str]] = {}
    for path in sorted(Path(directory).glob("*.xml")):
        env = path.stem
        for case in ET.parse(path).getroot().iter("testcase"):
            name = f"{category(case.get('classname', ''), env)} [{env}]"
            if case.find("failure") is not None or case.find("error") is not None:
                failed[name] += 1
            elif (skip := case.find("skipped")) is not None:
                skipped[name] += 1
                reasons.setdefault(skip_reason(skip), []).append(
                    f"{case.get('classname', '')}::{case.get('name', '')} [{env}]")
            else:
                passed[name] += 1
    names = sorted(set(passed) | set(failed) | set(skipped))
    width = max((len(n) for n in names), default=10)
    print("\ntest cases per category")
    for name in names:
        print(f"  {name:<{width}}  {passed[name]:4d} passed  {failed[name]:3d} failed"
              f"  {skipped[name]:3d} skipped")
    if reasons:
        print("\nskipped, and why")
        for reason, cases in sorted(reasons.items(), key=lambda item: -len(item[1])):
            print(f"  {len(cases):3d} x {reason}")
            for case in cases[:5]:
                print(f"        {case}")
            if len(cases) > 5:
                print(f"        ... and {len(cases) - 5} more")
    total_p, total_f, total_s = sum(passed.values()), sum(failed.values()), sum(skipped.values())
    print(f"{total_p} passed, {total_f} failed, {total_s} skipped")
    return 1 if total_f or not total_p else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ".tox/junit"))
