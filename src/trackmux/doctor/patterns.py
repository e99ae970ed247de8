"""Key patterns: globs (``actor/*kl*``) and ``re:`` regular expressions, as predicates.
(Apart from detector.py so the dialect table can compile its patterns without a cycle.)"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable


def compile_pattern(pattern: str) -> Callable[[str], bool]:
    """One pattern as a predicate; raises ValueError for a bad one."""
    if not pattern:
        raise ValueError("an empty pattern")
    if pattern.startswith("re:"):
        try:
            regex = re.compile(pattern[3:])
        except re.error as exc:
            raise ValueError(f"bad regular expression {pattern!r}: {exc}") from None
        return lambda key: regex.search(key) is not None
    regex = re.compile(fnmatch.translate(pattern))
    return lambda key: regex.match(key) is not None
