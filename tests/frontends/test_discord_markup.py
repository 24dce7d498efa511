"""R82: the Discord dialect of the chat core: markdown with escaping that cannot inject
formatting, links or mentions, and pages within Discord's 2,000 characters that never
break a code block."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agentrio.frontends.markup import (
    DISCORD_MARKDOWN,
    DISCORD_SPECIAL,
    code,
    paginate,
    parse,
    prose,
    utf16_length,
)

ZWSP = "\u200b"


def unescaped_specials(rendered: str) -> list[str]:
    """Markup characters of ``rendered`` that Discord would read as markup: those not
    preceded by a backslash that is itself not escaped."""
    found: list[str] = []
    escaped = False
    for char in rendered:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in DISCORD_SPECIAL:
            found.append(char)
    return found


def unescape(rendered: str) -> str:
    return re.sub(r"\\(.)", r"\1", rendered, flags=re.S)


_plain = st.text().map(lambda s: s.replace("`", "'").replace("**", "+*"))


@given(_plain)
def test_prose_injects_nothing(text: str) -> None:
    """R82: whatever a model or a person writes (``@everyone``, ``<@123>``, ``[x](y)``,
    ``# heading``, ``||spoiler||``), prose has no markup character Discord would read
    and reads back as itself."""
    rendered = DISCORD_MARKDOWN.prose(text)
    assert unescaped_specials(rendered) == []
    assert unescape(rendered) == text


def test_hostile_prose_examples() -> None:
    """R82: mentions and links are shown as text."""
    rendered = DISCORD_MARKDOWN.prose("@everyone <@123> [click](https://x) # big ||s||")
    assert "@everyone" not in rendered.replace("\\@", "")
    assert unescaped_specials(rendered) == []
    assert unescape(rendered) == "@everyone <@123> [click](https://x) # big ||s||"


def test_inline_code_and_bold() -> None:
    """R82: inline `code` stays verbatim, **bold** is bold with its inside escaped."""
    assert DISCORD_MARKDOWN.prose("run `ls *` now") == "run `ls *` now"
    assert DISCORD_MARKDOWN.prose("**a_b**") == "**a\\_b**"


@given(st.text())
def test_code_body_cannot_close_its_block(text: str) -> None:
    """R82: no run of three backticks inside a code block, whatever the command; what
    is shown is the command (with zero-width spaces after backticks)."""
    body = DISCORD_MARKDOWN.code_body(text)
    assert "``" not in body
    assert body.replace(ZWSP, "") == text.replace(ZWSP, "")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.text(alphabet=st.characters(codec="utf-8"), max_size=900)),
        max_size=8,
    )
)
def test_pages_within_limit_with_whole_code_blocks(chunks: list[tuple[bool, str]]) -> None:
    """R82: pages never exceed 2,000 (UTF-16 units, at least Discord's count), every
    page's fences pair up, and nothing is lost."""
    parts = [code(t) if is_code else prose(t) for is_code, t in chunks]
    pages = paginate(parts, DISCORD_MARKDOWN)
    for page in pages:
        assert utf16_length(page) <= 2000
        assert page.count("```") % 2 == 0
    shown = "".join(
        unescape(re.sub(r"```\n|\n```\n", "", page)).replace(ZWSP, "") for page in pages
    )
    original = "".join(t for _, t in chunks).replace(ZWSP, "")
    # Escaping aside, every character is kept in order.
    assert shown.replace("\\", "") == original.replace("\\", "")


def test_long_code_output_split_over_pages() -> None:
    """R82: 2,500 numbered lines in a code block make several pages, each a closed
    code block, holding every line."""
    text = "\n".join(str(n) for n in range(1, 2501))
    pages = paginate(parse(f"output:\n```\n{text}\n```\n"), DISCORD_MARKDOWN)
    assert len(pages) >= 6
    assert all(len(p) <= 2000 and p.count("```") % 2 == 0 for p in pages)
    bodies = "".join(re.findall(r"```\n(.*?)\n```", "".join(pages), re.S))
    assert [line for line in bodies.split("\n") if line] == text.split("\n")
