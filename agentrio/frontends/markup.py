"""Text for chat platforms: the model's markdown converted to a platform's markup with
escaping that cannot inject markup, split at the platform's limit without breaking a
code block.

The core speaks in `Part`\\s: prose or code. `parse` reads the little markdown the
agent writes (fenced code blocks; inline `code` and **bold** stay in prose, for the
dialect to render), a `Dialect` renders parts (Telegram: HTML; Discord: markdown),
and `paginate` packs them into pages that each render within the limit. A code block too long for
one page is closed at the end of a page and reopened on the next, so every page is
well-formed on its own; a line too long for a page is cut by characters.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Final, Protocol

import attrs

__all__ = [
    "DISCORD_MARKDOWN",
    "TELEGRAM_HTML",
    "Dialect",
    "DiscordMarkdown",
    "Part",
    "TelegramHtml",
    "code",
    "paginate",
    "parse",
    "prose",
    "render",
    "utf16_length",
]

_FENCE: Final = re.compile(r"^```[^\n`]*\n?", re.MULTILINE)
#: Inline code, or bold (whose inside may hold inline code), within one line.
_INLINE: Final = re.compile(r"`([^`\n]+)`|\*\*([^*\n]+)\*\*")


@attrs.frozen
class Part:
    """A run of prose or of code (shown verbatim, monospaced)."""

    text: str
    is_code: bool = False


def prose(text: str) -> Part:
    return Part(text, False)


def code(text: str) -> Part:
    return Part(text, True)


def parse(markdown: str) -> list[Part]:
    """Fenced code blocks become code parts, the rest prose. An unclosed fence (output
    still streaming) runs to the end."""
    parts: list[Part] = []
    position, inside = 0, False
    for fence in _FENCE.finditer(markdown):
        chunk = markdown[position : fence.start()]
        if inside:
            chunk = chunk.removesuffix("\n")
        if chunk:
            parts.append(Part(chunk, inside))
        inside = not inside
        position = fence.end()
    rest = markdown[position:]
    if rest:
        parts.append(Part(rest, inside))
    return parts


class Dialect(Protocol):
    """One platform's markup."""

    #: The longest message, as `measure` counts.
    limit: int

    def measure(self, text: str) -> int: ...

    def prose(self, text: str) -> str:
        """``text`` as prose: every markup character escaped; inline code rendered."""
        ...

    def code_open(self) -> str: ...

    def code_close(self) -> str: ...

    def code_body(self, text: str) -> str:
        """``text`` inside a code block, escaped so it cannot close the block."""
        ...

    def bold(self, text: str) -> str: ...


def utf16_length(text: str) -> int:
    """Telegram counts message length in UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


class TelegramHtml:
    """Telegram's HTML parse mode: only ``&``, ``<`` and ``>`` are markup, and
    `html.escape` (with quotes) covers them in text and in code alike."""

    limit = 4096

    def measure(self, text: str) -> int:
        return utf16_length(text)

    def prose(self, text: str) -> str:
        """Escaped text; inline `code` and **bold** (within a line) become tags."""
        out: list[str] = []
        position = 0
        for match in _INLINE.finditer(text):
            out.append(html.escape(text[position : match.start()]))
            code_text, bold_text = match.group(1), match.group(2)
            if code_text is not None:
                out.append(f"<code>{html.escape(code_text)}</code>")
            else:
                out.append(f"<b>{self.prose(bold_text)}</b>")
            position = match.end()
        out.append(html.escape(text[position:]))
        return "".join(out)

    def code_open(self) -> str:
        return "<pre>"

    def code_close(self) -> str:
        return "</pre>"

    def code_body(self, text: str) -> str:
        return html.escape(text)

    def bold(self, text: str) -> str:
        return f"<b>{html.escape(text)}</b>"


TELEGRAM_HTML: Final = TelegramHtml()

#: What Discord's markdown reads as markup (emphasis, code, spoilers, quotes, headings,
#: lists, masked links, mentions/channels/emoji/timestamps ``<…>``, ``@everyone``):
#: a backslash before any of them shows the character itself.
DISCORD_SPECIAL: Final = frozenset("\\*_~`|<>#-+[]().:@")
_ZWSP: Final = "\u200b"


class DiscordMarkdown:
    """Discord's markdown: prose has every markup character backslash-escaped (so no
    formatting, link or mention can be injected; messages are also sent with no
    allowed mentions); code blocks are fenced, and a backtick inside one is followed by
    a zero-width space so that no run of three can close the block."""

    limit = 2000

    def measure(self, text: str) -> int:
        return utf16_length(text)  # never less than Discord's count of characters

    def escape(self, text: str) -> str:
        return "".join("\\" + c if c in DISCORD_SPECIAL else c for c in text)

    def prose(self, text: str) -> str:
        """Escaped text; inline `code` and **bold** (within a line) rendered."""
        out: list[str] = []
        position = 0
        for match in _INLINE.finditer(text):
            out.append(self.escape(text[position : match.start()]))
            code_text, bold_text = match.group(1), match.group(2)
            if code_text is not None:
                out.append(f"`{code_text}`")  # no backtick or newline inside: verbatim
            else:
                out.append(f"**{self.prose(bold_text)}**")
            position = match.end()
        out.append(self.escape(text[position:]))
        return "".join(out)

    def code_open(self) -> str:
        return "```\n"

    def code_close(self) -> str:
        return "\n```\n"  # what follows starts on a line of its own, even inline code

    def code_body(self, text: str) -> str:
        return text.replace("`", "`" + _ZWSP)

    def bold(self, text: str) -> str:
        return f"**{self.escape(text)}**"


DISCORD_MARKDOWN: Final = DiscordMarkdown()


def render(parts: Iterable[Part], dialect: Dialect) -> str:
    """``parts`` in ``dialect``'s markup, with no length limit."""
    out: list[str] = []
    for part in _merge(parts):
        if part.is_code:
            out.append(dialect.code_open() + dialect.code_body(part.text) + dialect.code_close())
        else:
            out.append(dialect.prose(part.text))
    return "".join(out)


