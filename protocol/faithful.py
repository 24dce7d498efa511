"""A confirmation's tool arguments drawn faithfully: every character the person approves
is one they can see (R77). Pure; no prompt_toolkit import: every Python front-end (the
REPL's dialog, the Telegram and Discord bots, scripts) draws a confirmation from these
lines (issue 29 finding 5), and the web page's twin is held equal by a test.

A confirmation is a security boundary: the person approves exactly what they are shown,
so the rendering must not hide, join or reorder anything the command contains. The
rules (the web page's ``faithfulLines`` in engine/server/static/app.js applies the same
ones; tests/protocol/test_faithful.py runs both on one table and compares):

- **Lines.** A string splits at ``\\n`` only (the one line break ``sh`` knows). Each line
  of a multi-line value gets a number in the gutter and ends with ``⏎``, so
  ``echo safe⏎touch x`` can never pass for one ``echo``.
- **Escapes.** Control characters (C0 but ``\\n``, DEL, C1), format characters (zero-width
  spaces and joiners, the bidi controls U+202A–202E, U+2066–2069, U+200E/F, U+061C, BOM,
  tag characters), every space but U+0020 (NBSP, the U+2000 block, ideographic space,
  line and paragraph separators), private-use and surrogate code points and a few
  blank-looking letters and selectors are shown as a Python-style escape (``\\t``,
  ``\\r``, ``\\x1b``, ``\\u202e``, ``\\U000e0041``) in their own piece kind, which the
  front-ends draw in a marked style: a literal backslash in the command stays a plain
  ``\\`` and is told apart by that style, not by doubling it (doubling would make every
  ``printf '\\n'`` read differently from what the model wrote). The table is
  `INVISIBLE_RANGES`, explicit rather than read from ``unicodedata`` so that Python and
  the browser (whose Unicode tables differ by version) escape the same code points.
- **Spaces.** A run of `SPACE_RUN` or more spaces, and any spaces ending a line, are
  shown as ``⟨N spaces⟩``: a command padded with thousands of blanks cannot push its
  tail out of sight, and trailing blanks are not invisible.
- **Arguments.** ``{"command": str}`` alone shows just the command. Otherwise each
  argument has a ``name:`` line: a one-line value follows on the same line, a
  multi-line string on numbered lines under it; an argv list (``command`` as a list of
  strings) shows one word per line, labelled ``[0]``, ``[1]``…, where a newline inside
  a word is the escape ``\\n``; any other value is its JSON (``ensure_ascii=False``),
  escaped by the same rules.

`plain_text` draws the lines where no style can mark a piece (a chat's code block, a
log): a gutter ``label│`` on numbered lines, each escape inside ``⟨…⟩`` (``⟨\\x1b⟩``, so a
literal backslash never passes for one), and the mark characters ``⟨ ⟩ ⏎`` escaped
where the command itself holds them, so nothing in the command can forge a mark.

`wrap_rows` then cuts lines to a terminal width (the REPL scrolls the rows; nothing is
ever cut away — the web page lets CSS wrap instead). Each piece keeps how many
characters of the original it stands for (`Piece.source`), so a front-end can say how
much of the command is out of view.
"""

from __future__ import annotations

import json
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from agentrio.protocol.events import FileChange

__all__ = [
    "INVISIBLE_RANGES",
    "NEWLINE_MARK",
    "SPACE_RUN",
    "FaithfulLine",
    "Piece",
    "PieceKind",
    "Row",
    "cell_width",
    "confirm_lines",
    "diff_lines",
    "escape_char",
    "faithful_lines",
    "is_invisible",
    "line_pieces",
    "one_line",
    "plain_text",
    "source_length",
    "wrap_rows",
]

PieceKind = Literal["text", "escape", "mark", "key"]

