"""Logged text made inert before it reaches a terminal.

Model output, table cells, keys and run names are user data. Printed raw, an ESC starts an
escape sequence the terminal obeys: OSC 52 writes the clipboard, OSC 8 makes a link, OSC 0
retitles the window, CSI moves the cursor or clears the screen, BS and CR overwrite what
was printed, C1 controls (U+0080..U+009F) act as ESC on some terminals, and bidi overrides
(U+202A..U+202E, U+2066..U+2069) reorder what the reader sees. Every place that prints
logged text (``trackmux samples``, ``show``, ``doctor``, ``runs``, ``diff``, the console
backend) passes it through :func:`for_terminal` once, as whole lines, so no printer can
forget a field.

Each such character is shown as its ``\\uXXXX`` escape: visible, and inside JSON output
(``--json``) the same character again, so the JSON stays valid and means the same.
Tab and line feed are kept.
"""

from __future__ import annotations

import re

#: C0 controls but tab and line feed, DEL, C1 controls, the bidi marks, embeddings,
#: overrides and isolates, and the Unicode line and paragraph separators
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e"
                    "\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def for_terminal(text: str) -> str:
    """``text`` with every character a terminal would act on shown as ``\\uXXXX``."""
    if text.isascii() and text.isprintable():  # the usual line: nothing to look at
        return text
    return UNSAFE.sub(_escape, text)