def paginate(parts: Sequence[Part], dialect: Dialect, limit: int | None = None) -> list[str]:
    """``parts`` rendered as pages that each measure at most ``limit`` (the dialect's
    own by default); code blocks are closed at a page's end and reopened on the next.
    Nothing is lost: the pages hold every character of ``parts``, in order."""
    limit = dialect.limit if limit is None else limit
    wrapper = dialect.measure(dialect.code_open() + dialect.code_close())
    if limit <= wrapper + 8:
        raise ValueError(f"limit {limit} is too small for a code block")
    pages: list[list[Part]] = [[]]
    used = 0
    for atom in _atoms(parts, dialect, limit - wrapper):
        size = _size(atom, dialect)
        page = pages[-1]
        opens = atom.is_code and not (page and page[-1].is_code)
        extra = size + (wrapper if opens else 0)
        if page and used + extra > limit:
            pages.append([])
            page, used = pages[-1], 0
            extra = size + (wrapper if atom.is_code else 0)
        page.append(atom)
        used += extra
    rendered = [render(page, dialect) for page in pages if page]
    return rendered or [""]


def _size(atom: Part, dialect: Dialect) -> int:
    return dialect.measure(
        dialect.code_body(atom.text) if atom.is_code else dialect.prose(atom.text)
    )


def _atoms(parts: Iterable[Part], dialect: Dialect, room: int) -> Iterable[Part]:
    """Lines of each part (newline kept), lines too long for ``room`` cut by
    characters; prose lines keep inline code whole when it fits."""
    for part in parts:
        for line in part.text.splitlines(keepends=True):
            if _size(Part(line, part.is_code), dialect) <= room:
                yield Part(line, part.is_code)
                continue
            is_code = part.is_code

            def size(text: str, is_code: bool = is_code) -> int:
                return _size(Part(text, is_code), dialect)

            for piece in _cut(line, room, size):
                yield Part(piece, is_code)


def _cut(line: str, room: int, size: Callable[[str], int]) -> Iterable[str]:
    """``line`` in pieces that each measure at most ``room`` (binary search on the
    length, so escaping that grows text is counted)."""
    while line:
        low, high = 1, len(line)
        while low < high:
            middle = (low + high + 1) // 2
            if size(line[:middle]) <= room:
                low = middle
            else:
                high = middle - 1
        yield line[:low]
        line = line[low:]


def _merge(parts: Iterable[Part]) -> list[Part]:
    """Adjacent code parts joined into one block. Prose parts stay apart: each is
    rendered alone, as `paginate` measured it (a line cut in two must not pair the
    backticks of its halves into inline code)."""
    merged: list[Part] = []
    for part in parts:
        if merged and merged[-1].is_code and part.is_code:
            merged[-1] = Part(merged[-1].text + part.text, part.is_code)
        elif part.text:
            merged.append(part)
    return merged