#: Code points shown as an escape (inclusive ranges, sorted). ``\n`` is not here: it
#: splits lines. Keep in step with ``INVISIBLE_RANGES`` in engine/server/static/app.js
#: (a test compares the two and checks this one covers the categories Cc, Cf, Zs, Zl,
#: Zp, Co and Cs of the running Python's Unicode data).
INVISIBLE_RANGES: Final[tuple[tuple[int, int], ...]] = (
    (0x0000, 0x0009),  # C0 controls before \n (NUL … TAB)
    (0x000B, 0x001F),  # C0 controls after \n (VT, FF, CR, ESC …)
    (0x007F, 0x00A0),  # DEL, C1 controls, NBSP
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x0600, 0x0605),  # Arabic number signs (format)
    (0x061C, 0x061C),  # Arabic letter mark (bidi)
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x115F, 0x1160),  # Hangul fillers (blank letters)
    (0x1680, 0x1680),  # Ogham space
    (0x17B4, 0x17B5),  # Khmer inherent vowels (invisible)
    (0x180B, 0x180F),  # Mongolian selectors and vowel separator
    (0x2000, 0x200F),  # en/em… spaces, zero-width space/joiners, LRM, RLM
    (0x2028, 0x202F),  # line/paragraph separators, bidi embeddings/overrides, NNBSP
    (0x205F, 0x206F),  # medium math space, word joiner, invisible operators, bidi isolates
    (0x2800, 0x2800),  # braille blank
    (0x3000, 0x3000),  # ideographic space
    (0x3164, 0x3164),  # Hangul filler
    (0xD800, 0xF8FF),  # surrogates, private use
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFEFF, 0xFEFF),  # zero-width no-break space (BOM)
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF9, 0xFFFB),  # interlinear annotation controls
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),  # Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0001, 0xE0001),  # language tag
    (0xE0020, 0xE007F),  # tag characters (invisible ASCII look-alikes)
    (0xE0100, 0xE01EF),  # variation selectors supplement
    (0xF0000, 0xFFFFD),  # supplementary private use A
    (0x100000, 0x10FFFD),  # supplementary private use B
)
_STARTS: Final = [start for start, _ in INVISIBLE_RANGES]

#: Spaces in a row from which the run is shown as ``⟨N spaces⟩``.
SPACE_RUN: Final = 8
#: Marks drawn at the end of a line that a newline ends.
NEWLINE_MARK: Final = "⏎"
_NAMED: Final = {"\t": "\\t", "\r": "\\r", "\n": "\\n"}


@attrs.frozen
class Piece:
    """A run of one kind: ``text`` as is, ``escape`` (an invisible character's escape),
    ``mark`` (``⏎``, a space run), ``key`` (an argument's name). ``source`` counts the
    original characters it stands for (0 for names, which the command does not hold)."""

    kind: PieceKind
    text: str
    source: int


@attrs.frozen
class FaithfulLine:
    """One line: a gutter ``label`` (line number, argv index, or empty) and its pieces."""

    label: str
    pieces: tuple[Piece, ...]


@attrs.frozen
class Row:
    """One screen row of a wrapped line; ``label`` only on a line's first row."""

    label: str
    pieces: tuple[Piece, ...]
    continued: bool = False


def is_invisible(char: str) -> bool:
    """Whether ``char`` (one code point) is shown as an escape."""
    code = ord(char)
    index = bisect_right(_STARTS, code) - 1
    return index >= 0 and code <= INVISIBLE_RANGES[index][1]


def escape_char(char: str) -> str:
    """The escape of one code point: ``\\t``, ``\\x1b``, ``\\u202e``, ``\\U000e0041``."""
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _spaces(count: int) -> Piece:
    return Piece("mark", f"⟨{count} space{'s' if count != 1 else ''}⟩", count)


def line_pieces(line: str, *, escape_newlines: bool = False) -> tuple[Piece, ...]:
    """The pieces of one line of text (``line`` holds no ``\\n`` unless
    ``escape_newlines``, where each shows as the escape ``\\n``)."""
    pieces: list[Piece] = []
    text: list[str] = []

    def flush() -> None:
        if text:
            pieces.append(Piece("text", "".join(text), len(text)))
            text.clear()

    index = 0
    end = len(line)
    while index < end:
        char = line[index]
        if char == " ":
            stop = index
            while stop < end and line[stop] == " ":
                stop += 1
            count = stop - index
            if count >= SPACE_RUN or stop == end:
                flush()
                pieces.append(_spaces(count))
            else:
                text.extend(" " * count)
            index = stop
            continue
        if is_invisible(char) or (escape_newlines and char == "\n"):
            flush()
            pieces.append(Piece("escape", escape_char(char), 1))
        else:
            text.append(char)
        index += 1
    flush()
    return tuple(pieces)


