"""repl/markdown.py: a model's Markdown drawn in the transcript, faithfully (issue 19)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentrio.protocol.faithful import escape_char, is_invisible
from agentrio.repl.markdown import (
    BOLD,
    CODE,
    CODE_BLOCK,
    EMPHASIS,
    ESCAPE,
    FENCE,
    MARKUP_CHARS,
    Fence,
    plain,
    render_line,
    render_markdown,
)


def styles_of(fragments: tuple[tuple[str, str], ...], text: str) -> list[str]:
    return [style for style, piece in fragments if piece == text]


def test_inline_bold_emphasis_and_code() -> None:
    (line,) = render_markdown("Use **care**, *always* and `ls -la` now")
    assert plain(line) == "Use care, always and ls -la now"
    assert styles_of(line, "care") == [BOLD]
    assert styles_of(line, "always") == [EMPHASIS]
    assert styles_of(line, "ls -la") == [CODE]


def test_underscores_inside_words_stay_text() -> None:
    (line,) = render_markdown("snake_case_name and __init__ and _this_")
    assert plain(line) == "snake_case_name and init and this"


def test_markup_inside_code_spans_is_kept() -> None:
    (line,) = render_markdown("run `a **b** c` please")
    assert plain(line) == "run a **b** c please"


def test_headings_bullets_numbers_and_rules() -> None:
    lines = render_markdown("# Title\n## Sub ##\n- one\n  * two\n3. three\n---")
    assert [plain(line) for line in lines] == [
        "Title",
        "Sub",
        "• one",
        "  • two",
        "3. three",
        "───",
    ]
    assert "underline" in lines[0][0][0]
    assert "md.heading" in lines[1][0][0]


def test_fenced_code_is_highlighted_and_its_fences_drawn() -> None:
    """Issue 33 item 8: a fence is drawn as a dim rule naming its info string, not
    shown raw; the code between keeps its characters (no gutter: it copies out
    unchanged) and is highlighted."""
    lines = render_markdown("```python\ndef f():\n    return 1\n```\nafter *x*")
    assert [plain(line) for line in lines] == [
        "─── python",
        "def f():",
        "    return 1",
        "───",
        "after x",
    ]
    assert lines[0] == ((FENCE, "─── python"),)
    assert lines[3] == ((FENCE, "───"),)
    assert [plain(line) for line in render_markdown("  ~~~ js title=x.js\n1\n~~~~")] == [
        "─── js title=x.js",
        "1",
        "───",
    ]
    # Only blanks are dropped with the fence: an invisible character is shown, and a
    # line with one after the backticks does not close the block.
    assert [plain(line) for line in render_markdown("```\xa0\nx\n```\u200b\n```")] == [
        "─── \\xa0",
        "x",
        "```\\u200b",
        "───",
    ]
    keyword = styles_of(lines[1], "def")
    assert keyword
    assert keyword[0].startswith(CODE_BLOCK)
    assert "#" in keyword[0]
    # Markdown is not read inside a code block.
    (inside,) = render_markdown("```\n**not bold**\n")[1:2]
    assert inside == ((CODE_BLOCK, "**not bold**"),)


def test_an_unknown_language_is_plain_code() -> None:
    lines = render_markdown("```nosuchlang\nx = 1\n```")
    assert lines[1] == ((CODE_BLOCK, "x = 1"),)


def test_a_half_streamed_fence_renders_as_code() -> None:
    """A stream cut inside a code block shows the rest as code, line by line."""
    fragments, fence = render_line("```sh", None)
    assert fence == Fence("```", "sh")
    fragments, fence = render_line("echo **hi**", fence)
    assert plain(fragments) == "echo **hi**"
    assert all(style.startswith(CODE_BLOCK) for style, _ in fragments)
    assert fence is not None
    fragments, fence = render_line("````", fence)
    assert fence is None
    assert plain(fragments) == "───"


def test_a_longer_fence_is_not_closed_by_a_shorter_one() -> None:
    lines = render_markdown("````\n```\nstill code\n````\n*x*")
    assert [plain(line) for line in lines] == ["───", "```", "still code", "───", "x"]


def test_control_and_bidi_characters_show_as_escapes() -> None:
    """R77's rule holds in the transcript too: nothing invisible reaches the terminal."""
    (line,) = render_markdown("safe\u202e**x**\x1b[2J")
    assert plain(line) == "safe\\u202ex\\x1b[2J"
    assert styles_of(line, "\\u202e") == [ESCAPE]
    assert styles_of(line, "\\x1b") == [ESCAPE]
    (code,) = render_markdown("```\nA\u200bB\n")[1:2]
    assert plain(code) == "A\\u200bB"


def _visible(text: str) -> str:
    """The characters a rendering must keep, in order: no markup, no spaces."""
    return "".join(c for c in text if c not in MARKUP_CHARS and c not in "•─" and not c.isspace())


@given(
    st.lists(
        st.sampled_from(
            [
                *"ab1 *_`#-+~>.\n\t\r",
                "```",
                "```py\n",
                "~~~",
                "**",
                "\x1b",
                "\u202e",
                "\u200b",
                "\xa0",
                "é",
            ]
        ),
        max_size=40,
    ).map("".join)
)
def test_rendering_keeps_every_visible_character_in_order(text: str) -> None:
    """Rendering never hides or reorders a character other than markup; invisible ones
    appear as their escapes (a tab is drawn as spaces)."""
    expected = "".join(escape_char(c) if is_invisible(c) else c for c in text.replace("\t", " "))
    rendered = "\n".join(plain(line) for line in render_markdown(text))
    assert _visible(rendered) == _visible(expected)
    assert not any(is_invisible(c) for c in rendered if c not in "\n")
