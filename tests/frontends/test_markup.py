"""R82: the chat core's text: markdown to Telegram HTML with escaping that cannot
inject markup, and pages within the limit that never break a code block."""

from __future__ import annotations

import html
from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from agentrio.frontends.markup import (
    TELEGRAM_HTML,
    Part,
    code,
    paginate,
    parse,
    prose,
    render,
    utf16_length,
)


class _Reader(HTMLParser):
    """Tags (in order) and text of an HTML fragment, as Telegram would read them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self.tags.append("/" + tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def read(fragment: str) -> tuple[list[str], str]:
    reader = _Reader()
    reader.feed(fragment)
    reader.close()
    return reader.tags, "".join(reader.text)


_no_backticks = st.text().map(lambda s: s.replace("`", "'").replace("*", "+"))


@given(_no_backticks)
def test_prose_is_text_only(text: str) -> None:
    """R82: whatever a model or a person writes, prose renders to no tag at all and
    reads back as itself (hostile ``</pre>``, ``<b>``, ``&amp;`` included)."""
    tags, back = read(TELEGRAM_HTML.prose(text))
    assert tags == []
    assert back == text


@given(st.text())
def test_code_cannot_close_its_block(text: str) -> None:
    """R82: a code block's body cannot end the block or open another tag."""
    tags, back = read(render([code(text)], TELEGRAM_HTML))
    assert tags == (["pre", "/pre"] if text else [])
    assert back == text


@given(st.text())
def test_inline_code_only_makes_code_tags(text: str) -> None:
    tags, _ = read(TELEGRAM_HTML.prose(text))
    assert set(tags) <= {"code", "/code", "b", "/b"}
    assert tags.count("code") == tags.count("/code")
    assert tags.count("b") == tags.count("/b")


def test_inline_markdown() -> None:
    assert TELEGRAM_HTML.prose("run **`ls`** or **a<b>** `x*` **") == (
        "run <b><code>ls</code></b> or <b>a&lt;b&gt;</b> <code>x*</code> **"
    )


def test_hostile_examples() -> None:
    hostile = '</pre><b>x</b> &amp; <a href="https://evil">y</a> <tg-spoiler>'
    rendered = render([prose(hostile), code(hostile)], TELEGRAM_HTML)
    tags, back = read(rendered)
    assert tags == ["pre", "/pre"]
    assert back == hostile + hostile


def test_parse_fenced_blocks() -> None:
    assert parse("see:\n```sh\nls -l\n```\ndone") == [
        prose("see:\n"),
        code("ls -l"),
        prose("done"),
    ]
    assert parse("```\nunclosed") == [code("unclosed")]


_parts = st.lists(
    st.builds(Part, _no_backticks.filter(bool), st.booleans()),
    max_size=6,
)


@settings(max_examples=200)
@given(_parts, st.integers(min_value=40, max_value=300))
def test_pages_fit_and_keep_everything(parts: list[Part], limit: int) -> None:
    """R82: every page measures at most the limit (UTF-16 units, as Telegram counts),
    opens and closes its code blocks itself, and together the pages hold every
    character, in order."""
    pages = paginate(parts, TELEGRAM_HTML, limit)
    assert all(utf16_length(page) <= limit for page in pages)
    text = ""
    for page in pages:
        tags, back = read(page)
        assert tags == ["pre", "/pre"] * (len(tags) // 2)
        text += back
    assert text == "".join(p.text for p in parts)


def test_long_code_block_over_pages() -> None:
    """R82: 3,000 lines of output in 4,096-character messages: each page is a closed
    code block, and no line is cut."""
    output = "".join(f"line {n}\n" for n in range(3000))
    pages = paginate([prose("result:\n"), code(output)], TELEGRAM_HTML)
    assert len(pages) > 5
    assert all(utf16_length(p) <= 4096 for p in pages)
    assert all(p.count("<pre>") == 1 and p.endswith("</pre>") for p in pages)
    bodies = [html.unescape(p.split("<pre>")[1].removesuffix("</pre>")) for p in pages]
    assert "".join(bodies) == output
    assert all(b.endswith("\n") for b in bodies)


@settings(max_examples=200)
@given(
    st.lists(st.builds(Part, st.text(min_size=1), st.booleans()), max_size=6), st.integers(40, 300)
)
def test_pages_fit_with_inline_code(parts: list[Part], limit: int) -> None:
    """R82: backticks (inline code in prose) never push a page over the limit nor
    leave a tag open."""
    for page in paginate(parts, TELEGRAM_HTML, limit):
        assert utf16_length(page) <= limit
        tags, _ = read(page)
        assert tags.count("pre") == tags.count("/pre")
        assert tags.count("code") == tags.count("/code")