def one_line(text: str) -> str:
    """``text`` as one line of unstyled characters, shown faithfully (a rule's
    ``covers``, a directory): newlines, control and invisible characters as
    ``⟨\\u202e⟩``-style escapes, as `plain_text` marks them."""
    return "".join(_plain_piece(piece) for piece in line_pieces(text, escape_newlines=True))


def _text_lines(value: str) -> list[FaithfulLine]:
    """A string as numbered lines (no number when it is one line)."""
    parts = value.split("\n")
    numbered = len(parts) > 1
    lines = []
    for number, part in enumerate(parts, 1):
        pieces = line_pieces(part)
        if number < len(parts):
            pieces = (*pieces, Piece("mark", NEWLINE_MARK, 1))
        lines.append(FaithfulLine(str(number) if numbered else "", pieces))
    return lines


def _is_argv(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(word, str) for word in value)


def faithful_lines(args: Mapping[str, Any]) -> list[FaithfulLine]:
    """Every argument of a tool call as lines (see the module docstring). ``command``
    comes first; the others follow in their order."""
    names = sorted(args, key=lambda name: name != "command")
    if names == ["command"] and isinstance(args["command"], str):
        return _text_lines(args["command"])
    lines: list[FaithfulLine] = []
    for name in names:
        value = args[name]
        key = line_pieces(str(name), escape_newlines=True)
        head = (Piece("key", "".join(p.text for p in key), 0),)
        if isinstance(value, str) and "\n" in value:
            count = value.count("\n") + 1
            lines.append(FaithfulLine("", (*head, Piece("key", f": ({count} lines)", 0))))
            lines.extend(_text_lines(value))
        elif isinstance(value, str):
            lines.append(FaithfulLine("", (*head, Piece("key", ": ", 0), *line_pieces(value))))
        elif _is_argv(value) and value:
            words = f"{len(value)} word{'s' if len(value) != 1 else ''}"
            lines.append(FaithfulLine("", (*head, Piece("key", f": (argv, {words})", 0))))
            for index, word in enumerate(value):
                lines.append(FaithfulLine(f"[{index}]", line_pieces(word, escape_newlines=True)))
        else:
            shown = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
            lines.append(
                FaithfulLine(
                    "", (*head, Piece("key", ": ", 0), *line_pieces(shown, escape_newlines=True))
                )
            )
    return lines


def diff_lines(diff: str) -> list[FaithfulLine]:
    """A file change's diff (`agentrio.protocol.events.FileChange.diff`) as lines: each
    line's marker (``+``, ``-``, a space, ``@@``) in the gutter, its text by the same
    escape rules as an argument (a ``\\r``, a bidi control, trailing spaces visible);
    ``\\ No newline at end of file`` as a mark. Nothing is dropped: every character of
    a file line is a piece of some line here."""
    lines: list[FaithfulLine] = []
    for line in diff.split("\n")[:-1] if diff.endswith("\n") else diff.split("\n"):
        if line.startswith("@@"):
            lines.append(FaithfulLine("@@", (Piece("key", line[2:].strip(), 0),)))
        elif line.startswith("\\"):
            lines.append(FaithfulLine("", (Piece("mark", line, 0),)))
        else:
            lines.append(FaithfulLine(line[:1], line_pieces(line[1:])))
    return lines


