"""The unified diff a file tool's confirmation shows (issue 32 section 2). Pure.

The diff is what the person approves, so it must say every byte that changes and no
more: lines are split at ``\\n`` only (a ``\\r`` or a form feed stays inside its line,
where the faithful rendering shows it as an escape), a last line without a newline is
followed by ``\\ No newline at end of file`` (so adding or dropping that newline is a
visible change), and nothing is normalised. The text is the hunks of a unified diff
with three lines of context (`FileChange.diff` in protocol/events.py says the format);
``patch``/``git apply`` read it once given a ``---``/``+++`` header.

A change to a large file is usually small: the common head and tail lines are skipped
before `difflib.SequenceMatcher` looks at the rest, so a one-line edit of a 1 MB file
costs a pass over its lines, not a quadratic match.
"""

from __future__ import annotations

import difflib
from typing import Final

import attrs

__all__ = ["CONTEXT", "NO_NEWLINE", "Diff", "split_lines", "unified_diff"]

#: Lines of context around each change.
CONTEXT: Final = 3
#: The line after a diff line whose file line has no ``\n`` (as diff(1) writes it).
NO_NEWLINE: Final = "\\ No newline at end of file\n"


@attrs.frozen
class Diff:
    """A diff's text and how many lines it adds and removes."""

    text: str
    added: int
    removed: int


def split_lines(text: str) -> list[str]:
    """``text`` as lines, each keeping its ``\\n`` (the last may have none); split at
    ``\\n`` only, unlike `str.splitlines`."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _range(start: int, stop: int) -> str:
    """A hunk header's range, 1-based, the way diff(1) and difflib write it."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


def _line(prefix: str, line: str) -> str:
    return f"{prefix}{line}" if line.endswith("\n") else f"{prefix}{line}\n{NO_NEWLINE}"


def unified_diff(old: str, new: str) -> Diff:
    """The hunks turning ``old`` into ``new`` (empty text when they are equal)."""
    a, b = split_lines(old), split_lines(new)
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    start = max(0, head - CONTEXT)
    a_mid = a[start : len(a) - max(0, tail - CONTEXT)]
    b_mid = b[start : len(b) - max(0, tail - CONTEXT)]
    out: list[str] = []
    added = removed = 0
    matcher = difflib.SequenceMatcher(None, a_mid, b_mid, autojunk=False)
    for group in matcher.get_grouped_opcodes(CONTEXT):
        first, last = group[0], group[-1]
        old_range = _range(start + first[1], start + last[2])
        new_range = _range(start + first[3], start + last[4])
        out.append(f"@@ -{old_range} +{new_range} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(_line(" ", line) for line in a_mid[i1:i2])
                continue
            if tag in ("replace", "delete"):
                out.extend(_line("-", line) for line in a_mid[i1:i2])
                removed += i2 - i1
            if tag in ("replace", "insert"):
                out.extend(_line("+", line) for line in b_mid[j1:j2])
                added += j2 - j1
    return Diff(text="".join(out), added=added, removed=removed)
