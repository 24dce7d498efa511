"""Markdown of a model's answer → styled transcript lines (pure; no prompt_toolkit import).

What is drawn: fenced code blocks (highlighted by pygments when the fence names a
language it knows, plain otherwise), ``#`` headings, ``-``/``*``/``+`` bullets (shown
as ``•``), numbered items, ``**bold**``/``__bold__``, ``*emphasis*``/``_emphasis_``,
```inline code``` and ``---`` rules. Everything else is shown as it is.

It stays faithful to the text, like the confirmation dialog (`agentrio.protocol.faithful`): the
rendering drops only markup characters (the ``*``, ``_``, `````, ``#`` and bullet
characters it replaces by styles), never hides or reorders any other character, and
shows control, invisible and bidi characters as escapes (`agentrio.protocol.faithful.escape_char`)
in the ``md.escape`` style. A fence line is drawn, not shown raw (issue 33 item 8): its
backticks or tildes become a dim rule, ``─── python`` with the fence's info string when
it has one, a plain ``───`` to close; the code between is shown as it is (highlighted),
with no gutter, so it copies out of the terminal unchanged. A code block cut short by
the end of a stream simply continues as code.

Rendering goes line by line with the open fence as the only state (`render_line`), so
streamed text is drawn as each whole line arrives; `render_markdown` renders a whole
text. Styles are prompt_toolkit style strings: a ``class:md.*`` name (for tests and
style sheets) followed by inline attributes, so they show without any style table.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Final

import attrs
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.styles import get_style_by_name
from pygments.token import Token, _TokenType
from pygments.util import ClassNotFound

from agentrio.protocol.faithful import escape_char, is_invisible

__all__ = [
    "FENCE_RULE",
    "MARKUP_CHARS",
    "Fence",
    "Fragment",
    "Fragments",
    "escaped",
    "plain",
    "render_line",
    "render_markdown",
]

Fragment = tuple[str, str]
Fragments = tuple[Fragment, ...]

#: Characters the rendering may drop (or replace: ``•``, ``─``) because they are markup.
MARKUP_CHARS: Final = frozenset("*_`#-+~")

BOLD: Final = "class:md.bold bold"
EMPHASIS: Final = "class:md.emphasis italic"
CODE: Final = "class:md.code #d7875f"
CODE_BLOCK: Final = "class:md.codeblock"
FENCE: Final = "class:md.fence #808080"
HEADING: Final = "class:md.heading bold"
BULLET: Final = "class:md.bullet #5f87d7"
RULE: Final = "class:md.rule #808080"
QUOTE: Final = "class:md.quote italic"
ESCAPE: Final = "class:md.escape bg:#ffd75f #000000"

#: The pygments style code blocks are coloured with (readable on dark and light themes).
PYGMENTS_STYLE: Final = "monokai"
TAB: Final = "    "
#: What a code block's fence lines are drawn as (its info string follows the opening).
FENCE_RULE: Final = "───"

_FENCE_RE: Final = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)")
_HEADING_RE: Final = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+|$)(.*?)(?:[ \t]+#+)?[ \t]*$")
_BULLET_RE: Final = re.compile(r"^(\s*)([-*+])([ \t]+)(.*)$")
_NUMBER_RE: Final = re.compile(r"^(\s*)(\d{1,9}[.)])([ \t]+)(.*)$")
_RULE_RE: Final = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_QUOTE_RE: Final = re.compile(r"^( {0,3}>[ \t]?)(.*)$")
_INLINE_RE: Final = re.compile(
    r"(?P<tick>`+)(?P<code>.+?)(?P=tick)(?!`)"
    r"|\*\*(?P<b1>\S(?:.*?\S)?)\*\*"
    r"|(?<!\w)__(?P<b2>\S(?:.*?\S)?)__(?!\w)"
    r"|\*(?P<e1>[^\s*](?:[^*]*?[^\s*])?)\*"
    r"|(?<!\w)_(?P<e2>[^\s_](?:[^_]*?[^\s_])?)_(?!\w)"
)


@attrs.frozen
class Fence:
    """An open code block: its fence (``` or ~~~, at least as long) and language."""

    marker: str
    language: str = ""

    def closes(self, line: str) -> bool:
        stripped = line.strip(" \t")  # only blanks: a closing line drawn hides nothing
        char = self.marker[0]
        return len(stripped) >= len(self.marker) and stripped == char * len(stripped)


def plain(fragments: Fragments) -> str:
    """The text of ``fragments`` without styles."""
    return "".join(text for _, text in fragments)


def render_markdown(text: str) -> list[Fragments]:
    """Each line of ``text`` (split at ``\\n`` only), rendered."""
    fence: Fence | None = None
    lines: list[Fragments] = []
    for line in text.split("\n"):
        fragments, fence = render_line(line, fence)
        lines.append(fragments)
    return lines


def render_line(line: str, fence: Fence | None) -> tuple[Fragments, Fence | None]:
    """One line of Markdown inside ``fence`` (None: not in a code block); returns its
    fragments and the fence open after it."""
    line = line.replace("\t", TAB)
    if fence is not None:
        if fence.closes(line):
            return escaped([(FENCE, FENCE_RULE)]), None
        return escaped(_highlight(line, fence.language)), fence
    if match := _FENCE_RE.match(line):
        info = line[match.end(1) :].strip(" \t")  # an invisible character stays, escaped
        drawn = f"{FENCE_RULE} {info}" if info else FENCE_RULE
        return escaped([(FENCE, drawn)]), Fence(match.group(1), match.group(2).lower())
    return escaped(_block(line)), None


def _block(line: str) -> list[Fragment]:
    """A line outside code blocks: a heading, rule, list item, quote or paragraph."""
    if match := _HEADING_RE.match(line):
        level = len(match.group(1))
        style = HEADING + (" underline" if level == 1 else "")
        return _inline(match.group(2), style) or [(style, "")]
    if _RULE_RE.match(line):
        return [(RULE, "─" * max(3, len(line.strip())))]
    if match := _BULLET_RE.match(line):
        indent, _, gap, rest = match.groups()
        return [("", indent), (BULLET, "•"), ("", gap), *_inline(rest, "")]
    if match := _NUMBER_RE.match(line):
        indent, number, gap, rest = match.groups()
        return [("", indent), (BULLET, number), ("", gap), *_inline(rest, "")]
    if match := _QUOTE_RE.match(line):
        return [(RULE, match.group(1)), *_inline(match.group(2), QUOTE)]
    return _inline(line, "")


def _inline(text: str, base: str) -> list[Fragment]:
    """Code spans, bold and emphasis within one line; ``base`` styles the whole."""
    out: list[Fragment] = []
    at = 0
    for match in _INLINE_RE.finditer(text):
        if match.start() > at:
            out.append((base, text[at : match.start()]))
        kind = match.lastgroup
        inner = match.group(kind or 0)
        if kind == "code":
            out.append((_join(base, CODE), inner))
        elif kind in ("b1", "b2"):
            out.extend(_inline(inner, _join(base, BOLD)))
        else:
            out.extend(_inline(inner, _join(base, EMPHASIS)))
        at = match.end()
    if at < len(text):
        out.append((base, text[at:]))
    return out


def _join(base: str, style: str) -> str:
    return f"{base} {style}" if base else style


def escaped(fragments: Iterable[Fragment]) -> Fragments:
    """``fragments`` with every invisible character shown as its escape, and empty
    fragments dropped."""
    out: list[Fragment] = []
    for style, text in fragments:
        run: list[str] = []
        for char in text:
            if is_invisible(char):
                if run:
                    out.append((style, "".join(run)))
                    run = []
                out.append((ESCAPE, escape_char(char)))
            else:
                run.append(char)
        if run:
            out.append((style, "".join(run)))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _lexer(language: str) -> Lexer | None:
    if not language:
        return None
    try:
        return get_lexer_by_name(language, stripnl=False, ensurenl=False, stripall=False)
    except ClassNotFound:
        return None


@functools.lru_cache(maxsize=512)
def _token_style(token: _TokenType) -> str:
    """The prompt_toolkit style of a pygments token, from `PYGMENTS_STYLE`."""
    style = get_style_by_name(PYGMENTS_STYLE)
    spec = style.style_for_token(token)
    parts = [CODE_BLOCK]
    # The style's plain text colour is left to the terminal (it suits its background).
    if spec["color"] and spec["color"] != style.style_for_token(Token.Text)["color"]:
        parts.append(f"#{spec['color']}")
    if spec["bold"]:
        parts.append("bold")
    if spec["italic"]:
        parts.append("italic")
    return " ".join(parts) if len(parts) > 1 else CODE_BLOCK


def _highlight(line: str, language: str) -> list[Fragment]:
    """One line of a code block; highlighted when ``language`` is known to pygments
    (each line alone, so a streamed block colours as it arrives)."""
    lexer = _lexer(language)
    if lexer is None:
        return [(CODE_BLOCK, line)]
    out: list[Fragment] = []
    for token, value in lexer.get_tokens(line):
        style = _token_style(token)
        if out and out[-1][0] == style:
            out[-1] = (style, out[-1][1] + value)
        elif value:
            out.append((style, value))
    # A lexer may add or drop a final newline; the text shown must be the line itself.
    if plain(tuple(out)) != line:
        return [(CODE_BLOCK, line)]
    return out