def confirm_lines(
    args: Mapping[str, Any], change: FileChange | None = None, interrupted: str = ""
) -> list[FaithfulLine]:
    """What a confirmation shows: its arguments (`faithful_lines`), then, for a file
    change (issue 32), a ``diff:`` line and the diff (`diff_lines`), and the directory
    "Always allow edits under this directory" would cover. A call met again after its
    task stopped while it ran (``details.interrupted``, issue 34) is led by an
    ``interrupted:`` line saying it may have partly run."""
    lines = faithful_lines(args)
    if interrupted:
        said = (attrs.evolve(p, source=0) for p in line_pieces(interrupted, escape_newlines=True))
        lines.insert(0, FaithfulLine("", (Piece("key", "interrupted: ", 0), *said)))
    if change is None:
        return lines
    count = f"+{change.added} -{change.removed} lines{', a new file' if change.created else ''}"
    lines.append(FaithfulLine("", (Piece("key", f"diff ({count}):", 0),)))
    lines.extend(diff_lines(change.diff))
    if change.rule_dir:
        where = line_pieces(change.rule_dir, escape_newlines=True)
        lines.append(FaithfulLine("", (Piece("key", "this directory: ", 0), *where)))
    return lines


#: Characters a `plain_text` rendering escapes in text, since its marks use them.
_MARK_CHARS: Final = frozenset("⟨⟩" + NEWLINE_MARK)


def _plain_piece(piece: Piece) -> str:
    if piece.kind == "escape":
        return f"⟨{piece.text}⟩"
    if piece.kind == "text" and _MARK_CHARS & set(piece.text):
        return "".join(f"⟨{escape_char(c)}⟩" if c in _MARK_CHARS else c for c in piece.text)
    return piece.text


def plain_text(lines: Sequence[FaithfulLine]) -> str:
    """``lines`` as unstyled text, one row per line (see the module docstring):
    ``label│ `` before each line when any line has a label, escapes as ``⟨\\x1b⟩``."""
    width = max((len(line.label) for line in lines), default=0)
    rows = []
    for line in lines:
        gutter = line.label.rjust(width) + "│ " if width else ""
        rows.append(gutter + "".join(_plain_piece(piece) for piece in line.pieces))
    return "\n".join(rows)


def source_length(pieces: Iterable[Piece]) -> int:
    """How many original characters ``pieces`` stand for."""
    return sum(piece.source for piece in pieces)


def cell_width(char: str) -> int:
    """Terminal cells of one code point: 2 for wide East Asian ones, 0 for combining
    marks, else 1 (escapes are ASCII, so only ``text`` pieces need this)."""
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _split_text(text: str, room: int, cwidth: Callable[[str], int]) -> tuple[str, str]:
    """The longest head of ``text`` that fits ``room`` cells (at least one code point,
    so a row always advances), and the rest."""
    used = 0
    for index, char in enumerate(text):
        width = cwidth(char)
        if used + width > room and index > 0:
            return text[:index], text[index:]
        used += width
    return text, ""


def _wrap_line(line: FaithfulLine, width: int, cwidth: Callable[[str], int]) -> list[Row]:
    rows: list[list[Piece]] = [[]]
    used = 0
    for piece in line.pieces:
        if piece.kind != "text":
            size = len(piece.text)
            if used and used + size > width:
                rows.append([])
                used = 0
            rows[-1].append(piece)
            used += size
            continue
        rest = piece.text
        while rest:
            if used >= width:
                rows.append([])
                used = 0
            head, rest = _split_text(rest, width - used, cwidth)
            head_width = sum(cwidth(c) for c in head)
            if head_width > width - used and rows[-1]:  # one wide character, no room left
                rows.append([])
                used = 0
            rows[-1].append(Piece("text", head, len(head)))
            used += head_width
    return [
        Row(line.label if index == 0 else "", tuple(pieces), index > 0)
        for index, pieces in enumerate(rows)
    ]


def wrap_rows(
    lines: Sequence[FaithfulLine], width: int, cwidth: Callable[[str], int] = cell_width
) -> list[Row]:
    """``lines`` cut into rows of at most ``width`` cells (the gutter not included).
    Escapes and marks are never split (one longer than a row gets a row of its own);
    text splits anywhere. Every piece of every line lands in some row."""
    width = max(width, 1)
    return [row for line in lines for row in _wrap_line(line, width, cwidth)]
